/* Communicator set-up and queries: ncclGetVersion, ncclGetUniqueId;
 * ncclCommInitAll with 1, 2, 3 ranks in one process (with and without a
 * devlist) and an allreduce over them from one thread in one group;
 * ncclCommInitRank of several ranks from one thread inside a group (all in
 * this process, and two per process across processes, as nccl-tests -g 2
 * does); non-blocking set-up (config.blocking = 0: ncclInProgress, then
 * ncclCommGetAsyncError polled to ncclSuccess) of InitRankConfig and Split;
 * config structs of older, smaller layouts (72 bytes as NCCL 2.27 headers
 * pass, 80 as 2.28), placed against an unreadable page so that reading past
 * `size` faults; ncclCommSplit with colours and keys (reversed keys reverse
 * ranks; NCCL_SPLIT_NOCOLOR gives NULL); ncclCommCount/UserRank/CuDevice;
 * ncclCommInitRankScalable; ncclCommMemStats, ncclCommRegister/Deregister,
 * ncclCommFinalize/Destroy and ncclCommAbort of healthy communicators. */
#include "nccl_testutil.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

static int rank, nranks;
static ncclComm_t world;

/* Waits (up to 20 s) for a non-blocking set-up; returns its outcome. */
static ncclResult_t wait_ready(ncclComm_t c, const char *what) {
  ncclResult_t st = ncclInProgress;
  double t0 = nt_now();
  do {
    CHECK_NCCL(ncclCommGetAsyncError(c, &st));
    if (st != ncclInProgress) break;
    usleep(1000);
  } while (nt_now() - t0 < 20.0);
  CHECK(st != ncclInProgress, "%s: still ncclInProgress after 20 s", what);
  return st;
}

/* Checks rank/size queries of c. */
static void expect_comm(ncclComm_t c, int want_rank, int want_size, const char *what) {
  int r = -1, n = -1, d = -1;
  CHECK(c != NULL, "%s: NULL communicator", what);
  CHECK_NCCL(ncclCommCount(c, &n));
  CHECK_NCCL(ncclCommUserRank(c, &r));
  CHECK_NCCL(ncclCommCuDevice(c, &d));
  CHECK(n == want_size && r == want_rank, "%s: rank %d of %d, want %d of %d", what, r, n,
        want_rank, want_size);
  CHECK(d >= 0, "%s: ncclCommCuDevice gave %d", what, d);
}

/* Allreduce (sum) over k communicators of this process from one thread in
 * one group; comm i contributes base[i]. Checks every result is `want`. */
static void group_allreduce(ncclComm_t *cs, int k, const int64_t *base, int64_t want,
                            const char *what) {
  enum { N = 1000 };
  int64_t *in = (int64_t *)malloc(sizeof(int64_t) * N * (size_t)k);
  int64_t *out = (int64_t *)malloc(sizeof(int64_t) * N * (size_t)k);
  CHECK(in && out, "malloc");
  for (int c = 0; c < k; c++)
    for (int i = 0; i < N; i++) {
      in[c * N + i] = base[c] * (i + 1);
      out[c * N + i] = -1;
    }
  CHECK_NCCL(ncclGroupStart());
  for (int c = 0; c < k; c++)
    CHECK_NCCL(ncclAllReduce(in + c * N, out + c * N, N, ncclInt64, ncclSum, cs[c], NULL));
  CHECK_NCCL(ncclGroupEnd());
  for (int c = 0; c < k; c++)
    for (int i = 0; i < N; i++)
      CHECK(out[c * N + i] == want * (i + 1), "%s: comm %d element %d is %lld, want %lld",
            what, c, i, (long long)out[c * N + i], (long long)(want * (i + 1)));
  free(in);
  free(out);
}

