/* Collectives with committed MPI_Type_contiguous types: Bcast, Gather(v),
 * Scatter, Allgather(v), Alltoall, with matching and with differing (but
 * equivalent) type signatures on the two sides, e.g. 1 x contiguous(3, INT)
 * sent and 3 x MPI_INT received; displacements of the v variants count in
 * the derived type's extent. Reductions: MPICH 4.0.2 rejects a predefined op
 * on any derived type with MPI_ERR_OP (even a contiguous run of MPI_INT), so
 * that is checked here; a user op on the derived type works. Also the errors
 * for an uncommitted type and MPI_DATATYPE_NULL, and that a type built from a
 * freed type stays usable. */
#include "testutil.h"

enum { GUARD = 3 };
#define SENTINEL (-7777777)

static int rank, size;
static MPI_Datatype t3; /* contiguous(3, MPI_INT) */

static int val(int r, long i, int salt) {
  return (int)((r * 1009L + i * 31L + salt * 7L) % 2001L - 1000L);
}

static int *alloc_ints(long n) {
  int *b = (int *)malloc(sizeof(int) * (size_t)(n + GUARD));
  CHECK(b != NULL, "malloc of %ld ints", n + GUARD);
  for (long i = 0; i < n + GUARD; i++) b[i] = SENTINEL;
  return b;
}

static void expect_ints(const int *b, long n, int r, long first, int salt,
                        const char *what, int variant) {
  for (long i = 0; i < n; i++)
    CHECK(b[i] == val(r, first + i, salt), "%s variant %d: int %ld is %d, want %d", what,
          variant, i, b[i], val(r, first + i, salt));
}

static void expect_guard(const int *b, long n, const char *what) {
  for (long i = n; i < n + GUARD; i++)
    CHECK(b[i] == SENTINEL, "%s: guard int %ld overwritten", what, i);
}

/* Counts in units of t3 (3 ints). */
static const long counts[] = {0, 1, 5, 100001};
enum { NCOUNTS = sizeof counts / sizeof counts[0] };

/* Side of a transfer: either `count` t3s or `3 * count` MPI_INTs. */
static MPI_Datatype side_type(int as_ints) { return as_ints ? MPI_INT : t3; }
static int side_count(int as_ints, long n) { return (int)(as_ints ? 3 * n : n); }

static void test_bcast(void) {
  MPI_Datatype t6; /* contiguous(2, t3): a nested derived type */
  CHECK_MPI(MPI_Type_contiguous(2, t3, &t6));
  CHECK_MPI(MPI_Type_commit(&t6));
  for (int c = 0; c < NCOUNTS; c++) {
    long n = counts[c];
    for (int root = 0; root < size; root++)
      for (int v = 0; v < 3; v++) {
        /* v: 0 both t3; 1 root t3, others ints; 2 all t6 (n even ints * 6). */
        long nints = v == 2 ? 6 * n : 3 * n;
        int *b = alloc_ints(nints);
        if (rank == root)
          for (long i = 0; i < nints; i++) b[i] = val(root, i, 1);
        if (v == 2)
          CHECK_MPI(MPI_Bcast(b, (int)n, t6, root, MPI_COMM_WORLD));
        else
          CHECK_MPI(MPI_Bcast(b, side_count(v == 1 && rank != root, n),
                              side_type(v == 1 && rank != root), root, MPI_COMM_WORLD));
        expect_ints(b, nints, root, 0, 1, "bcast", v);
        expect_guard(b, nints, "bcast");
        free(b);
      }
  }
  CHECK_MPI(MPI_Type_free(&t6));
  CHECK(t6 == MPI_DATATYPE_NULL, "Type_free left the handle set");
  test_pass("types bcast");
}

/* Gather and Scatter: variant bit 0 makes the sending side MPI_INT, bit 1
 * the receiving side. */
