/* Communicators: rank/size, COMM_SELF, dup, split, compare, names, free, and
 * several communicators used in interleaved order. Runs at any number of
 * ranks; cases whose outcome depends on the size say which they check. */
#include "testutil.h"

static int rank, size;

static void root_note(const char *s) {
  if (rank == 0) {
    printf("%s\n", s);
    fflush(stdout);
  }
}

/* Checks that `comm` has the ranks of WORLD listed in `expect` (in the
 * communicator's rank order), by gathering every member's WORLD rank. */
static void check_members(MPI_Comm comm, const int *expect, int n,
                          const char *what) {
  int csize = -1, crank = -1;
  CHECK_MPI(MPI_Comm_size(comm, &csize));
  CHECK_MPI(MPI_Comm_rank(comm, &crank));
  CHECK(csize == n, "%s: size %d, want %d", what, csize, n);
  CHECK(crank >= 0 && crank < csize, "%s: rank %d of %d", what, crank, csize);
  CHECK(expect[crank] == rank, "%s: my rank %d holds world %d, want %d", what,
        crank, rank, expect[crank]);
  int *all = (int *)malloc(sizeof(int) * (size_t)n);
  CHECK_MPI(MPI_Allgather(&rank, 1, MPI_INT, all, 1, MPI_INT, comm));
  for (int i = 0; i < n; i++)
    CHECK(all[i] == expect[i], "%s: member %d is world %d, want %d", what, i,
          all[i], expect[i]);
  free(all);
}

static void case_world(void) {
  CHECK(size >= 1 && rank >= 0 && rank < size, "rank %d size %d", rank, size);
  int *expect = (int *)malloc(sizeof(int) * (size_t)size);
  for (int i = 0; i < size; i++) expect[i] = i;
  check_members(MPI_COMM_WORLD, expect, size, "WORLD");
  free(expect);
  test_pass("world_rank_size");
}

static void case_self(void) {
  int r = -1, s = -1, res = -1;
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_SELF, &r));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_SELF, &s));
  CHECK(r == 0 && s == 1, "SELF rank %d size %d", r, s);
  int v = 1000 + rank, got = -1;
  MPI_Request rq[2];
  CHECK_MPI(MPI_Irecv(&got, 1, MPI_INT, 0, 3, MPI_COMM_SELF, &rq[0]));
  CHECK_MPI(MPI_Isend(&v, 1, MPI_INT, 0, 3, MPI_COMM_SELF, &rq[1]));
  CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
  CHECK(got == v, "self message %d, want %d", got, v);
  CHECK_MPI(MPI_Allreduce(&v, &got, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF));
  CHECK(got == v, "Allreduce on SELF %d", got);
  CHECK_MPI(MPI_Comm_compare(MPI_COMM_SELF, MPI_COMM_SELF, &res));
  CHECK(res == MPI_IDENT, "SELF vs SELF %d", res);
  CHECK_MPI(MPI_Comm_compare(MPI_COMM_SELF, MPI_COMM_WORLD, &res));
  /* One rank: same group, different context. */
  CHECK(res == (size == 1 ? MPI_CONGRUENT : MPI_UNEQUAL), "SELF vs WORLD %d",
        res);
  test_pass("comm_self");
}