static void test_version_and_ids(void) {
  int v = 0;
  CHECK_NCCL(ncclGetVersion(&v));
  CHECK(v == 23203, "ncclGetVersion gave %d, want 23203", v);
  CHECK(NCCL_VERSION_CODE == NCCL_VERSION(2, 32, 3), "NCCL_VERSION_CODE is %d",
        (int)NCCL_VERSION_CODE);
  CHECK(v == NCCL_VERSION_CODE, "ncclGetVersion %d but the header says %d", v,
        (int)NCCL_VERSION_CODE);
  ncclUniqueId a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  CHECK_NCCL(ncclGetUniqueId(&a));
  CHECK_NCCL(ncclGetUniqueId(&b));
  CHECK(sizeof a == 128, "sizeof(ncclUniqueId) is %zu", sizeof a);
  CHECK(memcmp(&a, &b, sizeof a) != 0, "two ncclGetUniqueId calls gave the same id");
  test_pass("ncclGetVersion 23203; unique ids differ");
}

static void test_world_queries(void) {
  expect_comm(world, rank, nranks, "world");
  int d = -1;
  CHECK_NCCL(ncclCommCuDevice(world, &d));
  CHECK(d == 0, "world: ncclCommCuDevice gave %d, want 0", d);
  ncclResult_t st = ncclInternalError;
  CHECK_NCCL(ncclCommGetAsyncError(world, &st));
  CHECK(st == ncclSuccess, "world: async error %d", (int)st);
  for (int s = ncclStatGpuMemSuspend; s <= ncclStatGpuMemTotal; s++) {
    uint64_t val = 12345;
    CHECK_NCCL(ncclCommMemStats(world, (ncclCommMemStat_t)s, &val));
    CHECK(val == 0, "ncclCommMemStats(%d) gave %llu, want 0 in host mode", s,
          (unsigned long long)val);
  }
  /* Registration of host buffers, used by a collective, then released. */
  int64_t buf[64], out[64];
  void *h = NULL;
  for (int i = 0; i < 64; i++) buf[i] = rank + i;
  CHECK_NCCL(ncclCommRegister(world, buf, sizeof buf, &h));
  CHECK_NCCL(ncclAllReduce(buf, out, 64, ncclInt64, ncclMax, world, NULL));
  for (int i = 0; i < 64; i++)
    CHECK(out[i] == nranks - 1 + i, "registered buffer: element %d is %lld", i,
          (long long)out[i]);
  CHECK_NCCL(ncclCommDeregister(world, h));
  test_pass("world: count, rank, device 0, async error, mem stats, register");
}

static void test_init_all(void) {
  for (int k = 1; k <= 3; k++)
    for (int withlist = 0; withlist < 2; withlist++) {
      ncclComm_t cs[3] = {NULL, NULL, NULL};
      int devs[3];
      for (int i = 0; i < k; i++) devs[i] = k - 1 - i; /* reversed */
      CHECK_NCCL(ncclCommInitAll(cs, k, withlist ? devs : NULL));
      int64_t base[3];
      for (int i = 0; i < k; i++) {
        char what[64];
        snprintf(what, sizeof what, "ncclCommInitAll(%d, %s) comm %d", k,
                 withlist ? "devlist" : "NULL", i);
        expect_comm(cs[i], i, k, what);
        int d = -1;
        CHECK_NCCL(ncclCommCuDevice(cs[i], &d));
        CHECK(d == (withlist ? devs[i] : i), "%s: device %d, want %d", what, d,
              withlist ? devs[i] : i);
        base[i] = 10 + i;
      }
      group_allreduce(cs, k, base, (int64_t)(10 * k + k * (k - 1) / 2), "InitAll allreduce");
      for (int i = 0; i < k; i++) CHECK_NCCL(ncclCommDestroy(cs[i]));
    }
  test_pass("ncclCommInitAll 1..3 ranks, grouped allreduce");
}

