/* Groups (ncclGroupStart/End) in host mode: a send/recv ring and an
 * alltoall built from send/recv (self included; issued in several orders),
 * at sizes up to a few MB (a blocking send larger than the transport's
 * buffers must not deadlock); send/recv outside groups; several collectives
 * and point-to-point calls aggregated in one group; a group spanning two
 * communicators (the world comm and a copy from ncclCommSplit, colour 0);
 * nested groups, whose operations start at the outermost ncclGroupEnd; an
 * empty group; ncclGroupEnd without a start (ncclInvalidUsage). */
#include "nccl_testutil.h"

#include <stdint.h>

static int rank, nranks;
static ncclComm_t comm;

static int32_t val(int r, size_t i, int salt) {
  return (int32_t)((r + 1) * 1000003 + (int64_t)i * 7919 + salt * 131);
}

static int32_t *ialloc(size_t n, int32_t fill) {
  int32_t *p = (int32_t *)malloc(sizeof(int32_t) * (n ? n : 1));
  CHECK(p != NULL, "malloc of %zu ints", n);
  for (size_t i = 0; i < n; i++) p[i] = fill;
  return p;
}

static void expect(const int32_t *b, size_t n, int r, size_t first, int salt, const char *what) {
  for (size_t i = 0; i < n; i++)
    CHECK(b[i] == val(r, first + i, salt), "%s: int %zu is %d, want %d (rank %d's int %zu)",
          what, i, (int)b[i], (int)val(r, first + i, salt), r, first + i);
}

static const size_t counts[] = {0, 1, 1031, (size_t)3 << 19}; /* up to 6 MiB */
enum { NCOUNTS = sizeof counts / sizeof counts[0] };

/* Ring: send to the next rank, receive from the previous; the order of the
 * two calls alternates with rank and size. */
static void test_ring(void) {
  for (int c = 0; c < NCOUNTS; c++)
    for (int order = 0; order < 2; order++) {
      size_t n = counts[c];
      int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
      int32_t *s = ialloc(n, 0), *r = ialloc(n, -1);
      for (size_t i = 0; i < n; i++) s[i] = val(rank, i, c);
      CHECK_NCCL(ncclGroupStart());
      if ((rank + order) % 2 == 0) {
        CHECK_NCCL(ncclSend(s, n, ncclInt32, next, comm, NULL));
        CHECK_NCCL(ncclRecv(r, n, ncclInt32, prev, comm, NULL));
      } else {
        CHECK_NCCL(ncclRecv(r, n, ncclInt32, prev, comm, NULL));
        CHECK_NCCL(ncclSend(s, n, ncclInt32, next, comm, NULL));
      }
      CHECK_NCCL(ncclGroupEnd());
      char what[80];
      snprintf(what, sizeof what, "ring of %zu ints, order %d", n, order);
      expect(r, n, prev, 0, c, what);
      expect(s, n, rank, 0, c, "ring sendbuff (changed)");
      free(s);
      free(r);
    }
  test_pass("group: send/recv ring");
}

/* Alltoall from send/recv: every rank sends block p to rank p (itself too). */
static void test_alltoall_p2p(void) {
  for (int c = 0; c < NCOUNTS; c++)
    for (int order = 0; order < 3; order++) {
      size_t n = counts[c] / (size_t)nranks + (counts[c] ? 1 : 0), N = n * (size_t)nranks;
      int32_t *s = ialloc(N, 0), *r = ialloc(N, -1);
      for (size_t i = 0; i < N; i++) s[i] = val(rank, i, 10 + c);
      CHECK_NCCL(ncclGroupStart());
      if (order == 0) { /* pairs in peer order */
        for (int p = 0; p < nranks; p++) {
          CHECK_NCCL(ncclSend(s + (size_t)p * n, n, ncclInt32, p, comm, NULL));
          CHECK_NCCL(ncclRecv(r + (size_t)p * n, n, ncclInt32, p, comm, NULL));
        }
      } else if (order == 1) { /* all receives (reversed), then all sends */
        for (int p = nranks - 1; p >= 0; p--)
          CHECK_NCCL(ncclRecv(r + (size_t)p * n, n, ncclInt32, p, comm, NULL));
        for (int p = 0; p < nranks; p++)
          CHECK_NCCL(ncclSend(s + (size_t)p * n, n, ncclInt32, p, comm, NULL));
      } else { /* sends first, starting from a rank-dependent peer */
        for (int k = 0; k < nranks; k++) {
          int p = (rank + k) % nranks;
          CHECK_NCCL(ncclSend(s + (size_t)p * n, n, ncclInt32, p, comm, NULL));
        }
        for (int k = 0; k < nranks; k++) {
          int p = (rank + nranks - k) % nranks;
          CHECK_NCCL(ncclRecv(r + (size_t)p * n, n, ncclInt32, p, comm, NULL));
        }
      }
      CHECK_NCCL(ncclGroupEnd());
      for (int p = 0; p < nranks; p++) {
        char what[96];
        snprintf(what, sizeof what, "p2p alltoall of %zu ints, order %d, block from %d", n,
                 order, p);
        expect(r + (size_t)p * n, n, p, (size_t)rank * n, 10 + c, what);
      }
      free(s);
      free(r);
    }
  test_pass("group: alltoall from send/recv (self included)");
}