static void test_gather_scatter(void) {
  for (int c = 0; c < NCOUNTS; c++) {
    long n = counts[c];
    for (int root = 0; root < size; root++)
      for (int v = 0; v < 4; v++) {
        int sint = v & 1, rint = (v >> 1) & 1;
        int *s = alloc_ints(3 * n);
        for (long i = 0; i < 3 * n; i++) s[i] = val(rank, i, 2);
        int *r = rank == root ? alloc_ints(3 * n * size) : NULL;
        CHECK_MPI(MPI_Gather(s, side_count(sint, n), side_type(sint), r, side_count(rint, n),
                             side_type(rint), root, MPI_COMM_WORLD));
        if (rank == root) {
          for (int q = 0; q < size; q++)
            expect_ints(r + 3 * n * q, 3 * n, q, 0, 2, "gather", v);
          expect_guard(r, 3 * n * size, "gather");
        }
        free(s);
        free(r);

        /* Scatter: root's send side uses rint's choice, receivers sint's. */
        s = rank == root ? alloc_ints(3 * n * size) : NULL;
        if (rank == root)
          for (int q = 0; q < size; q++)
            for (long i = 0; i < 3 * n; i++) s[3 * n * q + i] = val(q, i, 3);
        r = alloc_ints(3 * n);
        CHECK_MPI(MPI_Scatter(s, side_count(rint, n), side_type(rint), r, side_count(sint, n),
                              side_type(sint), root, MPI_COMM_WORLD));
        expect_ints(r, 3 * n, rank, 0, 3, "scatter", v);
        expect_guard(r, 3 * n, "scatter");
        free(s);
        free(r);
      }
  }
  test_pass("types gather/scatter");
}

static void test_allgather_alltoall(void) {
  for (int c = 0; c < NCOUNTS; c++) {
    long n = counts[c] > 1000 ? counts[c] / size : counts[c];
    for (int v = 0; v < 4; v++) {
      int sint = v & 1, rint = (v >> 1) & 1;
      int *s = alloc_ints(3 * n), *r = alloc_ints(3 * n * size);
      for (long i = 0; i < 3 * n; i++) s[i] = val(rank, i, 4);
      CHECK_MPI(MPI_Allgather(s, side_count(sint, n), side_type(sint), r, side_count(rint, n),
                              side_type(rint), MPI_COMM_WORLD));
      for (int q = 0; q < size; q++) expect_ints(r + 3 * n * q, 3 * n, q, 0, 4, "allgather", v);
      expect_guard(r, 3 * n * size, "allgather");
      free(s);
      free(r);

      s = alloc_ints(3 * n * size);
      r = alloc_ints(3 * n * size);
      /* Block for rank q starts at element q * 3n of rank `rank`'s data,
       * salted by the sender. */
      for (long i = 0; i < 3 * n * size; i++) s[i] = val(rank, i, 5);
      CHECK_MPI(MPI_Alltoall(s, side_count(sint, n), side_type(sint), r, side_count(rint, n),
                             side_type(rint), MPI_COMM_WORLD));
      for (int q = 0; q < size; q++)
        expect_ints(r + 3 * n * q, 3 * n, q, 3 * n * rank, 5, "alltoall", v);
      expect_guard(r, 3 * n * size, "alltoall");
      free(s);
      free(r);
    }
  }
  test_pass("types allgather/alltoall");
}

/* Gatherv and Allgatherv with displacements in units of t3's extent (12
 * bytes): rank q's block of q % 3 + 1 t3s goes to t3 slot 8 * q + 1. */
