/* User-defined reduction ops (MPI_Op_create / MPI_Op_free) in Reduce (every
 * root), Allreduce (also in place), Scan, Exscan, Reduce_scatter_block and
 * Reduce_scatter:
 *  - a commutative one: multiplication modulo a prime, on MPI_INT;
 *  - a non-commutative one on MPI_INT: "first non-zero", which is
 *    associative and tells which rank's value came first;
 *  - a non-commutative one on a derived type: 2x2 integer matrix product
 *    modulo a prime on MPI_Type_contiguous(4, MPI_INT), which a library may
 *    not split inside an element.
 * Non-commutative ops must combine in rank order; the reference is the
 * rank-order fold computed here. */
#include "testutil.h"

#define PRIME 1009
enum { GUARD = 2 };
#define SENTINEL (-7777777)

static int rank, size;
static MPI_Datatype mat_type; /* 4 ints: a 2x2 matrix, row-major */
static long calls;            /* invocations of the user functions here */

/* The datatype handed to the user function must be the one given to the
 * collective. */
static void prod_mod(void *in, void *inout, int *len, MPI_Datatype *dt) {
  CHECK(*dt == MPI_INT, "prod_mod called with another datatype");
  const int *a = (const int *)in;
  int *b = (int *)inout;
  for (int i = 0; i < *len; i++) b[i] = (int)((long)a[i] * b[i] % PRIME);
  calls++;
}

/* inout = in op inout, where in comes from the lower ranks. */
static void first_nonzero(void *in, void *inout, int *len, MPI_Datatype *dt) {
  CHECK(*dt == MPI_INT, "first_nonzero called with another datatype");
  const int *a = (const int *)in;
  int *b = (int *)inout;
  for (int i = 0; i < *len; i++)
    if (a[i] != 0) b[i] = a[i];
  calls++;
}

static void mat_mul(const int *x, const int *y, int *out) {
  int t[4];
  t[0] = (x[0] * y[0] + x[1] * y[2]) % PRIME;
  t[1] = (x[0] * y[1] + x[1] * y[3]) % PRIME;
  t[2] = (x[2] * y[0] + x[3] * y[2]) % PRIME;
  t[3] = (x[2] * y[1] + x[3] * y[3]) % PRIME;
  memcpy(out, t, sizeof t);
}

static void mat_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
  CHECK(*dt == mat_type, "mat_op called with another datatype");
  const int *a = (const int *)in;
  int *b = (int *)inout;
  for (int i = 0; i < *len; i++) mat_mul(a + 4 * i, b + 4 * i, b + 4 * i);
  calls++;
}

/* The three ops under test: element width in ints, the reference
 * combination, and rank r's data for element i. */
typedef struct {
  const char *name;
  MPI_User_function *fn;
  int commute;
  int width;
} opdesc;

static const opdesc descs[3] = {
    {"prod_mod", prod_mod, 1, 1},
    {"first_nonzero", first_nonzero, 0, 1},
    {"mat_mul", mat_op, 0, 4},
};

static void gen(int which, int r, long i, int *out) {
  switch (which) {
  case 0: out[0] = (int)((r * 131L + i * 17L) % (PRIME - 1)) + 1; break;
  case 1: out[0] = (i + r) % 3 != 0 ? (int)((r + 1) * 100000L + i % 1000) : 0; break;
  default:
    out[0] = (int)((r + i) % 5) + 1;
    out[1] = (int)((r * 3 + i) % 4);
    out[2] = (int)(i % 3) + 1;
    out[3] = (int)((r + 2 * i) % 5);
  }
}

/* acc = acc op x, acc holding the earlier ranks. */
static void combine(int which, int *acc, const int *x) {
  switch (which) {
  case 0: acc[0] = (int)((long)acc[0] * x[0] % PRIME); break;
  case 1: if (acc[0] == 0) acc[0] = x[0]; break;
  default: mat_mul(acc, x, acc);
  }
}

/* Fold of ranks lo..hi (inclusive) for element i. */
static void fold(int which, int lo, int hi, long i, int *out) {
  int x[4];
  gen(which, lo, i, out);
  for (int r = lo + 1; r <= hi; r++) {
    gen(which, r, i, x);
    combine(which, out, x);
  }
}