/* Send/recv outside groups: each call completes before it returns, so
 * pairs (2k, 2k+1) exchange with the lower rank sending first. */
static void test_ungrouped_p2p(void) {
  int partner = rank ^ 1;
  for (int c = 0; c < NCOUNTS; c++) {
    size_t n = counts[c];
    int32_t *s = ialloc(n, 0), *r = ialloc(n, -1);
    for (size_t i = 0; i < n; i++) s[i] = val(rank, i, 20 + c);
    if (partner < nranks) {
      if (rank < partner) {
        CHECK_NCCL(ncclSend(s, n, ncclInt32, partner, comm, NULL));
        CHECK_NCCL(ncclRecv(r, n, ncclInt32, partner, comm, NULL));
      } else {
        CHECK_NCCL(ncclRecv(r, n, ncclInt32, partner, comm, NULL));
        CHECK_NCCL(ncclSend(s, n, ncclInt32, partner, comm, NULL));
      }
      expect(r, n, partner, 0, 20 + c, "ungrouped send/recv");
    }
    free(s);
    free(r);
  }
  test_pass("send/recv outside groups");
}

/* Six collectives and a ring exchange in one group, each with its own buffers. */
static void test_aggregated(void) {
  const size_t n = 1031;
  const size_t N = n * (size_t)nranks;
  int root = nranks - 1, next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  int32_t *ar_s = ialloc(n, 0), *ar_r = ialloc(n, -1);
  int32_t *bc = ialloc(n, -1);
  int32_t *ag_s = ialloc(n, 0), *ag_r = ialloc(N, -1);
  int32_t *rs_s = ialloc(N, 0), *rs_r = ialloc(n, -1);
  int32_t *rd_s = ialloc(n, 0), *rd_r = ialloc(n, -1);
  int32_t *aa_s = ialloc(N, 0), *aa_r = ialloc(N, -1);
  int32_t *p_s = ialloc(n, 0), *p_r = ialloc(n, -1);
  int64_t *ar64 = (int64_t *)malloc(sizeof(int64_t) * n); /* in place, another type */
  CHECK(ar64 != NULL, "malloc");
  for (size_t i = 0; i < n; i++) {
    ar_s[i] = (int32_t)(rank + i);
    if (rank == root) bc[i] = val(root, i, 30);
    ag_s[i] = val(rank, i, 31);
    rd_s[i] = (int32_t)(rank * 3 + i % 7);
    p_s[i] = val(rank, i, 32);
    ar64[i] = (int64_t)(rank + 1) << 33;
  }
  for (size_t i = 0; i < N; i++) {
    rs_s[i] = (int32_t)(rank + 2 * i);
    aa_s[i] = val(rank, i, 33);
  }
  for (int rep = 0; rep < 2; rep++) {
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclAllReduce(ar_s, ar_r, n, ncclInt32, ncclSum, comm, NULL));
    CHECK_NCCL(ncclBroadcast(bc, bc, n, ncclInt32, root, comm, NULL));
    CHECK_NCCL(ncclAllGather(ag_s, ag_r, n, ncclInt32, comm, NULL));
    CHECK_NCCL(ncclSend(p_s, n, ncclInt32, next, comm, NULL));
    CHECK_NCCL(ncclReduceScatter(rs_s, rs_r, n, ncclInt32, ncclMax, comm, NULL));
    CHECK_NCCL(ncclReduce(rd_s, rd_r, n, ncclInt32, ncclMin, root, comm, NULL));
    CHECK_NCCL(ncclAlltoAll(aa_s, aa_r, n, ncclInt32, comm, NULL));
    CHECK_NCCL(ncclRecv(p_r, n, ncclInt32, prev, comm, NULL));
    if (rep == 1) CHECK_NCCL(ncclAllReduce(ar64, ar64, n, ncclInt64, ncclSum, comm, NULL));
    CHECK_NCCL(ncclGroupEnd());
  }
  long long tri = (long long)nranks * (nranks - 1) / 2;
  for (size_t i = 0; i < n; i++) {
    CHECK(ar_r[i] == (int32_t)(tri + (long long)nranks * (long long)i),
          "aggregated allreduce: int %zu is %d", i, (int)ar_r[i]);
    CHECK(bc[i] == val(root, i, 30), "aggregated broadcast: int %zu is %d", i, (int)bc[i]);
    /* max over ranks q of q + 2*(rank*n + i) */
    CHECK(rs_r[i] == (int32_t)(nranks - 1 + 2 * ((size_t)rank * n + i)),
          "aggregated reducescatter: int %zu is %d", i, (int)rs_r[i]);
    if (rank == root)
      CHECK(rd_r[i] == (int32_t)(i % 7), "aggregated reduce: int %zu is %d", i, (int)rd_r[i]);
    CHECK(ar64[i] == ((int64_t)nranks * (nranks + 1) / 2) << 33,
          "aggregated int64 allreduce: element %zu is %lld", i, (long long)ar64[i]);
  }
  for (int q = 0; q < nranks; q++) {
    expect(ag_r + (size_t)q * n, n, q, 0, 31, "aggregated allgather");
    expect(aa_r + (size_t)q * n, n, q, (size_t)rank * n, 33, "aggregated alltoall");
  }
  expect(p_r, n, prev, 0, 32, "aggregated ring recv");
  free(ar_s); free(ar_r); free(bc); free(ag_s); free(ag_r); free(rs_s); free(rs_r);
  free(rd_s); free(rd_r); free(aa_s); free(aa_r); free(p_s); free(p_r); free(ar64);
  test_pass("group: collectives and send/recv aggregated");
}

