/* MPI_IN_PLACE everywhere the standard allows it: Reduce (root), Allreduce,
 * Gather/Gatherv (root sendbuf), Scatter/Scatterv (root recvbuf),
 * Allgather/Allgatherv, Alltoall/Alltoallv, Reduce_scatter_block,
 * Reduce_scatter, Scan, Exscan. Each result is compared with a reference
 * computed locally; buffers have guard elements past the end, and the parts
 * of an in-place buffer a collective must leave alone are checked too.
 * MPICH 4.0.2 (ch4) crashes on an in-place Reduce of 1001+ ints in its device
 * collective; run it there with MPIR_CVAR_REDUCE_DEVICE_COLLECTIVE=0. */
#include "testutil.h"

enum { GUARD = 3 };
#define SENTINEL (-7777777)

static int rank, size;

/* Deterministic int data for rank r, element i. */
static int val(int r, long i, int salt) {
  return (int)((r * 1009L + i * 31L + salt * 7L) % 2001L - 1000L);
}

static int *alloc_ints(long n) {
  int *b = (int *)malloc(sizeof(int) * (size_t)(n + GUARD));
  CHECK(b != NULL, "malloc of %ld ints", n + GUARD);
  for (long i = 0; i < n + GUARD; i++) b[i] = SENTINEL;
  return b;
}

#define EXPECT(buf, i, want, what, n, root)                                     \
  do {                                                                          \
    int w_ = (want);                                                            \
    CHECK((buf)[i] == w_, "%s count %ld root %d: element %ld is %d, want %d",   \
          what, (long)(n), (int)(root), (long)(i), (buf)[i], w_);               \
  } while (0)

static void expect_guard(const int *b, long n, const char *what, long count) {
  for (long i = n; i < n + GUARD; i++)
    CHECK(b[i] == SENTINEL, "%s count %ld: guard element %ld overwritten",
          what, count, i);
}

static const long counts[] = {0, 1, 7, 1001, 300000};
enum { NCOUNTS = sizeof counts / sizeof counts[0] };

/* Blocked collectives keep their whole buffer near the largest count. */
static long blocked(long n) { return n > 1001 ? n / size : n; }

static int sum_over(int upto, long i, int salt) {
  int s = 0;
  for (int q = 0; q <= upto; q++) s += val(q, i, salt);
  return s;
}