static void case_names(void) {
  char name[MPI_MAX_OBJECT_NAME];
  int len = -1;
  CHECK_MPI(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
  CHECK(strcmp(name, "MPI_COMM_WORLD") == 0 && len == 14, "WORLD name '%s' %d",
        name, len);
  CHECK_MPI(MPI_Comm_get_name(MPI_COMM_SELF, name, &len));
  CHECK(strcmp(name, "MPI_COMM_SELF") == 0 && len == 13, "SELF name '%s' %d",
        name, len);
  MPI_Comm dup;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  memset(name, 'x', sizeof name);
  CHECK_MPI(MPI_Comm_get_name(dup, name, &len));
  /* Names are not copied by dup (MPI-4.0 7.8). */
  CHECK(len == 0 && name[0] == '\0', "dup name '%.20s' len %d", name, len);
  CHECK_MPI(MPI_Comm_set_name(dup, "my dup"));
  CHECK_MPI(MPI_Comm_get_name(dup, name, &len));
  CHECK(strcmp(name, "my dup") == 0 && len == 6, "dup name '%s' %d", name, len);
  /* The longest name that fits. */
  char longname[MPI_MAX_OBJECT_NAME];
  memset(longname, 'n', sizeof longname);
  longname[MPI_MAX_OBJECT_NAME - 1] = '\0';
  CHECK_MPI(MPI_Comm_set_name(dup, longname));
  CHECK_MPI(MPI_Comm_get_name(dup, name, &len));
  CHECK(len == MPI_MAX_OBJECT_NAME - 1 && strcmp(name, longname) == 0,
        "long name len %d", len);
  /* Renaming WORLD is allowed and does not affect SELF. */
  CHECK_MPI(MPI_Comm_set_name(MPI_COMM_WORLD, "renamed world"));
  CHECK_MPI(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
  CHECK(strcmp(name, "renamed world") == 0, "renamed '%s'", name);
  CHECK_MPI(MPI_Comm_get_name(MPI_COMM_SELF, name, &len));
  CHECK(strcmp(name, "MPI_COMM_SELF") == 0, "SELF now '%s'", name);
  CHECK_MPI(MPI_Comm_set_name(MPI_COMM_WORLD, "MPI_COMM_WORLD"));
  CHECK_MPI(MPI_Comm_free(&dup));
  test_pass("comm_names");
}

static void case_dup(void) {
  MPI_Comm dup, dup2;
  int res = -1, r = -1, s = -1;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  CHECK(dup != MPI_COMM_NULL && dup != MPI_COMM_WORLD, "dup handle %#x",
        (unsigned)dup);
  CHECK_MPI(MPI_Comm_rank(dup, &r));
  CHECK_MPI(MPI_Comm_size(dup, &s));
  CHECK(r == rank && s == size, "dup rank %d size %d", r, s);
  CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, dup, &res));
  CHECK(res == MPI_CONGRUENT, "WORLD vs dup %d", res);
  CHECK_MPI(MPI_Comm_compare(dup, dup, &res));
  CHECK(res == MPI_IDENT, "dup vs dup %d", res);
  CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &res));
  CHECK(res == MPI_IDENT, "WORLD vs WORLD %d", res);
  CHECK_MPI(MPI_Comm_dup(dup, &dup2));
  CHECK_MPI(MPI_Comm_compare(dup2, dup, &res));
  CHECK(res == MPI_CONGRUENT, "dup of dup %d", res);

  /* Same (source, tag) on three communicators: each message lands on its
   * own communicator even when received in the opposite order. */
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  int sv[3] = {100 + rank, 200 + rank, 300 + rank}, rv[3] = {-1, -1, -1};
  MPI_Comm cs[3] = {MPI_COMM_WORLD, dup, dup2};
  MPI_Request rq[6];
  for (int i = 0; i < 3; i++)
    CHECK_MPI(MPI_Isend(&sv[i], 1, MPI_INT, right, 9, cs[i], &rq[i]));
  for (int i = 2; i >= 0; i--)
    CHECK_MPI(MPI_Recv(&rv[i], 1, MPI_INT, left, 9, cs[i], MPI_STATUS_IGNORE));
  CHECK_MPI(MPI_Waitall(3, rq, MPI_STATUSES_IGNORE));
  for (int i = 0; i < 3; i++)
    CHECK(rv[i] == (i + 1) * 100 + left, "comm %d got %d want %d", i, rv[i],
          (i + 1) * 100 + left);

  CHECK_MPI(MPI_Comm_free(&dup2));
  CHECK(dup2 == MPI_COMM_NULL, "freed handle %#x", (unsigned)dup2);
  CHECK_MPI(MPI_Comm_free(&dup));
  CHECK(dup == MPI_COMM_NULL, "freed handle %#x", (unsigned)dup);
  test_pass("comm_dup");
}

