/* Collectives on duplicated and split communicators, used in interleaved
 * order (and with different numbers of calls per communicator on different
 * ranks), on MPI_COMM_SELF, and on many communicators that are created and
 * freed in turn. Every value carries the communicator and the iteration, so
 * a message delivered to the wrong communicator or call shows up. */
#include "testutil.h"

static int rank, size;

typedef struct {
  MPI_Comm comm;
  const char *name;
  int n;          /* expected size */
  int me;         /* expected rank */
  int members[8]; /* world ranks, in the new rank order (size <= 8 is checked) */
} commref;

/* Expected membership of a split: ranks with my color, ordered by key, then
 * by world rank. */
static void split_ref(commref *c, int (*color)(int), int (*key)(int)) {
  c->n = 0;
  for (int k = -64; k <= 64; k++)
    for (int q = 0; q < size; q++)
      if (color(q) == color(rank) && key(q) == k) c->members[c->n++] = q;
  for (int i = 0; i < c->n; i++)
    if (c->members[i] == rank) c->me = i;
}

static int parity(int q) { return q % 2; }
static int neg(int q) { return -q; }
static int pairs(int q) { return q / 2; }
static int rev(int q) { return size - q; }

/* Size, rank and membership (by allgathering world ranks). */
static void check_comm(const commref *c) {
  int n = -1, me = -1;
  CHECK_MPI(MPI_Comm_size(c->comm, &n));
  CHECK_MPI(MPI_Comm_rank(c->comm, &me));
  CHECK(n == c->n && me == c->me, "%s: size %d rank %d, want %d and %d", c->name, n,
        me, c->n, c->me);
  int got[8];
  CHECK_MPI(MPI_Allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, c->comm));
  for (int i = 0; i < n; i++)
    CHECK(got[i] == c->members[i], "%s: rank %d is world rank %d, want %d", c->name, i,
          got[i], c->members[i]);
}

/* A value unique to (communicator tag, iteration, world rank, element). */
static int tagged(int ctag, int it, int wr, long i) {
  return ctag * 1000000 + it * 10000 + wr * 1000 + (int)(i % 997);
}

