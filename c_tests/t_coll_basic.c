/* Every blocking collective with MPI_INT and MPI_DOUBLE (SUM for the
 * reductions), every root, counts 0, 1, nranks-1, odd and several MB, each
 * result compared with a reference computed locally from the same
 * deterministic per-rank data. Values are small integers, so floating-point
 * sums are exact whatever order the library reduces in. Receive buffers carry
 * guard elements past the end, to catch writes beyond the count. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <time.h>

enum { GUARD = 3 };
#define SENTINEL (-7777777L)
/* 1.5M ints: 6 MB per message, beyond any eager/socket buffer. */
#define LARGE 1500000L

static int rank, size;

typedef struct {
  MPI_Datatype type;
  size_t esz;
  int dbl;
  const char *name;
} kind_t;

static const kind_t kinds[2] = {
    {MPI_INT, sizeof(int), 0, "MPI_INT"},
    {MPI_DOUBLE, sizeof(double), 1, "MPI_DOUBLE"},
};

/* Deterministic data for rank r, element i, in [-1000, 1000]. */
static long val(int r, long i, int salt) {
  return (r * 1009L + i * 31L + salt * 7L) % 2001L - 1000L;
}

static void put(const kind_t *k, void *b, long i, long v) {
  if (k->dbl)
    ((double *)b)[i] = (double)v;
  else
    ((int *)b)[i] = (int)v;
}

static double get(const kind_t *k, const void *b, long i) {
  return k->dbl ? ((const double *)b)[i] : (double)((const int *)b)[i];
}

/* n elements plus guards, all set to the sentinel. */
static void *alloc_buf(const kind_t *k, long n) {
  void *b = malloc((size_t)(n + GUARD) * k->esz);
  CHECK(b != NULL, "malloc of %ld elements", n + GUARD);
  for (long i = 0; i < n + GUARD; i++) put(k, b, i, SENTINEL);
  return b;
}

static void expect(const kind_t *k, const void *b, long i, long want,
                   const char *what, long count, int root) {
  double got = get(k, b, i);
  CHECK(got == (double)want, "%s %s count %ld root %d: element %ld is %.17g, want %ld",
        what, k->name, count, root, i, got, want);
}

static void expect_guard(const kind_t *k, const void *b, long n,
                         const char *what, long count) {
  for (long i = n; i < n + GUARD; i++)
    CHECK(get(k, b, i) == (double)SENTINEL,
          "%s %s count %ld: guard element %ld overwritten", what, k->name,
          count, i);
}

/* The counts every case runs with; n-1 and 1 collapse to 0 at small sizes,
 * which is harmless. `blocked` divides the large count by the size for
 * collectives whose buffers are size * count long. */
static int ncounts(void) { return 5; }
static long count_at(int j, int blocked) {
  switch (j) {
  case 0: return 0;
  case 1: return 1;
  case 2: return size - 1;
  case 3: return 1001;
  default: return blocked ? LARGE / size : LARGE;
  }
}

static void sleep_ms(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}

/* Every rank in turn arrives late. The others send it a message only after
 * leaving the barrier, so nothing may have arrived while it dawdled. */
static void test_barrier(void) {
  for (int late = 0; late < size; late++) {
    const int tag = 100 + late;
    if (rank == late) {
      sleep_ms(20);
      /* Probe repeatedly: one probe may not drive enough progress to see a
       * message that is on its way. */
      for (int k = 0; k < 20; k++) {
        int flag = 1;
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag,
                             MPI_STATUS_IGNORE));
        CHECK(!flag, "a message arrived before rank %d entered the barrier", late);
        sleep_ms(1);
      }
      CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
      for (int i = 0; i < size - 1; i++) {
        int v = -1;
        MPI_Status st;
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st));
        CHECK(v == st.MPI_SOURCE, "barrier message from %d says %d", st.MPI_SOURCE, v);
      }
    } else {
      CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
      CHECK_MPI(MPI_Send(&rank, 1, MPI_INT, late, tag, MPI_COMM_WORLD));
    }
  }
  /* Back-to-back barriers must not be confused with each other. */
  for (int i = 0; i < 20; i++) CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  test_pass("barrier");
}

static void test_bcast(const kind_t *k) {
  for (int j = 0; j < ncounts(); j++) {
    long n = count_at(j, 0);
    for (int root = 0; root < size; root++) {
      void *b = alloc_buf(k, n);
      if (rank == root)
        for (long i = 0; i < n; i++) put(k, b, i, val(root, i, 1));
      CHECK_MPI(MPI_Bcast(b, (int)n, k->type, root, MPI_COMM_WORLD));
      for (long i = 0; i < n; i++) expect(k, b, i, val(root, i, 1), "bcast", n, root);
      expect_guard(k, b, n, "bcast", n);
      free(b);
    }
  }
}