static void case_split_parity(void) {
  /* Colour by parity, key reversing the order: the new rank 0 is the highest
   * WORLD rank of that parity. */
  MPI_Comm sub;
  CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &sub));
  CHECK(sub != MPI_COMM_NULL, "split gave COMM_NULL");
  int n = 0, expect[64];
  for (int w = size - 1; w >= 0; w--)
    if (w % 2 == rank % 2) expect[n++] = w;
  check_members(sub, expect, n, "parity split");
  int res = -1;
  CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, sub, &res));
  CHECK(res == (size == 1 ? MPI_CONGRUENT : MPI_UNEQUAL), "WORLD vs parity %d",
        res);
  /* A collective on the sub-communicator sums only its members. */
  int sum = -1, want = 0;
  for (int i = 0; i < n; i++) want += expect[i];
  CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, sub));
  CHECK(sum == want, "parity sum %d want %d", sum, want);
  CHECK_MPI(MPI_Comm_free(&sub));
  CHECK(sub == MPI_COMM_NULL, "freed split handle %#x", (unsigned)sub);
  test_pass("split_parity_reversed");
}

static void case_split_order(void) {
  MPI_Comm same, rev;
  int res = -1;
  /* One colour, keys all equal: ties keep WORLD order -> congruent. */
  CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 7, 0, &same));
  CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, same, &res));
  CHECK(res == MPI_CONGRUENT, "WORLD vs split(same) %d", res);
  /* One colour, reversed keys: same members, other order -> similar. */
  CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 7, -rank, &rev));
  int expect[64];
  for (int i = 0; i < size; i++) expect[i] = size - 1 - i;
  check_members(rev, expect, size, "reversed split");
  CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, rev, &res));
  CHECK(res == (size == 1 ? MPI_CONGRUENT : MPI_SIMILAR), "WORLD vs reversed %d",
        res);
  CHECK_MPI(MPI_Comm_compare(rev, same, &res));
  CHECK(res == (size == 1 ? MPI_CONGRUENT : MPI_SIMILAR), "reversed vs same %d",
        res);
  /* Split of a split: halves of the reversed communicator. */
  int rrank = -1;
  CHECK_MPI(MPI_Comm_rank(rev, &rrank));
  MPI_Comm half;
  CHECK_MPI(MPI_Comm_split(rev, rrank < (size + 1) / 2, rrank, &half));
  int n = 0, hexp[64];
  for (int i = 0; i < size; i++)
    if ((i < (size + 1) / 2) == (rrank < (size + 1) / 2)) hexp[n++] = expect[i];
  check_members(half, hexp, n, "split of split");
  CHECK_MPI(MPI_Comm_free(&half));
  CHECK_MPI(MPI_Comm_free(&rev));
  CHECK_MPI(MPI_Comm_free(&same));
  test_pass("split_order_compare");
}

static void case_split_undefined(void) {
  /* Every third rank (1, 4, ...) opts out; with one rank nobody does. */
  int color = (rank % 3 == 1) ? MPI_UNDEFINED : 0;
  MPI_Comm sub = MPI_COMM_WORLD;
  CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, rank, &sub));
  if (color == MPI_UNDEFINED) {
    CHECK(sub == MPI_COMM_NULL, "UNDEFINED colour gave %#x", (unsigned)sub);
  } else {
    int n = 0, expect[64];
    for (int w = 0; w < size; w++)
      if (w % 3 != 1) expect[n++] = w;
    check_members(sub, expect, n, "split without opt-outs");
    CHECK_MPI(MPI_Comm_free(&sub));
  }
  /* Everyone UNDEFINED: everyone gets COMM_NULL. */
  MPI_Comm none = MPI_COMM_WORLD;
  CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, MPI_UNDEFINED, 0, &none));
  CHECK(none == MPI_COMM_NULL, "all UNDEFINED gave %#x", (unsigned)none);
  /* Each rank alone in its colour. */
  MPI_Comm alone;
  CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &alone));
  check_members(alone, &rank, 1, "singleton colours");
  CHECK_MPI(MPI_Comm_free(&alone));
  test_pass("split_undefined");
}

/* Two communicators over the same ranks used alternately: point-to-point
 * with identical (source, tag) on both, and collectives with different roots
 * interleaved, so any mixing of messages between them shows. */