/* One group, two communicators: the world comm and a split copy. */
static void test_two_comms(void) {
  ncclComm_t dup = NULL;
  int dn = 0, dr = -1;
  CHECK_NCCL(ncclCommSplit(comm, 0, rank, &dup, NULL));
  CHECK(dup != NULL && dup != comm, "ncclCommSplit(colour 0) gave %p", (void *)dup);
  CHECK_NCCL(ncclCommCount(dup, &dn));
  CHECK_NCCL(ncclCommUserRank(dup, &dr));
  CHECK(dn == nranks && dr == rank, "split copy: rank %d of %d, want %d of %d", dr, dn, rank,
        nranks);
  const size_t n = (size_t)1 << 18;
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  int32_t *a = ialloc(n, 0), *ar = ialloc(n, -1), *b = ialloc(n, 0), *br = ialloc(n, -1);
  int32_t *ps = ialloc(n, 0), *pr = ialloc(n, -1), *qs = ialloc(n, 0), *qr = ialloc(n, -1);
  for (size_t i = 0; i < n; i++) {
    a[i] = (int32_t)(i % 1000 + rank);
    b[i] = (int32_t)(rank + 1) * (int32_t)(i % 3 + 1);
    ps[i] = val(rank, i, 40);
    qs[i] = val(rank, i, 41);
  }
  for (int order = 0; order < 2; order++) {
    ncclComm_t c1 = order ? dup : comm, c2 = order ? comm : dup;
    for (size_t i = 0; i < n; i++) ar[i] = br[i] = pr[i] = qr[i] = -1;
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclAllReduce(a, ar, n, ncclInt32, ncclSum, c1, NULL));
    CHECK_NCCL(ncclAllReduce(b, br, n, ncclInt32, ncclMax, c2, NULL));
    /* The same peers on both comms, messages in opposite directions. */
    CHECK_NCCL(ncclSend(ps, n, ncclInt32, next, c1, NULL));
    CHECK_NCCL(ncclRecv(qr, n, ncclInt32, next, c2, NULL));
    CHECK_NCCL(ncclRecv(pr, n, ncclInt32, prev, c1, NULL));
    CHECK_NCCL(ncclSend(qs, n, ncclInt32, prev, c2, NULL));
    CHECK_NCCL(ncclGroupEnd());
    long long tri = (long long)nranks * (nranks - 1) / 2;
    for (size_t i = 0; i < n; i++) {
      CHECK(ar[i] == (int32_t)((long long)(i % 1000) * nranks + tri),
            "two comms (order %d): allreduce int %zu is %d", order, i, (int)ar[i]);
      CHECK(br[i] == (int32_t)nranks * (int32_t)(i % 3 + 1),
            "two comms (order %d): max allreduce int %zu is %d", order, i, (int)br[i]);
    }
    expect(pr, n, prev, 0, 40, "two comms: recv from prev");
    expect(qr, n, next, 0, 41, "two comms: recv from next");
  }
  free(a); free(ar); free(b); free(br); free(ps); free(pr); free(qs); free(qr);
  nt_check_allreduce(dup, "the two-comm group");
  CHECK_NCCL(ncclCommDestroy(dup));
  test_pass("group: two communicators (world and a split copy)");
}