static void test_reduce(const kind_t *k) {
  for (int j = 0; j < ncounts(); j++) {
    long n = count_at(j, 0);
    void *s = alloc_buf(k, n);
    for (long i = 0; i < n; i++) put(k, s, i, val(rank, i, 2));
    for (int root = 0; root < size; root++) {
      /* The receive buffer is significant only at the root: others pass NULL. */
      void *r = rank == root ? alloc_buf(k, n) : NULL;
      CHECK_MPI(MPI_Reduce(s, r, (int)n, k->type, MPI_SUM, root, MPI_COMM_WORLD));
      if (rank == root) {
        for (long i = 0; i < n; i++) {
          long want = 0;
          for (int q = 0; q < size; q++) want += val(q, i, 2);
          expect(k, r, i, want, "reduce", n, root);
        }
        expect_guard(k, r, n, "reduce", n);
        free(r);
      }
    }
    for (long i = 0; i < n; i++) expect(k, s, i, val(rank, i, 2), "reduce sendbuf", n, -1);
    free(s);
  }
}

static void test_allreduce(const kind_t *k) {
  for (int j = 0; j < ncounts(); j++) {
    long n = count_at(j, 0);
    void *s = alloc_buf(k, n), *r = alloc_buf(k, n);
    for (long i = 0; i < n; i++) put(k, s, i, val(rank, i, 3));
    CHECK_MPI(MPI_Allreduce(s, r, (int)n, k->type, MPI_SUM, MPI_COMM_WORLD));
    for (long i = 0; i < n; i++) {
      long want = 0;
      for (int q = 0; q < size; q++) want += val(q, i, 3);
      expect(k, r, i, want, "allreduce", n, -1);
      expect(k, s, i, val(rank, i, 3), "allreduce sendbuf", n, -1);
    }
    expect_guard(k, r, n, "allreduce", n);
    free(s);
    free(r);
  }
}

static void test_gather(const kind_t *k) {
  for (int j = 0; j < ncounts(); j++) {
    long n = count_at(j, 1);
    void *s = alloc_buf(k, n);
    for (long i = 0; i < n; i++) put(k, s, i, val(rank, i, 4));
    for (int root = 0; root < size; root++) {
      void *r = rank == root ? alloc_buf(k, n * size) : NULL;
      CHECK_MPI(MPI_Gather(s, (int)n, k->type, r, (int)n, k->type, root, MPI_COMM_WORLD));
      if (rank == root) {
        for (int q = 0; q < size; q++)
          for (long i = 0; i < n; i++)
            expect(k, r, q * n + i, val(q, i, 4), "gather", n, root);
        expect_guard(k, r, n * size, "gather", n);
        free(r);
      }
    }
    free(s);
  }
}

static void test_scatter(const kind_t *k) {
  for (int j = 0; j < ncounts(); j++) {
    long n = count_at(j, 1);
    for (int root = 0; root < size; root++) {
      void *s = NULL;
      if (rank == root) {
        s = alloc_buf(k, n * size);
        for (int q = 0; q < size; q++)
          for (long i = 0; i < n; i++) put(k, s, q * n + i, val(q, i, 5 + root));
      }
      void *r = alloc_buf(k, n);
      CHECK_MPI(MPI_Scatter(s, (int)n, k->type, r, (int)n, k->type, root, MPI_COMM_WORLD));
      for (long i = 0; i < n; i++) expect(k, r, i, val(rank, i, 5 + root), "scatter", n, root);
      expect_guard(k, r, n, "scatter", n);
      free(r);
      free(s);
    }
  }
}

static void test_allgather(const kind_t *k) {
  for (int j = 0; j < ncounts(); j++) {
    long n = count_at(j, 1);
    void *s = alloc_buf(k, n), *r = alloc_buf(k, n * size);
    for (long i = 0; i < n; i++) put(k, s, i, val(rank, i, 6));
    CHECK_MPI(MPI_Allgather(s, (int)n, k->type, r, (int)n, k->type, MPI_COMM_WORLD));
    for (int q = 0; q < size; q++)
      for (long i = 0; i < n; i++) expect(k, r, q * n + i, val(q, i, 6), "allgather", n, -1);
    expect_guard(k, r, n * size, "allgather", n);
    free(s);
    free(r);
  }
}

/* Block sent from rank `from` to rank `to`. */
static long a2a_val(int from, int to, long i) { return val(from, i + to * 7919L, 7); }