static void case_interleaved(void) {
  MPI_Comm a, b;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &a));
  CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &b)); /* reversed */
  int brank = -1;
  CHECK_MPI(MPI_Comm_rank(b, &brank));
  CHECK(brank == size - 1 - rank, "b rank %d", brank);
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  for (int it = 0; it < 50; it++) {
    /* In b, WORLD's right neighbour has b-rank brank-1. */
    int bright = (brank + size - 1) % size, bleft = (brank + 1) % size;
    int sa[4], sb[4], ra[4], rb[4];
    for (int k = 0; k < 4; k++) {
      sa[k] = it * 1000 + rank * 10 + k;
      sb[k] = -(it * 1000 + rank * 10 + k);
    }
    MPI_Request rq[8];
    int nrq = 0;
    for (int k = 0; k < 4; k++) {
      CHECK_MPI(MPI_Isend(&sa[k], 1, MPI_INT, right, it % 3, a, &rq[nrq++]));
      CHECK_MPI(MPI_Isend(&sb[k], 1, MPI_INT, bright, it % 3, b, &rq[nrq++]));
    }
    /* Receive b's messages first, then a's. */
    for (int k = 0; k < 4; k++)
      CHECK_MPI(MPI_Recv(&rb[k], 1, MPI_INT, bleft, it % 3, b, MPI_STATUS_IGNORE));
    for (int k = 0; k < 4; k++)
      CHECK_MPI(MPI_Recv(&ra[k], 1, MPI_INT, left, it % 3, a, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Waitall(nrq, rq, MPI_STATUSES_IGNORE));
    for (int k = 0; k < 4; k++) {
      CHECK(ra[k] == it * 1000 + left * 10 + k, "it %d a[%d]=%d", it, k, ra[k]);
      CHECK(rb[k] == -(it * 1000 + left * 10 + k), "it %d b[%d]=%d", it, k,
            rb[k]);
    }
    /* Collectives alternating between the two communicators. */
    int root_a = it % size, root_b = (it * 7 + 1) % size;
    int va = (rank == root_a) ? it + 1 : -1;
    int vb = (brank == root_b) ? -(it + 1) : 1;
    int suma = 0, sumb = 0;
    CHECK_MPI(MPI_Bcast(&va, 1, MPI_INT, root_a, a));
    CHECK_MPI(MPI_Bcast(&vb, 1, MPI_INT, root_b, b));
    CHECK_MPI(MPI_Allreduce(&rank, &sumb, 1, MPI_INT, MPI_SUM, b));
    CHECK_MPI(MPI_Allreduce(&brank, &suma, 1, MPI_INT, MPI_MAX, a));
    CHECK(va == it + 1 && vb == -(it + 1), "it %d bcast %d %d", it, va, vb);
    CHECK(sumb == size * (size - 1) / 2 && suma == size - 1, "it %d sums %d %d",
          it, sumb, suma);
    if (it % 10 == 0) {
      CHECK_MPI(MPI_Barrier(b));
      CHECK_MPI(MPI_Barrier(a));
    }
  }
  CHECK_MPI(MPI_Comm_free(&a));
  CHECK_MPI(MPI_Comm_free(&b));
  test_pass("interleaved_comms");
}

/* Many create/free cycles: context ids are recycled without cross-talk. */
static void case_churn(void) {
  for (int i = 0; i < 100; i++) {
    MPI_Comm c;
    if (i % 2)
      CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    else
      CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &c));
    int v = i, sum = -1;
    CHECK_MPI(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK(sum == i * size, "cycle %d sum %d", i, sum);
    CHECK_MPI(MPI_Comm_free(&c));
    CHECK(c == MPI_COMM_NULL, "cycle %d handle %#x", i, (unsigned)c);
  }
  /* Many live at once. */
  enum { LIVE = 32 };
  MPI_Comm cs[LIVE];
  for (int i = 0; i < LIVE; i++) CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &cs[i]));
  for (int i = LIVE - 1; i >= 0; i--) {
    int v = i, sum = -1;
    CHECK_MPI(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, cs[i]));
    CHECK(sum == i * size, "live %d sum %d", i, sum);
  }
  for (int i = 0; i < LIVE; i++) CHECK_MPI(MPI_Comm_free(&cs[i]));
  test_pass("comm_churn");
}

int main(int argc, char **argv) {
  CHECK_MPI(MPI_Init(&argc, &argv));
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size <= 64, "this test handles at most 64 ranks, got %d", size);
  case_world();
  case_self();
  case_names();
  case_dup();
  case_split_parity();
  case_split_order();
  case_split_undefined();
  case_interleaved();
  case_churn();
  if (size == 1) root_note("SKIP compare_unequal_similar: needs 2 ranks");
  CHECK_MPI(MPI_Finalize());
  return 0;
}