static void test_interleaved(commref *a, commref *b, commref *c, commref *e) {
  enum { ITERS = 24 };
  const long big = 100000;
  int *buf = (int *)malloc(sizeof(int) * (size_t)(big * 8));
  int *out = (int *)malloc(sizeof(int) * (size_t)(big * 8));
  CHECK(buf && out, "malloc");
  for (int it = 0; it < ITERS; it++) {
    long n = it % 6 == 0 ? big : 1 + it % 5;

    /* A (dup of world): sum of world ranks. */
    for (long i = 0; i < n; i++) buf[i] = tagged(1, it, rank, i);
    CHECK_MPI(MPI_Allreduce(buf, out, (int)n, MPI_INT, MPI_SUM, a->comm));
    for (long i = 0; i < n; i++) {
      int want = 0;
      for (int q = 0; q < size; q++) want += tagged(1, it, q, i);
      CHECK(out[i] == want, "it %d allreduce on %s: element %ld is %d, want %d", it,
            a->name, i, out[i], want);
    }

    /* B (parity, reversed): bcast from a moving root. */
    int broot = it % b->n;
    for (long i = 0; i < n; i++) buf[i] = b->me == broot ? tagged(2, it, rank, i) : -1;
    CHECK_MPI(MPI_Bcast(buf, (int)n, MPI_INT, broot, b->comm));
    for (long i = 0; i < n; i++)
      CHECK(buf[i] == tagged(2, it, b->members[broot], i),
            "it %d bcast on %s root %d: element %ld is %d", it, b->name, broot, i, buf[i]);

    /* Only the even ranks' B runs an extra collective: sequence numbers must
     * be per communicator. */
    if (rank % 2 == 0) {
      int x = tagged(3, it, rank, 0), mx = -1;
      CHECK_MPI(MPI_Allreduce(&x, &mx, 1, MPI_INT, MPI_MAX, b->comm));
      CHECK(mx == tagged(3, it, b->members[0], 0), "it %d extra allreduce on %s: %d",
            it, b->name, mx);
    }

    /* C (pairs, reversed): alltoall. */
    for (int q = 0; q < c->n; q++)
      for (long i = 0; i < n; i++) buf[q * n + i] = tagged(4, it, rank, i + q);
    CHECK_MPI(MPI_Alltoall(buf, (int)n, MPI_INT, out, (int)n, MPI_INT, c->comm));
    for (int q = 0; q < c->n; q++)
      for (long i = 0; i < n; i++)
        CHECK(out[q * n + i] == tagged(4, it, c->members[q], i + c->me),
              "it %d alltoall on %s: from %d element %ld is %d", it, c->name, q, i,
              out[q * n + i]);

    /* World: reduce to a moving root. */
    int wroot = it % size;
    for (long i = 0; i < n; i++) buf[i] = tagged(5, it, rank, i);
    CHECK_MPI(MPI_Reduce(buf, out, (int)n, MPI_INT, MPI_MIN, wroot, MPI_COMM_WORLD));
    if (rank == wroot)
      for (long i = 0; i < n; i++)
        CHECK(out[i] == tagged(5, it, 0, i), "it %d reduce on world: element %ld is %d",
              it, i, out[i]);

    /* E (dup of B): scan of world ranks in E's order. */
    for (long i = 0; i < n; i++) buf[i] = tagged(6, it, rank, i);
    CHECK_MPI(MPI_Scan(buf, out, (int)n, MPI_INT, MPI_SUM, e->comm));
    for (long i = 0; i < n; i++) {
      int want = 0;
      for (int q = 0; q <= e->me; q++) want += tagged(6, it, e->members[q], i);
      CHECK(out[i] == want, "it %d scan on %s: element %ld is %d, want %d", it, e->name,
            i, out[i], want);
    }

    /* C again, before B's next use: allgather. */
    for (long i = 0; i < n; i++) buf[i] = tagged(7, it, rank, i);
    CHECK_MPI(MPI_Allgather(buf, (int)n, MPI_INT, out, (int)n, MPI_INT, c->comm));
    for (int q = 0; q < c->n; q++)
      for (long i = 0; i < n; i++)
        CHECK(out[q * n + i] == tagged(7, it, c->members[q], i),
              "it %d allgather on %s: block %d element %ld is %d", it, c->name, q, i,
              out[q * n + i]);
  }
  free(buf);
  free(out);
  test_pass("comms interleaved");
}