/* Several ranks of one communicator set up from this thread in one group. */
static void test_group_init_local(void) {
  for (int k = 2; k <= 3; k++)
    for (int cfg = 0; cfg < 2; cfg++) {
      ncclUniqueId id;
      ncclComm_t cs[3] = {NULL, NULL, NULL};
      CHECK_NCCL(ncclGetUniqueId(&id));
      CHECK_NCCL(ncclGroupStart());
      for (int i = 0; i < k; i++) {
        if (cfg) {
          ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
          c.commName = "grouped";
          CHECK_NCCL(ncclCommInitRankConfig(&cs[i], k, id, i, &c));
        } else {
          CHECK_NCCL(ncclCommInitRank(&cs[i], k, id, i));
        }
      }
      CHECK_NCCL(ncclGroupEnd());
      int64_t base[3];
      for (int i = 0; i < k; i++) {
        expect_comm(cs[i], i, k, "grouped InitRank");
        base[i] = 100 * (i + 1);
      }
      group_allreduce(cs, k, base, (int64_t)(100 * k * (k + 1) / 2), "grouped InitRank");
      for (int i = 0; i < k; i++) {
        CHECK_NCCL(ncclCommFinalize(cs[i]));
        CHECK_NCCL(ncclCommDestroy(cs[i]));
      }
    }
  test_pass("ncclCommInitRank(Config) of 2-3 ranks from one thread in a group");
}

/* Two ranks per process, across processes: nccl-tests -g 2 with MPI. */
static void test_group_init_across(void) {
  ncclUniqueId id = nt_bcast_id(MPI_COMM_WORLD);
  ncclComm_t cs[2] = {NULL, NULL};
  int N = 2 * nranks;
  CHECK_NCCL(ncclGroupStart());
  for (int i = 0; i < 2; i++) CHECK_NCCL(ncclCommInitRank(&cs[i], N, id, 2 * rank + i));
  CHECK_NCCL(ncclGroupEnd());
  int64_t base[2];
  for (int i = 0; i < 2; i++) {
    expect_comm(cs[i], 2 * rank + i, N, "two ranks per process");
    base[i] = 2 * rank + i + 1;
  }
  group_allreduce(cs, 2, base, (int64_t)N * (N + 1) / 2, "two ranks per process");
  for (int i = 0; i < 2; i++) CHECK_NCCL(ncclCommDestroy(cs[i]));
  test_pass("grouped InitRank, two ranks in each process");
}

static void test_nonblocking(void) {
  ncclUniqueId id = nt_bcast_id(MPI_COMM_WORLD);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t c = NULL;
  CHECK_NCCL_ERR(ncclCommInitRankConfig(&c, nranks, id, rank, &cfg), ncclInProgress);
  CHECK(c != NULL, "non-blocking init: no handle returned with ncclInProgress");
  CHECK(wait_ready(c, "non-blocking init") == ncclSuccess, "non-blocking init failed: %s",
        ncclGetLastError(NULL));
  expect_comm(c, rank, nranks, "non-blocking init");
  /* Host mode: calls complete before they return; NCCL also lets a
   * non-blocking comm answer ncclInProgress, so that is waited out too. */
  int32_t in[5], out[5];
  for (int i = 0; i < 5; i++) {
    in[i] = rank * i;
    out[i] = -1;
  }
  ncclResult_t rc = ncclAllReduce(in, out, 5, ncclInt32, ncclSum, c, NULL);
  CHECK(rc == ncclSuccess || rc == ncclInProgress, "allreduce on a non-blocking comm: %d (%s)",
        (int)rc, ncclGetLastError(NULL));
  if (rc == ncclInProgress) CHECK(wait_ready(c, "allreduce") == ncclSuccess, "allreduce failed");
  for (int i = 0; i < 5; i++)
    CHECK(out[i] == i * nranks * (nranks - 1) / 2, "non-blocking comm allreduce: %d is %d", i,
          (int)out[i]);

  /* Non-blocking split of it: colour by parity. */
  ncclConfig_t scfg = NCCL_CONFIG_INITIALIZER;
  scfg.blocking = 0;
  ncclComm_t s = NULL;
  rc = ncclCommSplit(c, rank % 2, rank, &s, &scfg);
  CHECK(rc == ncclInProgress || rc == ncclSuccess, "non-blocking split: %d (%s)", (int)rc,
        ncclGetLastError(NULL));
  CHECK(s != NULL, "non-blocking split: NULL handle");
  CHECK(wait_ready(s, "non-blocking split") == ncclSuccess, "non-blocking split failed");
  expect_comm(s, rank / 2, (nranks - rank % 2 + 1) / 2, "non-blocking split");
  nt_check_allreduce(s, "a non-blocking split");
  CHECK_NCCL(ncclCommDestroy(s));
  CHECK_NCCL(ncclCommFinalize(c));
  CHECK_NCCL(ncclCommDestroy(c));
  test_pass("non-blocking init and split: ncclInProgress, then ncclSuccess");
}