static void test_reduce(void) {
  for (int c = 0; c < NCOUNTS; c++) {
    long n = counts[c];
    for (int root = 0; root < size; root++) {
      int *b = alloc_ints(n);
      for (long i = 0; i < n; i++) b[i] = val(rank, i, 1);
      if (rank == root)
        CHECK_MPI(MPI_Reduce(MPI_IN_PLACE, b, (int)n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
      else
        CHECK_MPI(MPI_Reduce(b, NULL, (int)n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
      for (long i = 0; i < n; i++)
        EXPECT(b, i, rank == root ? sum_over(size - 1, i, 1) : val(rank, i, 1),
               "reduce in place", n, root);
      expect_guard(b, n, "reduce in place", n);
      free(b);
    }
  }
  test_pass("reduce in place");
}

static void test_allreduce(void) {
  for (int c = 0; c < NCOUNTS; c++) {
    long n = counts[c];
    int *b = alloc_ints(n);
    for (long i = 0; i < n; i++) b[i] = val(rank, i, 2);
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, b, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    for (long i = 0; i < n; i++) EXPECT(b, i, sum_over(size - 1, i, 2), "allreduce in place", n, -1);
    expect_guard(b, n, "allreduce in place", n);
    free(b);
  }
  test_pass("allreduce in place");
}

static void test_scan(int exclusive) {
  const char *what = exclusive ? "exscan in place" : "scan in place";
  for (int c = 0; c < NCOUNTS; c++) {
    long n = counts[c];
    int *b = alloc_ints(n);
    for (long i = 0; i < n; i++) b[i] = val(rank, i, 3);
    if (exclusive)
      CHECK_MPI(MPI_Exscan(MPI_IN_PLACE, b, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    else
      CHECK_MPI(MPI_Scan(MPI_IN_PLACE, b, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    /* Exscan leaves rank 0's buffer undefined. */
    if (!exclusive || rank > 0)
      for (long i = 0; i < n; i++)
        EXPECT(b, i, sum_over(exclusive ? rank - 1 : rank, i, 3), what, n, -1);
    expect_guard(b, n, what, n);
    free(b);
  }
  test_pass(what);
}

/* Gather and Gatherv with the root's contribution already in place. The v
 * variant uses uneven counts (q % 3 extra) and a gap of 2 between blocks. */
static void test_gather(int vee) {
  const char *what = vee ? "gatherv in place" : "gather in place";
  int *rc = (int *)malloc(sizeof(int) * (size_t)size);
  int *dp = (int *)malloc(sizeof(int) * (size_t)size);
  CHECK(rc && dp, "malloc");
  for (int c = 0; c < NCOUNTS; c++) {
    long n = blocked(counts[c]), total = 0;
    for (int q = 0; q < size; q++) {
      rc[q] = (int)(vee ? n + q % 3 : n);
      dp[q] = (int)total;
      total += rc[q] + (vee ? 2 : 0);
    }
    int mine = rc[rank];
    for (int root = 0; root < size; root++) {
      int *s = alloc_ints(mine);
      for (long i = 0; i < mine; i++) s[i] = val(rank, i, 4);
      if (rank == root) {
        int *r = alloc_ints(total);
        for (long i = 0; i < mine; i++) r[dp[rank] + i] = s[i];
        if (vee)
          CHECK_MPI(MPI_Gatherv(MPI_IN_PLACE, mine, MPI_INT, r, rc, dp, MPI_INT, root, MPI_COMM_WORLD));
        else
          CHECK_MPI(MPI_Gather(MPI_IN_PLACE, mine, MPI_INT, r, mine, MPI_INT, root, MPI_COMM_WORLD));
        for (int q = 0; q < size; q++) {
          for (long i = 0; i < rc[q]; i++) EXPECT(r, dp[q] + i, val(q, i, 4), what, n, root);
          if (vee)
            for (long i = rc[q]; i < rc[q] + 2; i++) EXPECT(r, dp[q] + i, SENTINEL, what, n, root);
        }
        expect_guard(r, total, what, n);
        free(r);
      } else if (vee) {
        CHECK_MPI(MPI_Gatherv(s, mine, MPI_INT, NULL, NULL, NULL, MPI_INT, root, MPI_COMM_WORLD));
      } else {
        CHECK_MPI(MPI_Gather(s, mine, MPI_INT, NULL, mine, MPI_INT, root, MPI_COMM_WORLD));
      }
      free(s);
    }
  }
  free(rc);
  free(dp);
  test_pass(what);
}

/* Scatter and Scatterv where the root keeps its own block in the send
 * buffer; the root's send buffer must come back unchanged. */
static void test_scatter(int vee) {
  const char *what = vee ? "scatterv in place" : "scatter in place";
  int *sc = (int *)malloc(sizeof(int) * (size_t)size);
  int *dp = (int *)malloc(sizeof(int) * (size_t)size);
  CHECK(sc && dp, "malloc");
  for (int c = 0; c < NCOUNTS; c++) {
    long n = blocked(counts[c]), total = 0;
    for (int q = 0; q < size; q++) {
      sc[q] = (int)(vee ? n + (q + 1) % 2 : n);
      dp[q] = (int)total;
      total += sc[q] + (vee ? 1 : 0);
    }
    int mine = sc[rank];
    for (int root = 0; root < size; root++) {
      if (rank == root) {
        int *s = alloc_ints(total);
        for (int q = 0; q < size; q++)
          for (long i = 0; i < sc[q]; i++) s[dp[q] + i] = val(q, i, 5 + root);
        if (vee)
          CHECK_MPI(MPI_Scatterv(s, sc, dp, MPI_INT, MPI_IN_PLACE, mine, MPI_INT, root, MPI_COMM_WORLD));
        else
          CHECK_MPI(MPI_Scatter(s, mine, MPI_INT, MPI_IN_PLACE, mine, MPI_INT, root, MPI_COMM_WORLD));
        for (int q = 0; q < size; q++)
          for (long i = 0; i < sc[q]; i++) EXPECT(s, dp[q] + i, val(q, i, 5 + root), what, n, root);
        expect_guard(s, total, what, n);
        free(s);
      } else {
        int *r = alloc_ints(mine);
        if (vee)
          CHECK_MPI(MPI_Scatterv(NULL, NULL, NULL, MPI_INT, r, mine, MPI_INT, root, MPI_COMM_WORLD));
        else
          CHECK_MPI(MPI_Scatter(NULL, mine, MPI_INT, r, mine, MPI_INT, root, MPI_COMM_WORLD));
        for (long i = 0; i < mine; i++) EXPECT(r, i, val(rank, i, 5 + root), what, n, root);
        expect_guard(r, mine, what, n);
        free(r);
      }
    }
  }
  free(sc);
  free(dp);
  test_pass(what);
}

/* Allgather(v): every rank's own block is already in place; the v variant
 * stores blocks in reverse rank order with a gap of one. */
static void test_allgather(int vee) {
  const char *what = vee ? "allgatherv in place" : "allgather in place";
  int *rc = (int *)malloc(sizeof(int) * (size_t)size);
  int *dp = (int *)malloc(sizeof(int) * (size_t)size);
  CHECK(rc && dp, "malloc");
  for (int c = 0; c < NCOUNTS; c++) {
    long n = blocked(counts[c]), total = 0;
    for (int q = size - 1; q >= 0; q--) {
      rc[q] = (int)(vee ? n + q % 2 : n);
      dp[q] = (int)(vee ? total : q * n);
      total += rc[q] + (vee ? 1 : 0);
    }
    int *r = alloc_ints(total);
    for (long i = 0; i < rc[rank]; i++) r[dp[rank] + i] = val(rank, i, 6);
    if (vee)
      CHECK_MPI(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, rc, dp, MPI_INT, MPI_COMM_WORLD));
    else
      CHECK_MPI(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, (int)n, MPI_INT, MPI_COMM_WORLD));
    for (int q = 0; q < size; q++) {
      for (long i = 0; i < rc[q]; i++) EXPECT(r, dp[q] + i, val(q, i, 6), what, n, -1);
      if (vee) EXPECT(r, dp[q] + rc[q], SENTINEL, what, n, -1);
    }
    expect_guard(r, total, what, n);
    free(r);
  }
  free(rc);
  free(dp);
  test_pass(what);
}

/* Block sent from rank `from` to rank `to`. */
static int a2a_val(int from, int to, long i) { return val(from, i + to * 7919L, 7); }

static void test_alltoall(void) {
  for (int c = 0; c < NCOUNTS; c++) {
    long n = blocked(counts[c]);
    int *r = alloc_ints(n * size);
    for (int q = 0; q < size; q++)
      for (long i = 0; i < n; i++) r[q * n + i] = a2a_val(rank, q, i);
    CHECK_MPI(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, (int)n, MPI_INT, MPI_COMM_WORLD));
    for (int q = 0; q < size; q++)
      for (long i = 0; i < n; i++) EXPECT(r, q * n + i, a2a_val(q, rank, i), "alltoall in place", n, -1);
    expect_guard(r, n * size, "alltoall in place", n);
    free(r);
  }
  test_pass("alltoall in place");
}

/* Alltoallv in place: the counts must be symmetric (what rank a sends to b
 * equals what b receives from a), here n + (a + b) % 3, and blocks are laid
 * out in reverse rank order with a gap of one. */
static void test_alltoallv(void) {
  int *cnt = (int *)malloc(sizeof(int) * (size_t)size);
  int *dp = (int *)malloc(sizeof(int) * (size_t)size);
  CHECK(cnt && dp, "malloc");
  for (int c = 0; c < NCOUNTS; c++) {
    long n = blocked(counts[c]), total = 0;
    for (int q = size - 1; q >= 0; q--) {
      cnt[q] = (int)(n + (rank + q) % 3);
      dp[q] = (int)total;
      total += cnt[q] + 1;
    }
    int *r = alloc_ints(total);
    for (int q = 0; q < size; q++)
      for (long i = 0; i < cnt[q]; i++) r[dp[q] + i] = a2a_val(rank, q, i);
    CHECK_MPI(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, r, cnt, dp, MPI_INT, MPI_COMM_WORLD));
    for (int q = 0; q < size; q++) {
      for (long i = 0; i < cnt[q]; i++) EXPECT(r, dp[q] + i, a2a_val(q, rank, i), "alltoallv in place", n, -1);
      EXPECT(r, dp[q] + cnt[q], SENTINEL, "alltoallv in place gap", n, -1);
    }
    expect_guard(r, total, "alltoallv in place", n);
    free(r);
  }
  free(cnt);
  free(dp);
  test_pass("alltoallv in place");
}

/* Reduce_scatter(_block) in place: the input is the whole receive buffer and
 * rank q's block of the result lands at its start. At small counts a block
 * may be longer than its offset, so moving it to the front is an overlapping
 * copy; at large counts rank 0's block is the longest, because MPICH 4.0.2
 * memcpy()s overlapping ranges there and aborts. */
static void test_reduce_scatter(int vee) {
  const char *what = vee ? "reduce_scatter in place" : "reduce_scatter_block in place";
  int *rc = (int *)malloc(sizeof(int) * (size_t)size);
  CHECK(rc != NULL, "malloc");
  for (int c = 0; c < NCOUNTS; c++) {
    long n = blocked(counts[c]), total = 0, off = 0;
    for (int q = 0; q < size; q++) {
      rc[q] = (int)(!vee ? n : n > 1001 ? n - (q * 2) % 3 : n + (q * 2) % 3);
      if (q < rank) off += rc[q];
      total += rc[q];
    }
    int *b = alloc_ints(total);
    for (long i = 0; i < total; i++) b[i] = val(rank, i, 8);
    if (vee)
      CHECK_MPI(MPI_Reduce_scatter(MPI_IN_PLACE, b, rc, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    else
      CHECK_MPI(MPI_Reduce_scatter_block(MPI_IN_PLACE, b, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    for (long i = 0; i < rc[rank]; i++) EXPECT(b, i, sum_over(size - 1, off + i, 8), what, n, -1);
    expect_guard(b, total, what, n);
    free(b);
  }
  free(rc);
  test_pass(what);
}

int main(int argc, char **argv) {
  CHECK_MPI(MPI_Init(&argc, &argv));
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));

  test_reduce();
  test_allreduce();
  test_gather(0);
  test_gather(1);
  test_scatter(0);
  test_scatter(1);
  test_allgather(0);
  test_allgather(1);
  test_alltoall();
  test_alltoallv();
  test_reduce_scatter(0);
  test_reduce_scatter(1);
  test_scan(0);
  test_scan(1);

  CHECK_MPI(MPI_Finalize());
  return 0;
}