/* Every collective on MPI_COMM_SELF, interleaved with world collectives. */
static void test_self(void) {
  int x[4] = {rank + 1, rank + 2, rank + 3, rank + 4}, y[4], cnt = 4, disp = 0;
  int w = 0;
  CHECK_MPI(MPI_Barrier(MPI_COMM_SELF));
  CHECK_MPI(MPI_Bcast(x, 4, MPI_INT, 0, MPI_COMM_SELF));
  CHECK(x[0] == rank + 1 && x[3] == rank + 4, "self bcast changed data");
#define SELF_CHECK(what)                                                        \
  for (int i_ = 0; i_ < 4; i_++)                                                \
    CHECK(y[i_] == x[i_], "self %s: element %d is %d, want %d", what, i_, y[i_], x[i_]); \
  memset(y, 0xff, sizeof y)
  memset(y, 0xff, sizeof y);
  CHECK_MPI(MPI_Reduce(x, y, 4, MPI_INT, MPI_SUM, 0, MPI_COMM_SELF));
  SELF_CHECK("reduce");
  CHECK_MPI(MPI_Allreduce(&rank, &w, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(w == size * (size - 1) / 2, "world allreduce between self calls: %d", w);
  CHECK_MPI(MPI_Allreduce(x, y, 4, MPI_INT, MPI_PROD, MPI_COMM_SELF));
  SELF_CHECK("allreduce");
  CHECK_MPI(MPI_Gather(x, 4, MPI_INT, y, 4, MPI_INT, 0, MPI_COMM_SELF));
  SELF_CHECK("gather");
  CHECK_MPI(MPI_Scatter(x, 4, MPI_INT, y, 4, MPI_INT, 0, MPI_COMM_SELF));
  SELF_CHECK("scatter");
  CHECK_MPI(MPI_Allgather(x, 4, MPI_INT, y, 4, MPI_INT, MPI_COMM_SELF));
  SELF_CHECK("allgather");
  CHECK_MPI(MPI_Alltoall(x, 4, MPI_INT, y, 4, MPI_INT, MPI_COMM_SELF));
  SELF_CHECK("alltoall");
  CHECK_MPI(MPI_Gatherv(x, 4, MPI_INT, y, &cnt, &disp, MPI_INT, 0, MPI_COMM_SELF));
  SELF_CHECK("gatherv");
  CHECK_MPI(MPI_Scatterv(x, &cnt, &disp, MPI_INT, y, 4, MPI_INT, 0, MPI_COMM_SELF));
  SELF_CHECK("scatterv");
  CHECK_MPI(MPI_Allgatherv(x, 4, MPI_INT, y, &cnt, &disp, MPI_INT, MPI_COMM_SELF));
  SELF_CHECK("allgatherv");
  CHECK_MPI(MPI_Alltoallv(x, &cnt, &disp, MPI_INT, y, &cnt, &disp, MPI_INT, MPI_COMM_SELF));
  SELF_CHECK("alltoallv");
  CHECK_MPI(MPI_Reduce_scatter(x, y, &cnt, MPI_INT, MPI_MAX, MPI_COMM_SELF));
  SELF_CHECK("reduce_scatter");
  CHECK_MPI(MPI_Reduce_scatter_block(x, y, 4, MPI_INT, MPI_MIN, MPI_COMM_SELF));
  SELF_CHECK("reduce_scatter_block");
  CHECK_MPI(MPI_Scan(x, y, 4, MPI_INT, MPI_SUM, MPI_COMM_SELF));
  SELF_CHECK("scan");
  /* Exscan on one rank leaves the result undefined: only the call is checked. */
  CHECK_MPI(MPI_Exscan(x, y, 4, MPI_INT, MPI_SUM, MPI_COMM_SELF));
  memcpy(y, x, sizeof y);
  CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, y, 4, MPI_INT, MPI_SUM, MPI_COMM_SELF));
  SELF_CHECK("allreduce in place");
#undef SELF_CHECK

  MPI_Comm dup = MPI_COMM_NULL;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_SELF, &dup));
  int n = -1, me = -1, res = -1;
  CHECK_MPI(MPI_Comm_size(dup, &n));
  CHECK_MPI(MPI_Comm_rank(dup, &me));
  CHECK(n == 1 && me == 0, "dup of self: size %d rank %d", n, me);
  CHECK_MPI(MPI_Comm_compare(dup, MPI_COMM_SELF, &res));
  CHECK(res == MPI_CONGRUENT, "dup of self compares %d", res);
  CHECK_MPI(MPI_Allreduce(x, y, 4, MPI_INT, MPI_SUM, dup));
  CHECK(y[0] == x[0] && y[3] == x[3], "allreduce on dup of self");
  CHECK_MPI(MPI_Comm_free(&dup));
  CHECK(dup == MPI_COMM_NULL, "Comm_free left the handle set");
  test_pass("comm self");
}

/* Many communicators alive at once, used, freed out of order, recreated. */
static void test_many(void) {
  enum { N = 12 };
  MPI_Comm c[N];
  for (int round = 0; round < 3; round++) {
    for (int k = 0; k < N; k++) {
      if (k % 3 == 2)
        CHECK_MPI(MPI_Comm_split(k ? c[k - 1] : MPI_COMM_WORLD, rank % 2, rank, &c[k]));
      else
        CHECK_MPI(MPI_Comm_dup(k ? c[k - 1] : MPI_COMM_WORLD, &c[k]));
    }
    /* Use them in reverse creation order. */
    for (int k = N - 1; k >= 0; k--) {
      int n = 0, x = round * 100 + k, sum = -1;
      CHECK_MPI(MPI_Comm_size(c[k], &n));
      CHECK_MPI(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, c[k]));
      CHECK(sum == n * x, "round %d comm %d: sum %d, want %d", round, k, sum, n * x);
    }
    /* Free evens first, then odds. */
    for (int k = 0; k < N; k += 2) CHECK_MPI(MPI_Comm_free(&c[k]));
    for (int k = 1; k < N; k += 2) CHECK_MPI(MPI_Comm_free(&c[k]));
    for (int k = 0; k < N; k++) CHECK(c[k] == MPI_COMM_NULL, "comm %d not nulled", k);
  }
  test_pass("comms create/free");
}