static void test_v(void) {
  int *rc = (int *)malloc(sizeof(int) * (size_t)size);
  int *dp = (int *)malloc(sizeof(int) * (size_t)size);
  CHECK(rc && dp, "malloc");
  long slots = 0;
  for (int q = 0; q < size; q++) {
    rc[q] = q % 3 + 1;
    dp[q] = 8 * q + 1;
    slots = dp[q] + rc[q];
  }
  int mine = rc[rank];
  int *s = alloc_ints(3L * mine);
  for (long i = 0; i < 3L * mine; i++) s[i] = val(rank, i, 6);
  for (int root = 0; root < size; root++) {
    int *r = rank == root ? alloc_ints(3 * slots) : NULL;
    /* The sender describes its data as ints, the root as t3s. */
    CHECK_MPI(MPI_Gatherv(s, 3 * mine, MPI_INT, r, rc, dp, t3, root, MPI_COMM_WORLD));
    if (rank == root) {
      for (int q = 0; q < size; q++) expect_ints(r + 3 * dp[q], 3L * rc[q], q, 0, 6, "gatherv", 0);
      for (long i = 0; i < 3 * slots + GUARD; i++) {
        int in_block = 0;
        for (int q = 0; q < size; q++)
          if (i >= 3L * dp[q] && i < 3L * (dp[q] + rc[q])) in_block = 1;
        if (!in_block) CHECK(r[i] == SENTINEL, "gatherv: int %ld in a gap was written", i);
      }
      free(r);
    }
  }
  /* Allgatherv starts rank 0's block at 0: MPICH 4.0.2 ignores displs on a
   * one-rank communicator (t_coll_v covers that case). */
  for (int q = 0; q < size; q++) dp[q] -= 1;
  int *r = alloc_ints(3 * slots);
  CHECK_MPI(MPI_Allgatherv(s, mine, t3, r, rc, dp, t3, MPI_COMM_WORLD));
  for (int q = 0; q < size; q++) {
    expect_ints(r + 3 * dp[q], 3L * rc[q], q, 0, 6, "allgatherv", 0);
    long gap_end = q + 1 < size ? 3L * dp[q + 1] : 3L * (slots - 1) + GUARD;
    for (long i = 3L * (dp[q] + rc[q]); i < gap_end; i++)
      CHECK(r[i] == SENTINEL, "allgatherv: int %ld in a gap was written", i);
  }
  free(r);
  free(s);
  free(rc);
  free(dp);
  test_pass("types gatherv/allgatherv");
}

static void sum3(void *in, void *inout, int *len, MPI_Datatype *dt) {
  CHECK(*dt == t3, "sum3 called with another datatype");
  const int *a = (const int *)in;
  int *b = (int *)inout;
  for (int i = 0; i < 3 * *len; i++) b[i] += a[i];
}

