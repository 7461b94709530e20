/* The vector collectives (Gatherv, Scatterv, Allgatherv, Alltoallv,
 * Reduce_scatter) with uneven counts, zero counts for some or all ranks, and
 * displacements that leave gaps or put the blocks in reverse rank order (and,
 * on the send side only, overlap). Gaps in receive buffers must stay
 * untouched; every result is compared with a locally computed reference.
 * MPICH 4.0.2 fails this at N=1: its Allgatherv on a one-rank communicator
 * ignores displs[0] (a bug there; every other case passes under MPICH). */
#include "testutil.h"

enum { GUARD = 3 };
#define SENTINEL (-7777777)

static int rank, size;

static int val(int r, long i, int salt) {
  return (int)((r * 1009L + i * 31L + salt * 7L) % 2001L - 1000L);
}

static int *alloc_ints(long n) {
  int *b = (int *)malloc(sizeof(int) * (size_t)(n + GUARD));
  CHECK(b != NULL, "malloc of %ld ints", n + GUARD);
  for (long i = 0; i < n + GUARD; i++) b[i] = SENTINEL;
  return b;
}

static int *alloc_counts(void) {
  int *b = (int *)malloc(sizeof(int) * (size_t)size);
  CHECK(b != NULL, "malloc");
  return b;
}

/* Count patterns for rank q's block. */
enum { P_UNEVEN, P_SOME_ZERO, P_ONE_NONZERO, P_ALL_ZERO, NPATTERNS };
static const char *const pattern_names[] = {"uneven", "some-zero", "one-nonzero", "all-zero"};

static int count_of(int pattern, int q, int base) {
  switch (pattern) {
  case P_UNEVEN: return base + (q * 7) % 5;
  case P_SOME_ZERO: return q % 3 == 1 ? 0 : base + q;
  case P_ONE_NONZERO: return q == size / 2 ? 2 * base + 1 : 0;
  default: return 0;
  }
}

/* Displacement layouts. L_OVERLAP is legal only for send buffers. */
enum { L_PACKED, L_GAPS, L_REVERSED, L_OVERLAP, NLAYOUTS };
static const char *const layout_names[] = {"packed", "gaps", "reversed", "overlap"};

/* Fills displs for the given counts; returns the buffer length needed. */
static long layout(int lay, const int *cnt, int *displs) {
  long end = 0, pos;
  switch (lay) {
  case L_PACKED:
    for (int q = 0; q < size; q++) { displs[q] = (int)end; end += cnt[q]; }
    return end;
  case L_GAPS:
    pos = 5;
    for (int q = 0; q < size; q++) { displs[q] = (int)pos; pos += cnt[q] + 3 * (q + 1); }
    return pos;
  case L_REVERSED:
    pos = 2;
    for (int q = size - 1; q >= 0; q--) { displs[q] = (int)pos; pos += cnt[q] + 1 + q % 2; }
    return pos;
  default:
    /* Every block starts at 1 (not 0, so a displacement that is ignored
     * shows up). */
    for (int q = 0; q < size; q++) {
      displs[q] = 1;
      if (cnt[q] + 1 > end) end = cnt[q] + 1;
    }
    return end;
  }
}

static const int bases[] = {1, 37, 60013};
enum { NBASES = sizeof bases / sizeof bases[0] };

/* Marks which elements of a receive buffer the blocks cover; the rest must
 * still hold the sentinel. */
static void check_gaps(const int *buf, long len, const int *cnt, const int *displs,
                       const char *what, int pattern, int lay, int root) {
  char *covered = (char *)calloc((size_t)len + 1, 1);
  CHECK(covered != NULL, "calloc");
  for (int q = 0; q < size; q++)
    for (long i = 0; i < cnt[q]; i++) covered[displs[q] + i] = 1;
  for (long i = 0; i < len + GUARD; i++)
    if (i >= len || !covered[i])
      CHECK(buf[i] == SENTINEL, "%s %s/%s root %d: element %ld outside every block was written",
            what, pattern_names[pattern], layout_names[lay], root, i);
  free(covered);
}