static int *alloc_ints(long n) {
  int *b = (int *)malloc(sizeof(int) * (size_t)(n + GUARD));
  CHECK(b != NULL, "malloc of %ld ints", n + GUARD);
  for (long i = 0; i < n + GUARD; i++) b[i] = SENTINEL;
  return b;
}

static void fill(int which, int r, int *buf, long n, long first) {
  int w = descs[which].width;
  for (long i = 0; i < n; i++) gen(which, r, first + i, buf + w * i);
}

/* Checks n elements of buf against the fold of ranks lo..hi, element
 * numbers starting at `first`, and the guard after them. */
static void expect(int which, const int *buf, long n, long first, int lo, int hi,
                   const char *coll, int root) {
  int w = descs[which].width, want[4];
  for (long i = 0; i < n; i++) {
    fold(which, lo, hi, first + i, want);
    for (int k = 0; k < w; k++)
      CHECK(buf[w * i + k] == want[k],
            "%s %s count %ld root %d: element %ld[%d] is %d, want %d", coll,
            descs[which].name, n, root, first + i, k, buf[w * i + k], want[k]);
  }
  for (long k = w * n; k < w * n + GUARD; k++)
    CHECK(buf[k] == SENTINEL, "%s %s count %ld: guard overwritten", coll,
          descs[which].name, n);
}

static const long counts[] = {0, 1, 7, 1001, 65536};
enum { NCOUNTS = sizeof counts / sizeof counts[0] };

static void run_op(int which) {
  const opdesc *d = &descs[which];
  MPI_Datatype dt = d->width == 1 ? MPI_INT : mat_type;
  int w = d->width;
  MPI_Op op = MPI_OP_NULL;
  CHECK_MPI(MPI_Op_create(d->fn, d->commute, &op));
  CHECK(op != MPI_OP_NULL, "Op_create gave MPI_OP_NULL");
  char name[96];

  for (int c = 0; c < NCOUNTS; c++) {
    long n = counts[c];
    int *s = alloc_ints(w * n), *r = alloc_ints(w * n);
    fill(which, rank, s, n, 0);

    for (int root = 0; root < size; root++) {
      int *rr = rank == root ? alloc_ints(w * n) : NULL;
      CHECK_MPI(MPI_Reduce(s, rr, (int)n, dt, op, root, MPI_COMM_WORLD));
      if (rank == root) expect(which, rr, n, 0, 0, size - 1, "reduce", root);
      free(rr);
    }

    CHECK_MPI(MPI_Allreduce(s, r, (int)n, dt, op, MPI_COMM_WORLD));
    expect(which, r, n, 0, 0, size - 1, "allreduce", -1);

    memcpy(r, s, sizeof(int) * (size_t)(w * n));
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, r, (int)n, dt, op, MPI_COMM_WORLD));
    expect(which, r, n, 0, 0, size - 1, "allreduce in place", -1);

    for (long k = 0; k < w * n; k++) r[k] = SENTINEL;
    CHECK_MPI(MPI_Scan(s, r, (int)n, dt, op, MPI_COMM_WORLD));
    expect(which, r, n, 0, 0, rank, "scan", -1);

    for (long k = 0; k < w * n; k++) r[k] = SENTINEL;
    CHECK_MPI(MPI_Exscan(s, r, (int)n, dt, op, MPI_COMM_WORLD));
    /* Rank 0's Exscan result is undefined. */
    if (rank > 0) expect(which, r, n, 0, 0, rank - 1, "exscan", -1);

    /* Reduce_scatter_block: n elements per rank out of size * n. */
    int *sb = alloc_ints(w * n * size), *rb = alloc_ints(w * n);
    fill(which, rank, sb, n * size, 0);
    CHECK_MPI(MPI_Reduce_scatter_block(sb, rb, (int)n, dt, op, MPI_COMM_WORLD));
    expect(which, rb, n, rank * n, 0, size - 1, "reduce_scatter_block", -1);
    free(rb);

    /* Reduce_scatter with n + q % 2 elements for rank q (the input is
     * shorter than size * n + size, so reuse sb's prefix). */
    int *rc = (int *)malloc(sizeof(int) * (size_t)size);
    CHECK(rc != NULL, "malloc");
    long total = 0, off = 0;
    for (int q = 0; q < size; q++) {
      rc[q] = (int)(n + q % 2);
      if (q < rank) off += rc[q];
      total += rc[q];
    }
    int *sv = alloc_ints(w * total);
    fill(which, rank, sv, total, 0);
    rb = alloc_ints(w * rc[rank]);
    CHECK_MPI(MPI_Reduce_scatter(sv, rb, rc, dt, op, MPI_COMM_WORLD));
    expect(which, rb, rc[rank], off, 0, size - 1, "reduce_scatter", -1);
    free(rb);
    free(sv);
    free(rc);
    free(sb);
    free(s);
    free(r);
  }

  CHECK_MPI(MPI_Op_free(&op));
  CHECK(op == MPI_OP_NULL, "Op_free left the handle set");
  snprintf(name, sizeof name, "userop %s", d->name);
  test_pass(name);
}