static void test_reductions(void) {
  MPI_Datatype f2;
  CHECK_MPI(MPI_Type_contiguous(2, MPI_FLOAT, &f2));
  CHECK_MPI(MPI_Type_commit(&f2));
  int s[6], r[6];
  float fs[4] = {1, 2, 3, 4}, fr[4];
  for (int i = 0; i < 6; i++) s[i] = val(rank, i, 7);

  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  CHECK_ERR(MPI_Allreduce(s, r, 2, t3, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_OP);
  CHECK_ERR(MPI_Allreduce(s, r, 2, t3, MPI_MAX, MPI_COMM_WORLD), MPI_ERR_OP);
  CHECK_ERR(MPI_Reduce(s, r, 2, t3, MPI_SUM, 0, MPI_COMM_WORLD), MPI_ERR_OP);
  CHECK_ERR(MPI_Scan(s, r, 2, t3, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_OP);
  CHECK_ERR(MPI_Exscan(s, r, 2, t3, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_OP);
  CHECK_ERR(MPI_Allreduce(fs, fr, 2, f2, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_OP);
  CHECK_ERR(MPI_Allreduce(fs, fr, 2, f2, MPI_BAND, MPI_COMM_WORLD), MPI_ERR_OP);
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

  MPI_Op op;
  CHECK_MPI(MPI_Op_create(sum3, 1, &op));
  for (int i = 0; i < 6; i++) r[i] = SENTINEL;
  CHECK_MPI(MPI_Allreduce(s, r, 2, t3, op, MPI_COMM_WORLD));
  for (int i = 0; i < 6; i++) {
    int want = 0;
    for (int q = 0; q < size; q++) want += val(q, i, 7);
    CHECK(r[i] == want, "user op on t3: int %d is %d, want %d", i, r[i], want);
  }
  CHECK_MPI(MPI_Op_free(&op));
  CHECK_MPI(MPI_Type_free(&f2));
  test_pass("types reductions");
}

static void test_errors(void) {
  MPI_Datatype raw;
  CHECK_MPI(MPI_Type_contiguous(3, MPI_INT, &raw)); /* never committed */
  int b[3 * 8 + 3] = {0}, r[3 * 8 + 3];
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  CHECK_ERR(MPI_Bcast(b, 1, raw, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
  CHECK_ERR(MPI_Allgather(b, 1, raw, r, 1, raw, MPI_COMM_WORLD), MPI_ERR_TYPE);
  CHECK_ERR(MPI_Alltoall(b, 1, raw, r, 1, raw, MPI_COMM_WORLD), MPI_ERR_TYPE);
  CHECK_ERR(MPI_Gather(b, 1, raw, r, 1, raw, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
  CHECK_ERR(MPI_Bcast(b, 1, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  /* Committing it makes it usable. */
  CHECK_MPI(MPI_Type_commit(&raw));
  for (int i = 0; i < 3; i++) b[i] = rank == 0 ? 40 + i : -1;
  CHECK_MPI(MPI_Bcast(b, 1, raw, 0, MPI_COMM_WORLD));
  CHECK(b[0] == 40 && b[2] == 42, "bcast after commit: %d %d", b[0], b[2]);
  CHECK_MPI(MPI_Type_free(&raw));
  test_pass("types errors");
}

/* A type built from a freed one keeps working (the standard says freeing
 * marks the handle only; derived types using it are unaffected). */
static void test_freed_parent(void) {
  MPI_Datatype inner, outer;
  CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &inner));
  CHECK_MPI(MPI_Type_contiguous(5, inner, &outer));
  CHECK_MPI(MPI_Type_commit(&outer));
  CHECK_MPI(MPI_Type_free(&inner));
  int sz = 0;
  CHECK_MPI(MPI_Type_size(outer, &sz));
  CHECK(sz == 10 * (int)sizeof(int), "size of contiguous(5, contiguous(2, INT)) is %d", sz);
  int *b = alloc_ints(10L * size), *r = alloc_ints(10L * size);
  for (int i = 0; i < 10; i++) b[i] = val(rank, i, 8);
  CHECK_MPI(MPI_Allgather(b, 1, outer, r, 1, outer, MPI_COMM_WORLD));
  for (int q = 0; q < size; q++) expect_ints(r + 10 * q, 10, q, 0, 8, "allgather freed parent", 0);
  expect_guard(r, 10L * size, "allgather freed parent");
  CHECK_MPI(MPI_Type_free(&outer));
  free(b);
  free(r);
  test_pass("types freed parent");
}

int main(int argc, char **argv) {
  CHECK_MPI(MPI_Init(&argc, &argv));
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));

  CHECK_MPI(MPI_Type_contiguous(3, MPI_INT, &t3));
  CHECK_MPI(MPI_Type_commit(&t3));
  int sz = 0;
  MPI_Aint lb = -1, ext = -1;
  CHECK_MPI(MPI_Type_size(t3, &sz));
  CHECK_MPI(MPI_Type_get_extent(t3, &lb, &ext));
  CHECK(sz == 3 * (int)sizeof(int) && lb == 0 && ext == 3 * (MPI_Aint)sizeof(int),
        "contiguous(3, INT): size %d lb %ld extent %ld", sz, (long)lb, (long)ext);
  test_pass("types size/extent");

  test_bcast();
  test_gather_scatter();
  test_allgather_alltoall();
  test_v();
  test_reductions();
  test_errors();
  test_freed_parent();

  CHECK_MPI(MPI_Type_free(&t3));
  CHECK(t3 == MPI_DATATYPE_NULL, "Type_free left the handle set");
  CHECK_MPI(MPI_Finalize());
  return 0;
}