static void test_gatherv(void) {
  int *rc = alloc_counts(), *dp = alloc_counts();
  for (int b = 0; b < NBASES; b++)
    for (int p = 0; p < NPATTERNS; p++)
      for (int lay = L_PACKED; lay <= L_REVERSED; lay++)
        for (int root = 0; root < size; root++) {
          for (int q = 0; q < size; q++) rc[q] = count_of(p, q, bases[b]);
          long len = layout(lay, rc, dp);
          int mine = rc[rank];
          int *s = alloc_ints(mine);
          for (long i = 0; i < mine; i++) s[i] = val(rank, i, root);
          if (rank == root) {
            int *r = alloc_ints(len);
            CHECK_MPI(MPI_Gatherv(s, mine, MPI_INT, r, rc, dp, MPI_INT, root, MPI_COMM_WORLD));
            for (int q = 0; q < size; q++)
              for (long i = 0; i < rc[q]; i++)
                CHECK(r[dp[q] + i] == val(q, i, root),
                      "gatherv %s/%s base %d root %d: block %d element %ld is %d, want %d",
                      pattern_names[p], layout_names[lay], bases[b], root, q, i,
                      r[dp[q] + i], val(q, i, root));
            check_gaps(r, len, rc, dp, "gatherv", p, lay, root);
            free(r);
          } else {
            /* Receive arguments are significant only at the root. */
            CHECK_MPI(MPI_Gatherv(s, mine, MPI_INT, NULL, NULL, NULL, MPI_INT, root, MPI_COMM_WORLD));
          }
          free(s);
        }
  free(rc);
  free(dp);
  test_pass("gatherv");
}

static void test_scatterv(void) {
  int *sc = alloc_counts(), *dp = alloc_counts();
  for (int b = 0; b < NBASES; b++)
    for (int p = 0; p < NPATTERNS; p++)
      for (int lay = 0; lay < NLAYOUTS; lay++)
        for (int root = 0; root < size; root++) {
          for (int q = 0; q < size; q++) sc[q] = count_of(p, q, bases[b]);
          long len = layout(lay, sc, dp);
          int mine = sc[rank];
          /* With overlapping blocks every rank reads the same data, so the
           * reference is by position in the send buffer, not by rank. */
          int *s = NULL;
          if (rank == root) {
            s = alloc_ints(len);
            for (long i = 0; i < len; i++) s[i] = val(root, i, 11);
            if (lay != L_OVERLAP)
              for (int q = 0; q < size; q++)
                for (long i = 0; i < sc[q]; i++) s[dp[q] + i] = val(q, i, 12);
          }
          int *r = alloc_ints(mine);
          if (rank == root)
            CHECK_MPI(MPI_Scatterv(s, sc, dp, MPI_INT, r, mine, MPI_INT, root, MPI_COMM_WORLD));
          else
            CHECK_MPI(MPI_Scatterv(NULL, NULL, NULL, MPI_INT, r, mine, MPI_INT, root, MPI_COMM_WORLD));
          for (long i = 0; i < mine; i++) {
            int want = lay == L_OVERLAP ? val(root, 1 + i, 11) : val(rank, i, 12);
            CHECK(r[i] == want, "scatterv %s/%s base %d root %d: element %ld is %d, want %d",
                  pattern_names[p], layout_names[lay], bases[b], root, i, r[i], want);
          }
          for (long i = mine; i < mine + GUARD; i++)
            CHECK(r[i] == SENTINEL, "scatterv %s/%s: guard %ld overwritten",
                  pattern_names[p], layout_names[lay], i);
          free(r);
          free(s);
        }
  free(sc);
  free(dp);
  test_pass("scatterv");
}

static void test_allgatherv(void) {
  int *rc = alloc_counts(), *dp = alloc_counts();
  for (int b = 0; b < NBASES; b++)
    for (int p = 0; p < NPATTERNS; p++)
      for (int lay = L_PACKED; lay <= L_REVERSED; lay++) {
        for (int q = 0; q < size; q++) rc[q] = count_of(p, q, bases[b]);
        long len = layout(lay, rc, dp);
        int mine = rc[rank];
        int *s = alloc_ints(mine), *r = alloc_ints(len);
        for (long i = 0; i < mine; i++) s[i] = val(rank, i, 13 + lay);
        CHECK_MPI(MPI_Allgatherv(s, mine, MPI_INT, r, rc, dp, MPI_INT, MPI_COMM_WORLD));
        for (int q = 0; q < size; q++)
          for (long i = 0; i < rc[q]; i++)
            CHECK(r[dp[q] + i] == val(q, i, 13 + lay),
                  "allgatherv %s/%s base %d: block %d element %ld is %d, want %d",
                  pattern_names[p], layout_names[lay], bases[b], q, i, r[dp[q] + i],
                  val(q, i, 13 + lay));
        check_gaps(r, len, rc, dp, "allgatherv", p, lay, -1);
        free(s);
        free(r);
      }
  free(rc);
  free(dp);
  test_pass("allgatherv");
}