static void test_alltoall(const kind_t *k) {
  for (int j = 0; j < ncounts(); j++) {
    long n = count_at(j, 1);
    void *s = alloc_buf(k, n * size), *r = alloc_buf(k, n * size);
    for (int q = 0; q < size; q++)
      for (long i = 0; i < n; i++) put(k, s, q * n + i, a2a_val(rank, q, i));
    CHECK_MPI(MPI_Alltoall(s, (int)n, k->type, r, (int)n, k->type, MPI_COMM_WORLD));
    for (int q = 0; q < size; q++)
      for (long i = 0; i < n; i++)
        expect(k, r, q * n + i, a2a_val(q, rank, i), "alltoall", n, -1);
    expect_guard(k, r, n * size, "alltoall", n);
    free(s);
    free(r);
  }
}

static void test_reduce_scatter_block(const kind_t *k) {
  for (int j = 0; j < ncounts(); j++) {
    long n = count_at(j, 1);
    void *s = alloc_buf(k, n * size), *r = alloc_buf(k, n);
    for (long i = 0; i < n * size; i++) put(k, s, i, val(rank, i, 8));
    CHECK_MPI(MPI_Reduce_scatter_block(s, r, (int)n, k->type, MPI_SUM, MPI_COMM_WORLD));
    for (long i = 0; i < n; i++) {
      long want = 0;
      for (int q = 0; q < size; q++) want += val(q, rank * n + i, 8);
      expect(k, r, i, want, "reduce_scatter_block", n, -1);
    }
    expect_guard(k, r, n, "reduce_scatter_block", n);
    free(s);
    free(r);
  }
}

/* Uneven blocks: rank q gets n + q % 2 elements (t_coll_v covers more). */
static void test_reduce_scatter(const kind_t *k) {
  int *counts = (int *)malloc(sizeof(int) * (size_t)size);
  CHECK(counts != NULL, "malloc");
  for (int j = 0; j < ncounts(); j++) {
    long n = count_at(j, 1), total = 0, mine = 0;
    for (int q = 0; q < size; q++) {
      counts[q] = (int)(n + q % 2);
      if (q < rank) mine += counts[q];
      total += counts[q];
    }
    void *s = alloc_buf(k, total), *r = alloc_buf(k, counts[rank]);
    for (long i = 0; i < total; i++) put(k, s, i, val(rank, i, 9));
    CHECK_MPI(MPI_Reduce_scatter(s, r, counts, k->type, MPI_SUM, MPI_COMM_WORLD));
    for (long i = 0; i < counts[rank]; i++) {
      long want = 0;
      for (int q = 0; q < size; q++) want += val(q, mine + i, 9);
      expect(k, r, i, want, "reduce_scatter", n, -1);
    }
    expect_guard(k, r, counts[rank], "reduce_scatter", n);
    free(s);
    free(r);
  }
  free(counts);
}

static void test_scan(const kind_t *k, int exclusive) {
  const char *what = exclusive ? "exscan" : "scan";
  for (int j = 0; j < ncounts(); j++) {
    long n = count_at(j, 0);
    void *s = alloc_buf(k, n), *r = alloc_buf(k, n);
    for (long i = 0; i < n; i++) put(k, s, i, val(rank, i, 10));
    if (exclusive)
      CHECK_MPI(MPI_Exscan(s, r, (int)n, k->type, MPI_SUM, MPI_COMM_WORLD));
    else
      CHECK_MPI(MPI_Scan(s, r, (int)n, k->type, MPI_SUM, MPI_COMM_WORLD));
    /* Exscan leaves rank 0's receive buffer undefined. */
    if (!exclusive || rank > 0) {
      int upto = exclusive ? rank - 1 : rank;
      for (long i = 0; i < n; i++) {
        long want = 0;
        for (int q = 0; q <= upto; q++) want += val(q, i, 10);
        expect(k, r, i, want, what, n, -1);
      }
    }
    expect_guard(k, r, n, what, n);
    free(s);
    free(r);
  }
}

int main(int argc, char **argv) {
  CHECK_MPI(MPI_Init(&argc, &argv));
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));

  test_barrier();
  for (int t = 0; t < 2; t++) {
    const kind_t *k = &kinds[t];
    char name[64];
#define RUN(label, call)                                      \
    do {                                                      \
      call;                                                   \
      snprintf(name, sizeof name, "%s %s", label, k->name);   \
      test_pass(name);                                        \
    } while (0)
    RUN("bcast", test_bcast(k));
    RUN("reduce", test_reduce(k));
    RUN("allreduce", test_allreduce(k));
    RUN("gather", test_gather(k));
    RUN("scatter", test_scatter(k));
    RUN("allgather", test_allgather(k));
    RUN("alltoall", test_alltoall(k));
    RUN("reduce_scatter_block", test_reduce_scatter_block(k));
    RUN("reduce_scatter", test_reduce_scatter(k));
    RUN("scan", test_scan(k, 0));
    RUN("exscan", test_scan(k, 1));
#undef RUN
  }

  CHECK_MPI(MPI_Finalize());
  return 0;
}