/* A user function that calls MPI, which the standard forbids: the nested
 * call must fail with an error (not deadlock or corrupt the outer call). */
static int nested_rc = -1; /* -1: the function never ran on this rank */
static void calls_mpi(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  int n = 0;
  nested_rc = MPI_Comm_size(MPI_COMM_WORLD, &n);
  for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

static void nested_call_fails(void) {
  MPI_Op op;
  CHECK_MPI(MPI_Op_create(calls_mpi, 1, &op));
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int x = rank + 1, y = -1;
  CHECK_MPI(MPI_Allreduce(&x, &y, 1, MPI_INT, op, MPI_COMM_WORLD));
  CHECK(y == size * (size + 1) / 2, "sum %d, want %d", y, size * (size + 1) / 2);
  CHECK(nested_rc != MPI_SUCCESS, "MPI_Comm_size inside a user op succeeded");
  if (nested_rc != -1) {
    int cls = -1;
    CHECK_MPI(MPI_Error_class(nested_rc, &cls));
    CHECK(cls == MPI_ERR_OTHER, "nested call: class %d, want MPI_ERR_OTHER", cls);
  }
  int ran = nested_rc != -1, any = 0;
  CHECK_MPI(MPI_Allreduce(&ran, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  CHECK(size == 1 || any, "the user function never ran");
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  CHECK_MPI(MPI_Op_free(&op));
  test_pass("userop calling MPI gets an error");
}

int main(int argc, char **argv) {
  CHECK_MPI(MPI_Init(&argc, &argv));
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK_MPI(MPI_Type_contiguous(4, MPI_INT, &mat_type));
  CHECK_MPI(MPI_Type_commit(&mat_type));

  /* The data must make order matter, or the non-commutative cases prove
   * nothing: some element's rank-order fold differs from the reverse one. */
  if (size > 1)
    for (int which = 1; which < 3; which++) {
      int differs = 0;
      for (long i = 0; i < 64 && !differs; i++) {
        int fwd[4], rev[4], x[4];
        fold(which, 0, size - 1, i, fwd);
        gen(which, size - 1, i, rev);
        for (int r = size - 2; r >= 0; r--) {
          gen(which, r, i, x);
          combine(which, rev, x);
        }
        differs = memcmp(fwd, rev, sizeof(int) * (size_t)descs[which].width) != 0;
      }
      CHECK(differs, "%s data does not depend on order", descs[which].name);
    }

  for (int which = 0; which < 3; which++) run_op(which);

  /* Handles are recycled correctly: create and free many ops, each used. */
  for (int k = 0; k < 40; k++) {
    MPI_Op op;
    CHECK_MPI(MPI_Op_create(k % 2 ? first_nonzero : prod_mod, k % 2 ? 0 : 1, &op));
    int x = k % 2 ? (rank == 0 ? 0 : rank + 1) : 2, y = -1;
    CHECK_MPI(MPI_Allreduce(&x, &y, 1, MPI_INT, op, MPI_COMM_WORLD));
    int want = 1;
    if (k % 2)
      want = size > 1 ? 2 : 0;
    else
      for (int q = 0; q < size; q++) want = want * 2 % PRIME;
    CHECK(y == want, "op %d: got %d, want %d", k, y, want);
    CHECK_MPI(MPI_Op_free(&op));
  }
  test_pass("userop create/free cycle");

  nested_call_fails();

  /* At more than one rank, combining needs the user function at least once
   * somewhere in the job. */
  long all = 0;
  CHECK_MPI(MPI_Allreduce(&calls, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
  CHECK(size == 1 || all > 0, "user functions never called");

  CHECK_MPI(MPI_Type_free(&mat_type));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