/* A config as an older header builds it: `size` bytes, the last byte just
 * before a PROT_NONE page. */
static void test_small_config(void) {
  long page = sysconf(_SC_PAGESIZE);
  const size_t sizes[2] = {72, 80};
  const int versions[2] = {NCCL_VERSION(2, 27, 7), NCCL_VERSION(2, 28, 3)};
  unsigned char *map = (unsigned char *)mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE,
                                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(map != MAP_FAILED, "mmap");
  CHECK(mprotect(map + page, (size_t)page, PROT_NONE) == 0, "mprotect");
  CHECK(offsetof(ncclConfig_t, nvlsCTAs) + sizeof(int) == 72, "nvlsCTAs ends at %zu",
        offsetof(ncclConfig_t, nvlsCTAs) + sizeof(int));
  for (int k = 0; k < 2; k++) {
    ncclConfig_t full = NCCL_CONFIG_INITIALIZER;
    full.size = sizes[k];
    full.version = (unsigned)versions[k];
    full.commName = "old-layout";
    unsigned char *at = map + page - sizes[k];
    memcpy(at, &full, sizes[k]);
    ncclConfig_t *cfg = (ncclConfig_t *)(void *)at;
    ncclUniqueId id = nt_bcast_id(MPI_COMM_WORLD);
    ncclComm_t c = NULL;
    CHECK_NCCL(ncclCommInitRankConfig(&c, nranks, id, rank, cfg));
    expect_comm(c, rank, nranks, "small config");
    nt_check_allreduce(c, "an init with a small config");
    ncclComm_t s = NULL;
    CHECK_NCCL(ncclCommSplit(c, 0, 0, &s, cfg));
    expect_comm(s, rank, nranks, "split with a small config");
    CHECK_NCCL(ncclCommDestroy(s));
    CHECK_NCCL(ncclCommDestroy(c));
  }
  munmap(map, (size_t)page * 2);
  test_pass("config structs of 72 (NCCL 2.27) and 80 (2.28) bytes");
}