int main(int argc, char **argv) {
  CHECK_MPI(MPI_Init(&argc, &argv));
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size <= 8, "this test supports at most 8 ranks, not %d", size);

  commref a, b, c, d, e;
  a.name = "dup(world)";
  a.n = size;
  a.me = rank;
  for (int q = 0; q < size; q++) a.members[q] = q;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &a.comm));
  int res = -1;
  CHECK_MPI(MPI_Comm_compare(a.comm, MPI_COMM_WORLD, &res));
  CHECK(res == MPI_CONGRUENT, "dup of world compares %d", res);

  b.name = "split(parity, reversed)";
  split_ref(&b, parity, neg);
  CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, parity(rank), neg(rank), &b.comm));

  c.name = "split(rank/2, reversed)";
  split_ref(&c, pairs, rev);
  CHECK_MPI(MPI_Comm_split(a.comm, pairs(rank), rev(rank), &c.comm));

  /* The last rank opts out with MPI_UNDEFINED (at sizes above 1). */
  int out = size > 1 && rank == size - 1;
  MPI_Comm dcomm = MPI_COMM_NULL;
  CHECK_MPI(MPI_Comm_split(a.comm, out ? MPI_UNDEFINED : 0, 0, &dcomm));
  d.comm = dcomm;
  d.name = "split(all but last)";
  d.n = size > 1 ? size - 1 : 1;
  d.me = rank;
  for (int q = 0; q < d.n; q++) d.members[q] = q;
  CHECK((dcomm == MPI_COMM_NULL) == out, "MPI_UNDEFINED color: comm null is %d",
        dcomm == MPI_COMM_NULL);

  e = b;
  e.name = "dup(split(parity))";
  CHECK_MPI(MPI_Comm_dup(b.comm, &e.comm));
  CHECK_MPI(MPI_Comm_compare(e.comm, b.comm, &res));
  CHECK(res == MPI_CONGRUENT, "dup of split compares %d", res);

  check_comm(&a);
  check_comm(&b);
  check_comm(&c);
  if (!out) check_comm(&d);
  check_comm(&e);
  /* Equal keys keep the parent's order. */
  commref z;
  z.name = "split(all, key 0)";
  CHECK_MPI(MPI_Comm_split(c.comm, 0, 0, &z.comm));
  z.n = c.n;
  z.me = c.me;
  memcpy(z.members, c.members, sizeof z.members);
  check_comm(&z);
  test_pass("comms membership");

  test_interleaved(&a, &b, &c, &e);

  /* D's members run a collective while the last rank runs none. */
  if (!out) {
    int x = rank, s = -1;
    CHECK_MPI(MPI_Barrier(dcomm));
    CHECK_MPI(MPI_Allreduce(&x, &s, 1, MPI_INT, MPI_SUM, dcomm));
    CHECK(s == d.n * (d.n - 1) / 2, "allreduce on %s: %d", d.name, s);
  }
  test_pass("comms undefined color");

  test_self();
  test_many();

  CHECK_MPI(MPI_Comm_free(&a.comm));
  CHECK_MPI(MPI_Comm_free(&b.comm));
  CHECK_MPI(MPI_Comm_free(&c.comm));
  if (!out) CHECK_MPI(MPI_Comm_free(&dcomm));
  CHECK_MPI(MPI_Comm_free(&e.comm));
  CHECK_MPI(MPI_Comm_free(&z.comm));
  CHECK(a.comm == MPI_COMM_NULL && b.comm == MPI_COMM_NULL && c.comm == MPI_COMM_NULL &&
            e.comm == MPI_COMM_NULL && z.comm == MPI_COMM_NULL,
        "Comm_free left a handle set");

  /* World still works once everything else is gone. */
  int x = 1, s = 0;
  CHECK_MPI(MPI_Allreduce(&x, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(s == size, "final allreduce: %d", s);
  test_pass("comms freed");

  CHECK_MPI(MPI_Finalize());
  return 0;
}