/* Nested groups: nothing starts before the outermost ncclGroupEnd. */
static void test_nested(void) {
  const size_t n = 4097;
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  int32_t *s = ialloc(n, 0), *r = ialloc(n, -1), *a = ialloc(n, 0), *ar = ialloc(n, -1);
  for (size_t i = 0; i < n; i++) {
    s[i] = val(rank, i, 50);
    a[i] = (int32_t)(rank + 1);
  }
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclSend(s, n, ncclInt32, next, comm, NULL));
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclAllReduce(a, ar, n, ncclInt32, ncclSum, comm, NULL));
  CHECK_NCCL(ncclGroupEnd());
  CHECK_NCCL(ncclRecv(r, n, ncclInt32, prev, comm, NULL));
  CHECK_NCCL(ncclGroupEnd());
  /* Still inside the outer group: the operations have not run. */
  for (size_t i = 0; i < n; i++) {
    CHECK(r[i] == -1, "nested group: recvbuff int %zu is %d before the outer ncclGroupEnd",
          i, (int)r[i]);
    CHECK(ar[i] == -1, "nested group: allreduce int %zu is %d before the outer ncclGroupEnd",
          i, (int)ar[i]);
  }
  CHECK_NCCL(ncclGroupEnd());
  expect(r, n, prev, 0, 50, "nested group: recv");
  for (size_t i = 0; i < n; i++)
    CHECK(ar[i] == nranks * (nranks + 1) / 2, "nested group: allreduce int %zu is %d", i,
          (int)ar[i]);
  free(s); free(r); free(a); free(ar);
  test_pass("group: nested groups start at the outermost end");
}

static void test_empty_and_unbalanced(void) {
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclGroupEnd());
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclGroupEnd());
  CHECK_NCCL(ncclGroupEnd());
  CHECK_NCCL_ERR(ncclGroupEnd(), ncclInvalidUsage);
  const char *e = ncclGetLastError(NULL);
  CHECK(e != NULL && e[0] != '\0', "ncclGroupEnd without a start: empty last error");
  CHECK_NCCL_ERR(ncclGroupEnd(), ncclInvalidUsage);
  nt_check_allreduce(comm, "ncclGroupEnd without a start");
  /* A group still works afterwards. */
  int32_t in[3] = {1, 2, 3}, out[3] = {0, 0, 0};
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclAllReduce(in, out, 3, ncclInt32, ncclSum, comm, NULL));
  CHECK_NCCL(ncclGroupEnd());
  for (int i = 0; i < 3; i++)
    CHECK(out[i] == (i + 1) * nranks, "group after an unbalanced end: int %d is %d", i,
          (int)out[i]);
  test_pass("group: empty groups; ncclGroupEnd without a start");
}

int main(int argc, char **argv) {
  comm = nt_init(&argc, &argv, &rank, &nranks);
  double t0 = nt_now();
  test_ring();
  test_alltoall_p2p();
  test_ungrouped_p2p();
  test_aggregated();
  test_two_comms();
  test_nested();
  test_empty_and_unbalanced();
  nt_check_allreduce(comm, "every group test");
  CHECK_NCCL(ncclCommDestroy(comm));
  if (rank == 0) printf("t_nccl_group: %d ranks in %.2f s\n", nranks, nt_now() - t0);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