static void test_split(void) {
  /* Colour by parity, keys reversed: ranks reversed within each colour. */
  ncclComm_t s = NULL;
  CHECK_NCCL(ncclCommSplit(world, rank % 2, nranks - rank, &s, NULL));
  int members = (nranks - rank % 2 + 1) / 2;      /* ranks of my colour */
  int above = (nranks - 1 - rank) / 2;            /* of my colour, above me */
  expect_comm(s, above, members, "split (parity, reversed keys)");
  /* Who is where: allgather of world ranks. */
  int32_t me = rank, all[8];
  CHECK(members <= 8, "too many ranks");
  CHECK_NCCL(ncclAllGather(&me, all, 1, ncclInt32, s, NULL));
  for (int i = 0; i < members; i++) {
    int want = (members - 1 - i) * 2 + rank % 2;
    CHECK(all[i] == want, "split (reversed keys): new rank %d is world rank %d, want %d", i,
          (int)all[i], want);
  }
  CHECK_NCCL(ncclCommDestroy(s));

  /* Equal keys: ordered by old rank. */
  CHECK_NCCL(ncclCommSplit(world, 7, 5, &s, NULL));
  expect_comm(s, rank, nranks, "split (equal keys)");
  CHECK_NCCL(ncclAllGather(&me, all, 1, ncclInt32, s, NULL));
  for (int i = 0; i < nranks && i < 8; i++)
    CHECK(all[i] == i, "split (equal keys): new rank %d is world rank %d", i, (int)all[i]);
  CHECK_NCCL(ncclCommDestroy(s));

  /* NCCL_SPLIT_NOCOLOR: rank 0 stays out. */
  s = world; /* must be overwritten with NULL */
  CHECK_NCCL(ncclCommSplit(world, rank == 0 ? NCCL_SPLIT_NOCOLOR : 3, rank, &s, NULL));
  if (rank == 0) {
    CHECK(s == NULL, "NCCL_SPLIT_NOCOLOR gave %p, want NULL", (void *)s);
  } else {
    expect_comm(s, rank - 1, nranks - 1, "split without rank 0");
    nt_check_allreduce(s, "a split without rank 0");
    CHECK_NCCL(ncclCommDestroy(s));
  }

  /* A split of a split. */
  ncclComm_t a = NULL, b = NULL;
  CHECK_NCCL(ncclCommSplit(world, 0, -rank, &a, NULL));
  expect_comm(a, nranks - 1 - rank, nranks, "split (reversed)");
  CHECK_NCCL(ncclCommSplit(a, 0, -(nranks - 1 - rank), &b, NULL));
  expect_comm(b, rank, nranks, "split of the reversed split");
  nt_check_allreduce(b, "a split of a split");
  CHECK_NCCL(ncclCommDestroy(b));
  CHECK_NCCL(ncclCommDestroy(a));
  test_pass("ncclCommSplit: colours, keys, NCCL_SPLIT_NOCOLOR, nesting");
}

static void test_scalable(void) {
  ncclUniqueId ids[2];
  memset(ids, 0, sizeof ids);
  if (rank == 0) {
    CHECK_NCCL(ncclGetUniqueId(&ids[0]));
    CHECK_NCCL(ncclGetUniqueId(&ids[1]));
  }
  CHECK_MPI(MPI_Bcast(ids, (int)sizeof ids, MPI_BYTE, 0, MPI_COMM_WORLD));
  for (int nid = 1; nid <= 2; nid++) {
    ncclComm_t c = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    CHECK_NCCL(ncclCommInitRankScalable(&c, nranks, rank, nid, ids, nid == 1 ? NULL : &cfg));
    expect_comm(c, rank, nranks, "ncclCommInitRankScalable");
    nt_check_allreduce(c, "ncclCommInitRankScalable");
    CHECK_NCCL(ncclCommDestroy(c));
    if (nid == 1) { /* the first id is used up; make fresh ones */
      if (rank == 0) {
        CHECK_NCCL(ncclGetUniqueId(&ids[0]));
        CHECK_NCCL(ncclGetUniqueId(&ids[1]));
      }
      CHECK_MPI(MPI_Bcast(ids, (int)sizeof ids, MPI_BYTE, 0, MPI_COMM_WORLD));
    }
  }
  test_pass("ncclCommInitRankScalable with 1 and 2 ids");
}

static void test_abort_healthy(void) {
  ncclComm_t c = NULL;
  CHECK_NCCL(ncclCommSplit(world, 0, rank, &c, NULL));
  nt_check_allreduce(c, "a split to abort");
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_NCCL(ncclCommAbort(c));
  nt_check_allreduce(world, "aborting a split of it");
  test_pass("ncclCommAbort of a healthy split leaves its parent working");
}

int main(int argc, char **argv) {
  world = nt_init(&argc, &argv, &rank, &nranks);
  double t0 = nt_now();
  test_version_and_ids();
  test_world_queries();
  test_init_all();
  test_group_init_local();
  test_group_init_across();
  test_nonblocking();
  test_small_config();
  test_split();
  test_scalable();
  test_abort_healthy();
  nt_check_allreduce(world, "every init test");
  CHECK_NCCL(ncclCommFinalize(world));
  CHECK_NCCL(ncclCommDestroy(world));
  if (rank == 0) printf("t_nccl_init: %d ranks in %.2f s\n", nranks, nt_now() - t0);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