/* Count rank s sends to rank d, for each pattern. */
static int a2a_count(int pattern, int s, int d, int base) {
  switch (pattern) {
  case P_UNEVEN: return base + (s * 3 + d * 5) % 4;
  case P_SOME_ZERO: return (s + d) % 3 == 0 ? 0 : base + s;
  case P_ONE_NONZERO: return d == size / 2 ? base + s : 0;
  default: return 0;
  }
}

static int a2a_val(int from, int to, long i) { return val(from, i + to * 7919L, 17); }

static void test_alltoallv(void) {
  int *sc = alloc_counts(), *sd = alloc_counts(), *rc = alloc_counts(), *rd = alloc_counts();
  for (int b = 0; b < NBASES; b++)
    for (int p = 0; p < NPATTERNS; p++)
      for (int slay = 0; slay < NLAYOUTS; slay++) {
        /* Pair each send layout with a different receive layout. */
        int rlay = (slay + 1) % (L_REVERSED + 1);
        for (int q = 0; q < size; q++) {
          sc[q] = a2a_count(p, rank, q, bases[b]);
          rc[q] = a2a_count(p, q, rank, bases[b]);
        }
        long slen = layout(slay, sc, sd), rlen = layout(rlay, rc, rd);
        int *s = alloc_ints(slen), *r = alloc_ints(rlen);
        /* Overlapping send blocks all carry the same data: the reference then
         * depends only on the position. */
        for (long i = 0; i < slen; i++) s[i] = val(rank, i, 18);
        if (slay != L_OVERLAP)
          for (int q = 0; q < size; q++)
            for (long i = 0; i < sc[q]; i++) s[sd[q] + i] = a2a_val(rank, q, i);
        CHECK_MPI(MPI_Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, MPI_COMM_WORLD));
        for (int q = 0; q < size; q++)
          for (long i = 0; i < rc[q]; i++) {
            int want = slay == L_OVERLAP ? val(q, 1 + i, 18) : a2a_val(q, rank, i);
            CHECK(r[rd[q] + i] == want,
                  "alltoallv %s send %s recv %s base %d: from %d element %ld is %d, want %d",
                  pattern_names[p], layout_names[slay], layout_names[rlay], bases[b], q, i,
                  r[rd[q] + i], want);
          }
        check_gaps(r, rlen, rc, rd, "alltoallv", p, rlay, -1);
        free(s);
        free(r);
      }
  free(sc);
  free(sd);
  free(rc);
  free(rd);
  test_pass("alltoallv");
}

static void test_reduce_scatter(void) {
  int *rc = alloc_counts();
  for (int b = 0; b < NBASES; b++)
    for (int p = 0; p < NPATTERNS; p++) {
      long total = 0, off = 0;
      for (int q = 0; q < size; q++) {
        rc[q] = count_of(p, q, bases[b]);
        if (q < rank) off += rc[q];
        total += rc[q];
      }
      int *s = alloc_ints(total), *r = alloc_ints(rc[rank]);
      for (long i = 0; i < total; i++) s[i] = val(rank, i, 19);
      CHECK_MPI(MPI_Reduce_scatter(s, r, rc, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
      for (long i = 0; i < rc[rank]; i++) {
        int want = 0;
        for (int q = 0; q < size; q++) want += val(q, off + i, 19);
        CHECK(r[i] == want, "reduce_scatter %s base %d: element %ld is %d, want %d",
              pattern_names[p], bases[b], i, r[i], want);
      }
      for (long i = rc[rank]; i < rc[rank] + GUARD; i++)
        CHECK(r[i] == SENTINEL, "reduce_scatter %s base %d: guard %ld overwritten",
              pattern_names[p], bases[b], i);
      free(s);
      free(r);
    }
  free(rc);
  test_pass("reduce_scatter uneven");
}

int main(int argc, char **argv) {
  CHECK_MPI(MPI_Init(&argc, &argv));
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));

  test_gatherv();
  test_scatterv();
  test_allgatherv();
  test_alltoallv();
  test_reduce_scatter();

  CHECK_MPI(MPI_Finalize());
  return 0;
}
