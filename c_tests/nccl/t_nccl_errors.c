/* Bad input to the NCCL face, class by class, on every function it applies
 * to: the exact ncclResult_t, a non-empty ncclGetLastError, and a correct
 * allreduce on the same communicator afterwards.
 *
 *   ncclInvalidArgument: NULL comm; destroyed comm; aborted comm; unknown
 *     datatype; unknown op (and a destroyed PreMulSum, one made for another
 *     type); root/peer out of range; NULL buffer with count > 0; a stream
 *     other than NULL (host mode; skipped when a CUDA driver is loaded, as
 *     streams are then waited on); partially overlapping send and receive
 *     buffers; NULL out-pointers; ncclCommInitRank* with a rank out of
 *     range, nranks < 1, a garbage or all-zero unique id, a config with a
 *     bad magic; ncclRedOpDestroy of a built-in/unknown op; ncclCommFinalize
 *     twice (as NCCL's init.cc); ncclCommDestroy twice.
 *   ncclInvalidUsage: ncclGroupEnd without ncclGroupStart; ncclRecv whose
 *     count differs from the matching ncclSend; every unsupported name.
 *   ncclSuccess (as NVIDIA's NCCL): ncclCommDestroy/Abort/Finalize(NULL).
 * The last two tests, where NVIDIA's NCCL answers differently from "NULL or
 * finished comm: ncclInvalidArgument", run last.
 *
 * Added with t_badinput.c (the MPI matrix), all ncclInvalidArgument: a comm
 * handle that is no communicator (zeroed memory, a misaligned pointer); a
 * count whose size overflows the address space (a negative count cast to
 * size_t); a PreMulSum op made on another communicator; NULL or unknown
 * registration handles and ncclMemFree pointers, each freed twice; unknown
 * statistics and scalar residences; ncclCommInitRankConfig/Scalable with
 * NULL out-pointers or bad config fields; ncclCommSplit with a colour below
 * NCCL_SPLIT_NOCOLOR or a bad config. ncclGetLastError and
 * ncclGetErrorString must answer a string for any argument.
 *
 * NCCL has no alignment rule: misaligned buffers are checked to work.
 *
 * Prints how many functions and (function x bad-input class) pairs were
 * tried, in the format of t_badinput.c. */
#include "nccl_testutil.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <unistd.h>

static int rank, nranks;
static ncclComm_t world;
static long nbad;

/* ---- the (function x class) pairs tried ---------------------------------- */

enum { MAXPAIRS = 1024 };
static char pairs[MAXPAIRS][96];
static int npairs;

static void tried(const char *fn, const char *cls) {
  char key[96];
  snprintf(key, sizeof key, "%s x %s", fn, cls);
  for (int i = 0; i < npairs; i++)
    if (strcmp(pairs[i], key) == 0) return;
  CHECK(npairs < MAXPAIRS, "too many pairs");
  memcpy(pairs[npairs++], key, sizeof key);
}

/* Whether the last error names the function that failed (the ...Config
 * variants may give the name of the call they share a body with), so a
 * message left by an earlier call does not pass for this one's. */
static int names_call(const char *msg, const char *fn) {
  char base[64];
  size_t n = strlen(fn);
  if (msg == NULL || msg[0] == '\0') return 0;
  if (strstr(msg, fn) != NULL) return 1;
  if (n > 6 && n < sizeof base && strcmp(fn + n - 6, "Config") == 0) {
    memcpy(base, fn, n - 6);
    base[n - 6] = '\0';
    return strstr(msg, base) != NULL;
  }
  return 0;
}

/* `call` (a call of function `fn`, bad in class `cls`) must return `code`
 * and, for an error, leave a last error that names the call. */
#define BAD(fn, cls, code, call)                                               \
  do {                                                                         \
    ncclResult_t rb_ = (call);                                                 \
    const char *le_ = ncclGetLastError(NULL);                                  \
    CHECK(rb_ == (code), "%s with %s: %s returned %d (%s), want %d (%s); "     \
          "last error: \"%s\"", fn, cls, #call, (int)rb_,                      \
          ncclGetErrorString(rb_), (int)(code), #code, le_ ? le_ : "(null)");  \
    if ((code) != ncclSuccess)                                                 \
      CHECK(names_call(le_, fn), "%s with %s: ncclGetLastError \"%s\" does not " \
            "name the call (a stale message?)", fn, cls, le_ ? le_ : "(null)");  \
    tried(fn, cls);                                                            \
    nbad++;                                                                    \
  } while (0)

/* Handles that are no communicator: zeroed memory, and a misaligned pointer
 * into it (both readable, so a library that did not check would not crash
 * but misbehave). */
static uint64_t fake_comm_mem[64];
static ncclComm_t fake_comm(int k) {
  return k == 0 ? (ncclComm_t)(void *)fake_comm_mem
                : (ncclComm_t)(void *)((char *)fake_comm_mem + 3);
}

/* ---- collectives and point-to-point, one dispatcher ------------------------ */

enum { F_ALLREDUCE, F_ALLREDUCE_C, F_REDUCE, F_REDUCE_C, F_REDUCESCATTER, F_REDUCESCATTER_C,
       F_BROADCAST, F_BROADCAST_C, F_BCAST, F_ALLGATHER, F_ALLGATHER_C, F_ALLTOALL,
       F_ALLTOALL_C, F_GATHER, F_GATHER_C, F_SCATTER, F_SCATTER_C, F_SEND, F_RECV, NF };
static const char *const fnames[NF] = {
    "ncclAllReduce", "ncclAllReduceConfig", "ncclReduce", "ncclReduceConfig",
    "ncclReduceScatter", "ncclReduceScatterConfig", "ncclBroadcast", "ncclBroadcastConfig",
    "ncclBcast", "ncclAllGather", "ncclAllGatherConfig", "ncclAlltoAll",
    "ncclAlltoAllConfig", "ncclGather", "ncclGatherConfig", "ncclScatter",
    "ncclScatterConfig", "ncclSend", "ncclRecv"};

static int has_op(int f) { return f <= F_REDUCESCATTER_C; }
static int has_root(int f) {
  return f == F_REDUCE || f == F_REDUCE_C || f == F_BROADCAST || f == F_BROADCAST_C ||
         f == F_BCAST || f == F_GATHER || f == F_GATHER_C || f == F_SCATTER ||
         f == F_SCATTER_C;
}

static ncclResult_t coll(int f, const void *s, void *r, size_t n, ncclDataType_t t,
                         ncclRedOp_t op, int root, ncclComm_t c, cudaStream_t st) {
  ncclCollConfig_t cfg = NCCL_COLLCONFIG_INITIALIZER;
  switch (f) {
  case F_ALLREDUCE: return ncclAllReduce(s, r, n, t, op, c, st);
  case F_ALLREDUCE_C: return ncclAllReduceConfig(s, r, n, t, op, c, st, &cfg);
  case F_REDUCE: return ncclReduce(s, r, n, t, op, root, c, st);
  case F_REDUCE_C: return ncclReduceConfig(s, r, n, t, op, root, c, st, &cfg);
  case F_REDUCESCATTER: return ncclReduceScatter(s, r, n, t, op, c, st);
  case F_REDUCESCATTER_C: return ncclReduceScatterConfig(s, r, n, t, op, c, st, &cfg);
  case F_BROADCAST: return ncclBroadcast(s, r, n, t, root, c, st);
  case F_BROADCAST_C: return ncclBroadcastConfig(s, r, n, t, root, c, st, &cfg);
  case F_BCAST: return ncclBcast(r, n, t, root, c, st);
  case F_ALLGATHER: return ncclAllGather(s, r, n, t, c, st);
  case F_ALLGATHER_C: return ncclAllGatherConfig(s, r, n, t, c, st, &cfg);
  case F_ALLTOALL: return ncclAlltoAll(s, r, n, t, c, st);
  case F_ALLTOALL_C: return ncclAlltoAllConfig(s, r, n, t, c, st, &cfg);
  case F_GATHER: return ncclGather(s, r, n, t, root, c, st);
  case F_GATHER_C: return ncclGatherConfig(s, r, n, t, root, c, st, &cfg);
  case F_SCATTER: return ncclScatter(s, r, n, t, root, c, st);
  case F_SCATTER_C: return ncclScatterConfig(s, r, n, t, root, c, st, &cfg);
  case F_SEND: return ncclSend(s, n, t, root, c, st);
  default: return ncclRecv(r, n, t, root, c, st);
  }
}

enum { C = 10 };          /* elements per block */
static int32_t *bufA, *bufB; /* (nranks + 2) * C ints each */

/* Whether a CUDA driver is loaded: then a stream argument is waited on. */
static int cuda_driver_present(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return 0;
  int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
  return init != NULL && init(0) == 0;
}

static void test_coll_classes(void) {
  const ncclRedOp_t op = ncclSum;
  const ncclDataType_t t = ncclInt32;
  ncclComm_t dead = NULL, aborted = NULL;
  CHECK_NCCL(ncclCommSplit(world, 0, rank, &dead, NULL));
  CHECK_NCCL(ncclCommDestroy(dead));
  CHECK_NCCL(ncclCommSplit(world, 0, rank, &aborted, NULL));
  CHECK_NCCL(ncclCommAbort(aborted));
  /* PreMulSum ops: one destroyed, one made for float. */
  ncclRedOp_t gone, pm_float;
  float fscalar = 2.0f;
  int32_t iscalar = 2;
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&gone, &iscalar, ncclInt32, ncclScalarHostImmediate, world));
  CHECK_NCCL(ncclRedOpDestroy(gone, world));
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&pm_float, &fscalar, ncclFloat32,
                                      ncclScalarHostImmediate, world));
  /* A finalized (not yet destroyed) comm: only queries and destroy are
   * left to do with it. */
  ncclComm_t fin = NULL, other = NULL;
  CHECK_NCCL(ncclCommSplit(world, 0, rank, &fin, NULL));
  CHECK_NCCL(ncclCommFinalize(fin));
  /* Ops made on another comm: the second one's handle is none of world's. */
  ncclRedOp_t other_ops[2];
  CHECK_NCCL(ncclCommSplit(world, 0, rank, &other, NULL));
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&other_ops[0], &iscalar, ncclInt32,
                                      ncclScalarHostImmediate, other));
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&other_ops[1], &iscalar, ncclInt32,
                                      ncclScalarHostImmediate, other));
  const int with_stream = !cuda_driver_present();
  if (!with_stream && rank == 0)
    printf("note: a CUDA driver is loaded: the non-NULL stream class is not tried\n");

  for (int f = 0; f < NF; f++) {
    const char *fn = fnames[f];
    int32_t *s = bufA, *r = bufB;
    const int root = has_root(f) ? rank : (f >= F_SEND ? (rank + 1) % nranks : 0);
    BAD(fn, "NULL comm", ncclInvalidArgument, coll(f, s, r, C, t, op, root, NULL, NULL));
    BAD(fn, "destroyed comm", ncclInvalidArgument, coll(f, s, r, C, t, op, root, dead, NULL));
    BAD(fn, "aborted comm", ncclInvalidArgument, coll(f, s, r, C, t, op, root, aborted, NULL));
    for (int k = 0; k < 2; k++)
      BAD(fn, "invalid comm handle", ncclInvalidArgument,
          coll(f, s, r, C, t, op, root, fake_comm(k), NULL));
    BAD(fn, "finalized comm", ncclInvalidArgument,
        coll(f, s, r, C, t, op, root, fin, NULL));
    /* A negative count cast to size_t, and sizes past the address space. */
    BAD(fn, "count overflows the address space", ncclInvalidArgument,
        coll(f, s, r, (size_t)-1, t, op, root, world, NULL));
    BAD(fn, "count overflows the address space", ncclInvalidArgument,
        coll(f, s, r, SIZE_MAX / 4, t, op, root, world, NULL));
    BAD(fn, "unknown datatype", ncclInvalidArgument,
        coll(f, s, r, C, (ncclDataType_t)99, op, root, world, NULL));
    BAD(fn, "unknown datatype", ncclInvalidArgument,
        coll(f, s, r, C, (ncclDataType_t)ncclNumTypes, op, root, world, NULL));
    if (has_op(f)) {
      BAD(fn, "unknown op", ncclInvalidArgument,
          coll(f, s, r, C, t, (ncclRedOp_t)99, root, world, NULL));
      BAD(fn, "unknown op", ncclInvalidArgument,
          coll(f, s, r, C, t, (ncclRedOp_t)ncclNumOps, root, world, NULL));
      BAD(fn, "destroyed PreMulSum op", ncclInvalidArgument,
          coll(f, s, r, C, t, gone, root, world, NULL));
      BAD(fn, "PreMulSum op of another type", ncclInvalidArgument,
          coll(f, s, r, C, t, pm_float, root, world, NULL));
      BAD(fn, "PreMulSum op of another comm", ncclInvalidArgument,
          coll(f, s, r, C, t, other_ops[1], root, world, NULL));
    }
    if (has_root(f) || f >= F_SEND) {
      const char *cls = f >= F_SEND ? "peer out of range" : "root out of range";
      BAD(fn, cls, ncclInvalidArgument, coll(f, s, r, C, t, op, -1, world, NULL));
      BAD(fn, cls, ncclInvalidArgument, coll(f, s, r, C, t, op, nranks, world, NULL));
      BAD(fn, cls, ncclInvalidArgument, coll(f, s, r, C, t, op, 1 << 30, world, NULL));
    }
    /* NULL buffers with a count (a rooted call is made as its own root,
     * where both buffers matter; the call fails before any traffic). */
    if (f != F_BCAST && f != F_RECV)
      BAD(fn, "NULL sendbuff, count > 0", ncclInvalidArgument,
          coll(f, NULL, r, C, t, op, root, world, NULL));
    if (f != F_SEND)
      BAD(fn, "NULL recvbuff, count > 0", ncclInvalidArgument,
          coll(f, s, NULL, C, t, op, root, world, NULL));
    if (with_stream)
      BAD(fn, "non-NULL stream", ncclInvalidArgument,
          coll(f, s, r, C, t, op, root, world, (cudaStream_t)(uintptr_t)0x1000));
    /* Partial overlaps: near NCCL's in-place layout but not on it. */
    if (f != F_BCAST && f < F_SEND) {
      int32_t *B = bufA;
      size_t me = (size_t)rank;
      const char *cls = "overlapping buffers";
      switch (f) {
      case F_REDUCESCATTER:
      case F_REDUCESCATTER_C:
        BAD(fn, cls, ncclInvalidArgument, coll(f, B, B + me * C + 1, C, t, op, root, world, NULL));
        BAD(fn, cls, ncclInvalidArgument, coll(f, B + 1, B + me * C, C, t, op, root, world, NULL));
        break;
      case F_ALLGATHER:
      case F_ALLGATHER_C:
      case F_GATHER:
      case F_GATHER_C:
        BAD(fn, cls, ncclInvalidArgument, coll(f, B + me * C + 1, B, C, t, op, root, world, NULL));
        BAD(fn, cls, ncclInvalidArgument,
            coll(f, B + me * C + C - 1, B, C, t, op, root, world, NULL));
        break;
      case F_SCATTER:
      case F_SCATTER_C:
        BAD(fn, cls, ncclInvalidArgument, coll(f, B, B + me * C + 1, C, t, op, root, world, NULL));
        break;
      default: /* AllReduce, Reduce, Broadcast, AlltoAll */
        BAD(fn, cls, ncclInvalidArgument, coll(f, B, B + 1, C, t, op, root, world, NULL));
        BAD(fn, cls, ncclInvalidArgument, coll(f, B + C - 1, B, C, t, op, root, world, NULL));
        break;
      }
    }
    nt_check_allreduce(world, fn);
  }
  CHECK_NCCL(ncclRedOpDestroy(pm_float, world));
  BAD("ncclRedOpDestroy", "op of another comm", ncclInvalidArgument,
      ncclRedOpDestroy(other_ops[1], world));
  CHECK_NCCL(ncclRedOpDestroy(other_ops[0], other));
  CHECK_NCCL(ncclRedOpDestroy(other_ops[1], other));
  nt_check_allreduce(other, "its ops used on another comm");
  CHECK_NCCL(ncclCommDestroy(other));
  /* The finalized comm still answers queries (ncclCommGetAsyncError is how
   * a non-blocking finalize is polled); new work on it is a bug above. */
  {
    int x = -1;
    ncclResult_t st = ncclInternalError;
    CHECK_NCCL(ncclCommCount(fin, &x));
    CHECK(x == nranks, "ncclCommCount of a finalized comm: %d", x);
    CHECK_NCCL(ncclCommUserRank(fin, &x));
    CHECK(x == rank, "ncclCommUserRank of a finalized comm: %d", x);
    CHECK_NCCL(ncclCommGetAsyncError(fin, &st));
    CHECK(st == ncclSuccess, "ncclCommGetAsyncError of a finalized comm: %d", (int)st);
    ncclComm_t sub = NULL;
    BAD("ncclCommSplit", "finalized comm",
        ncclInvalidArgument, ncclCommSplit(fin, 0, rank, &sub, NULL));
    if (sub != NULL) CHECK_NCCL(ncclCommDestroy(sub));
  }
  CHECK_NCCL(ncclCommDestroy(fin));
  test_pass("collectives and send/recv: every bad-argument class");

  /* A bad call inside a group: the call fails, and ncclGroupEnd reports it. */
  CHECK_NCCL(ncclGroupStart());
  BAD("ncclAllReduce", "unknown datatype, in a group", ncclInvalidArgument,
      ncclAllReduce(bufA, bufB, C, (ncclDataType_t)99, ncclSum, world, NULL));
  BAD("ncclGroupEnd", "group with a failed call", ncclInvalidArgument, ncclGroupEnd());
  nt_check_allreduce(world, "a group with a failed call");
  test_pass("a failed call inside a group");

  /* Queries and the rest on NULL, destroyed and aborted comms, and on
   * handles that are no communicator. */
  ncclComm_t bad[5] = {NULL, dead, aborted, fake_comm(0), fake_comm(1)};
  const char *bname[5] = {"NULL comm", "destroyed comm", "aborted comm", "invalid comm handle",
                          "invalid comm handle"};
  for (int b = 0; b < 5; b++) {
    int x = 0;
    ncclResult_t st;
    uint64_t v = 0;
    void *h = NULL;
    ncclComm_t nc = NULL;
    ncclRedOp_t o;
    BAD("ncclCommCount", bname[b], ncclInvalidArgument, ncclCommCount(bad[b], &x));
    BAD("ncclCommUserRank", bname[b], ncclInvalidArgument, ncclCommUserRank(bad[b], &x));
    BAD("ncclCommCuDevice", bname[b], ncclInvalidArgument, ncclCommCuDevice(bad[b], &x));
    BAD("ncclCommGetAsyncError", bname[b], ncclInvalidArgument,
        ncclCommGetAsyncError(bad[b], &st));
    BAD("ncclCommMemStats", bname[b], ncclInvalidArgument,
        ncclCommMemStats(bad[b], ncclStatGpuMemTotal, &v));
    BAD("ncclCommRegister", bname[b], ncclInvalidArgument,
        ncclCommRegister(bad[b], bufA, sizeof(int32_t) * C, &h));
    BAD("ncclCommDeregister", bname[b], ncclInvalidArgument, ncclCommDeregister(bad[b], h));
    /* No error code to give: the last error, whatever the comm, is a string. */
    const char *le = ncclGetLastError(bad[b]);
    CHECK(le != NULL, "ncclGetLastError(%s) is NULL", bname[b]);
    tried("ncclGetLastError", bname[b]);
    BAD("ncclCommSplit", bname[b], ncclInvalidArgument, ncclCommSplit(bad[b], 0, 0, &nc, NULL));
    BAD("ncclRedOpCreatePreMulSum", bname[b], ncclInvalidArgument,
        ncclRedOpCreatePreMulSum(&o, &iscalar, ncclInt32, ncclScalarHostImmediate, bad[b]));
    BAD("ncclRedOpDestroy", bname[b], ncclInvalidArgument, ncclRedOpDestroy(ncclSum, bad[b]));
    if (b == 0) {
      /* NVIDIA's NCCL: destroying or aborting NULL is a no-op (Finalize:
       * see test_as_nvidia_nccl). */
      BAD("ncclCommDestroy", "NULL comm (no-op in NCCL)", ncclSuccess, ncclCommDestroy(NULL));
      BAD("ncclCommAbort", "NULL comm (no-op in NCCL)", ncclSuccess, ncclCommAbort(NULL));
    } else {
      BAD("ncclCommDestroy", bname[b], ncclInvalidArgument, ncclCommDestroy(bad[b]));
      BAD("ncclCommFinalize", bname[b], ncclInvalidArgument, ncclCommFinalize(bad[b]));
      BAD("ncclCommAbort", bname[b], ncclInvalidArgument, ncclCommAbort(bad[b]));
    }
  }
  nt_check_allreduce(world, "calls on dead comms");
  test_pass("queries and management on NULL, destroyed and aborted comms");
}

static void test_pointers_and_ops(void) {
  const char *cls = "NULL out-pointer";
  BAD("ncclGetVersion", cls, ncclInvalidArgument, ncclGetVersion(NULL));
  BAD("ncclGetUniqueId", cls, ncclInvalidArgument, ncclGetUniqueId(NULL));
  BAD("ncclCommCount", cls, ncclInvalidArgument, ncclCommCount(world, NULL));
  BAD("ncclCommUserRank", cls, ncclInvalidArgument, ncclCommUserRank(world, NULL));
  BAD("ncclCommCuDevice", cls, ncclInvalidArgument, ncclCommCuDevice(world, NULL));
  BAD("ncclCommGetAsyncError", cls, ncclInvalidArgument, ncclCommGetAsyncError(world, NULL));
  BAD("ncclCommMemStats", cls, ncclInvalidArgument,
      ncclCommMemStats(world, ncclStatGpuMemTotal, NULL));
  BAD("ncclMemAlloc", cls, ncclInvalidArgument, ncclMemAlloc(NULL, 64));
  BAD("ncclCommSplit", cls, ncclInvalidArgument, ncclCommSplit(world, 0, 0, NULL, NULL));
  BAD("ncclCommInitAll", cls, ncclInvalidArgument, ncclCommInitAll(NULL, 1, NULL));
  int32_t sc = 2;
  ncclRedOp_t o;
  BAD("ncclRedOpCreatePreMulSum", cls, ncclInvalidArgument,
      ncclRedOpCreatePreMulSum(NULL, &sc, ncclInt32, ncclScalarHostImmediate, world));
  BAD("ncclRedOpCreatePreMulSum", "NULL scalar", ncclInvalidArgument,
      ncclRedOpCreatePreMulSum(&o, NULL, ncclInt32, ncclScalarHostImmediate, world));
  BAD("ncclRedOpCreatePreMulSum", "unknown datatype", ncclInvalidArgument,
      ncclRedOpCreatePreMulSum(&o, &sc, (ncclDataType_t)99, ncclScalarHostImmediate, world));
  BAD("ncclRedOpDestroy", "built-in op", ncclInvalidArgument, ncclRedOpDestroy(ncclSum, world));
  BAD("ncclRedOpDestroy", "built-in op", ncclInvalidArgument, ncclRedOpDestroy(ncclAvg, world));
  BAD("ncclRedOpDestroy", "unknown op", ncclInvalidArgument,
      ncclRedOpDestroy((ncclRedOp_t)99, world));
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&o, &sc, ncclInt32, ncclScalarHostImmediate, world));
  CHECK_NCCL(ncclRedOpDestroy(o, world));
  BAD("ncclRedOpDestroy", "destroyed op", ncclInvalidArgument, ncclRedOpDestroy(o, world));
  BAD("ncclRedOpCreatePreMulSum", "unknown scalar residence", ncclInvalidArgument,
      ncclRedOpCreatePreMulSum(&o, &sc, ncclInt32, (ncclScalarResidence_t)7, world));

  /* Registration handles. */
  void *h = NULL, *h2 = NULL;
  BAD("ncclCommRegister", cls, ncclInvalidArgument,
      ncclCommRegister(world, bufA, sizeof(int32_t) * C, NULL));
  BAD("ncclCommRegister", "NULL buffer, size > 0", ncclInvalidArgument,
      ncclCommRegister(world, NULL, sizeof(int32_t) * C, &h));
  BAD("ncclCommDeregister", "NULL handle", ncclInvalidArgument, ncclCommDeregister(world, NULL));
  BAD("ncclCommDeregister", "unknown handle", ncclInvalidArgument,
      ncclCommDeregister(world, (void *)bufA));
  CHECK_NCCL(ncclCommRegister(world, bufA, sizeof(int32_t) * C, &h2));
  CHECK_NCCL(ncclCommDeregister(world, h2));
  BAD("ncclCommDeregister", "handle deregistered twice", ncclInvalidArgument,
      ncclCommDeregister(world, h2));
  uint64_t v = 0;
  BAD("ncclCommMemStats", "unknown statistic", ncclInvalidArgument,
      ncclCommMemStats(world, (ncclCommMemStat_t)99, &v));

  /* ncclMemFree: NULL is a no-op (NVIDIA's calls cudaFree(NULL)); anything
   * not from ncclMemAlloc, or freed already, is refused. */
  int32_t on_stack[4];
  void *p = NULL;
  BAD("ncclMemFree", "NULL pointer (no-op in NCCL)", ncclSuccess, ncclMemFree(NULL));
  BAD("ncclMemFree", "pointer not from ncclMemAlloc", ncclInvalidArgument,
      ncclMemFree(on_stack));
  BAD("ncclMemFree", "pointer not from ncclMemAlloc", ncclInvalidArgument,
      ncclMemFree((void *)(bufA + 1)));
  CHECK_NCCL(ncclMemAlloc(&p, 256));
  BAD("ncclMemFree", "pointer inside an allocation", ncclInvalidArgument,
      ncclMemFree((char *)p + 8));
  CHECK_NCCL(ncclMemFree(p));
  BAD("ncclMemFree", "freed twice", ncclInvalidArgument, ncclMemFree(p));

  /* Any code has a string, even one past the last. */
  const char *es = ncclGetErrorString((ncclResult_t)ncclNumResults);
  CHECK(es != NULL && es[0] != '\0', "ncclGetErrorString(ncclNumResults) is empty");
  tried("ncclGetErrorString", "unknown result code");
  nt_check_allreduce(world, "NULL pointers and bad ops");
  test_pass("NULL out-pointers; PreMulSum, registration and ncclMemFree errors");
}

static void test_init_classes(void) {
  ncclUniqueId id, zero, junk;
  ncclComm_t c = NULL;
  memset(&zero, 0, sizeof zero);
  for (size_t i = 0; i < sizeof junk; i++) junk.internal[i] = (char)(i * 37 + 11);
  CHECK_NCCL(ncclGetUniqueId(&id)); /* this process's own: nobody else uses it */
  const char *fn = "ncclCommInitRank";
  BAD(fn, "rank >= nranks", ncclInvalidArgument, ncclCommInitRank(&c, 2, id, 2));
  BAD(fn, "rank >= nranks", ncclInvalidArgument, ncclCommInitRank(&c, 1, id, 5));
  BAD(fn, "rank < 0", ncclInvalidArgument, ncclCommInitRank(&c, 2, id, -1));
  BAD(fn, "nranks < 1", ncclInvalidArgument, ncclCommInitRank(&c, 0, id, 0));
  BAD(fn, "nranks < 1", ncclInvalidArgument, ncclCommInitRank(&c, -3, id, 0));
  BAD(fn, "NULL out-pointer", ncclInvalidArgument, ncclCommInitRank(NULL, 1, id, 0));
  double t0 = nt_now();
  BAD(fn, "garbage unique id", ncclInvalidArgument, ncclCommInitRank(&c, 1, junk, 0));
  BAD(fn, "garbage unique id", ncclInvalidArgument, ncclCommInitRank(&c, 2, junk, 1));
  BAD(fn, "all-zero unique id", ncclInvalidArgument, ncclCommInitRank(&c, 2, zero, 1));
  CHECK(nt_now() - t0 < 5.0, "rejecting bad unique ids took %.1f s", nt_now() - t0);

  fn = "ncclCommInitRankConfig";
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  BAD(fn, "rank >= nranks", ncclInvalidArgument, ncclCommInitRankConfig(&c, 2, id, 3, &cfg));
  BAD(fn, "nranks < 1", ncclInvalidArgument, ncclCommInitRankConfig(&c, 0, id, 0, &cfg));
  BAD(fn, "garbage unique id", ncclInvalidArgument, ncclCommInitRankConfig(&c, 1, junk, 0, &cfg));
  ncclConfig_t badmagic = NCCL_CONFIG_INITIALIZER;
  badmagic.magic = 0x12345678u;
  BAD(fn, "config with a bad magic", ncclInvalidArgument,
      ncclCommInitRankConfig(&c, 1, id, 0, &badmagic));
  ncclConfig_t badfield = NCCL_CONFIG_INITIALIZER;
  badfield.blocking = 5;
  BAD(fn, "config with a bad field", ncclInvalidArgument,
      ncclCommInitRankConfig(&c, 1, id, 0, &badfield));
  BAD(fn, "rank < 0", ncclInvalidArgument, ncclCommInitRankConfig(&c, 2, id, -1, &cfg));
  BAD(fn, "NULL out-pointer", ncclInvalidArgument, ncclCommInitRankConfig(NULL, 1, id, 0, &cfg));

  fn = "ncclCommInitRankScalable";
  ncclUniqueId ids[2] = {id, id};
  BAD(fn, "rank >= nranks", ncclInvalidArgument,
      ncclCommInitRankScalable(&c, 2, 2, 1, ids, NULL));
  BAD(fn, "rank < 0", ncclInvalidArgument, ncclCommInitRankScalable(&c, 2, -1, 1, ids, NULL));
  BAD(fn, "nranks < 1", ncclInvalidArgument, ncclCommInitRankScalable(&c, 0, 0, 1, ids, NULL));
  BAD(fn, "nId < 1", ncclInvalidArgument, ncclCommInitRankScalable(&c, 1, 0, 0, ids, NULL));
  BAD(fn, "NULL ids", ncclInvalidArgument, ncclCommInitRankScalable(&c, 1, 0, 1, NULL, NULL));
  BAD(fn, "garbage unique id", ncclInvalidArgument,
      ncclCommInitRankScalable(&c, 1, 0, 1, &junk, NULL));
  BAD(fn, "NULL out-pointer", ncclInvalidArgument,
      ncclCommInitRankScalable(NULL, 1, 0, 1, ids, NULL));
  BAD(fn, "config with a bad magic", ncclInvalidArgument,
      ncclCommInitRankScalable(&c, 1, 0, 1, ids, &badmagic));

  fn = "ncclCommInitAll";
  ncclComm_t cs[2];
  BAD(fn, "ndev < 1", ncclInvalidArgument, ncclCommInitAll(cs, 0, NULL));
  BAD(fn, "ndev < 1", ncclInvalidArgument, ncclCommInitAll(cs, -2, NULL));
  /* NVIDIA's: a device outside 0..count-1 is ncclInvalidArgument. */
  const int negdev[1] = {-5};
  BAD(fn, "negative device in devlist", ncclInvalidArgument,
      ncclCommInitAll(cs, 1, negdev));

  /* ncclCommSplit: every rank passes the same bad argument, so each fails
   * before any exchange. */
  fn = "ncclCommSplit";
  BAD(fn, "colour below NCCL_SPLIT_NOCOLOR", ncclInvalidArgument,
      ncclCommSplit(world, -5, rank, &c, NULL));
  BAD(fn, "config with a bad magic", ncclInvalidArgument,
      ncclCommSplit(world, 0, rank, &c, &badmagic));
  BAD(fn, "config with a bad field", ncclInvalidArgument,
      ncclCommSplit(world, 0, rank, &c, &badfield));

  /* The id was never used by a good call: it still works (one rank). */
  CHECK_NCCL(ncclCommInitRank(&c, 1, id, 0));
  nt_check_allreduce(c, "rejected set-ups with its id");
  CHECK_NCCL(ncclCommDestroy(c));
  BAD("ncclCommDestroy", "destroyed twice", ncclInvalidArgument, ncclCommDestroy(c));
  nt_check_allreduce(world, "bad set-ups");
  test_pass("set-up: ranks, sizes, ids, configs; finalize/destroy twice");
}

static void test_group_usage(void) {
  BAD("ncclGroupEnd", "without ncclGroupStart", ncclInvalidUsage, ncclGroupEnd());
  BAD("ncclGroupEnd", "without ncclGroupStart", ncclInvalidUsage, ncclGroupEnd());
  nt_check_allreduce(world, "ncclGroupEnd without a start");

  /* Receive counts that differ from the matching send: pairs (2k, 2k+1),
   * or a rank with itself. The receiver must get ncclInvalidUsage; the
   * sender's call may succeed or fail the same way. */
  int partner = (rank ^ 1) < nranks ? (rank ^ 1) : rank;
  int sender = partner == rank || rank < partner;
  const size_t more[2] = {C + 2, C - 3};
  for (int k = 0; k < 2; k++) {
    ncclResult_t rs = ncclSuccess, rr = ncclSuccess;
    CHECK_NCCL(ncclGroupStart());
    if (sender) CHECK_NCCL(ncclSend(bufA, C, ncclInt32, partner, world, NULL));
    if (!sender || partner == rank)
      CHECK_NCCL(ncclRecv(bufB, more[k], ncclInt32, partner, world, NULL));
    ncclResult_t re = ncclGroupEnd();
    if (!sender || partner == rank) rr = re;
    else rs = re;
    if (!sender || partner == rank) {
      CHECK(rr == ncclInvalidUsage, "ncclRecv of %zu from a send of %d (in a group): "
            "ncclGroupEnd returned %d (%s), want ncclInvalidUsage; last error: \"%s\"",
            more[k], C, (int)rr, ncclGetErrorString(rr), ncclGetLastError(NULL));
      tried("ncclRecv", "count differs from the send");
      nbad++;
    } else {
      CHECK(rs == ncclSuccess || rs == ncclInvalidUsage,
            "ncclSend matched by a receive of another count: %d (%s)", (int)rs,
            ncclGetErrorString(rs));
      tried("ncclRecv", "count differs from the send"); /* the pair's other half */
    }
    nt_check_allreduce(world, "a send/recv count mismatch");
  }
  if (partner != rank) { /* outside groups: the blocking receive itself fails */
    if (sender) {
      ncclResult_t rs = ncclSend(bufA, C, ncclInt32, partner, world, NULL);
      CHECK(rs == ncclSuccess || rs == ncclInvalidUsage,
            "ncclSend matched by a receive of another count: %d (%s)", (int)rs,
            ncclGetErrorString(rs));
    } else {
      BAD("ncclRecv", "count differs from the send", ncclInvalidUsage,
          ncclRecv(bufB, C + 1, ncclInt32, partner, world, NULL));
    }
  }
  nt_check_allreduce(world, "an ungrouped send/recv count mismatch");
  test_pass("group usage: unbalanced end, send/recv count mismatch");
}

static void test_unsupported(void) {
  ncclComm_t nc = NULL;
  ncclUniqueId uid;
  ncclWindow_t win = NULL;
  void *p = NULL;
  int excl[1] = {0};
  ncclParamHandle_t ph = NULL;
  int8_t i8; int16_t i16; int32_t i32; int64_t i64;
  uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64;
  const char *str = NULL;
  const char **keys = NULL;
  char raw[16];
  int len = 0;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ncclEncryptionConfig_t enc = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
  ncclWaitSignalDesc_t desc;
  memset(&uid, 0, sizeof uid);
  memset(&desc, 0, sizeof desc);
#define UNSUP(name, call)                                                      \
  do {                                                                         \
    BAD(#name, "unsupported", ncclInvalidUsage, call);                         \
    const char *m_ = ncclGetLastError(NULL);                                   \
    CHECK(strstr(m_, #name) != NULL, "%s: last error \"%s\" does not name it", \
          #name, m_);                                                          \
  } while (0)
  UNSUP(ncclCommRevoke, ncclCommRevoke(world, NCCL_REVOKE_DEFAULT));
  UNSUP(ncclCommShrink, ncclCommShrink(world, excl, 1, &nc, NULL, NCCL_SHRINK_DEFAULT));
  UNSUP(ncclCommGetUniqueId, ncclCommGetUniqueId(world, &uid));
  UNSUP(ncclCommGrow, ncclCommGrow(world, nranks + 1, &uid, nranks, &nc, NULL));
  UNSUP(ncclCommSuspend, ncclCommSuspend(world, NCCL_SUSPEND_MEM));
  UNSUP(ncclCommResume, ncclCommResume(world));
  UNSUP(ncclCommWindowRegister,
        ncclCommWindowRegister(world, bufA, sizeof(int32_t) * C, &win, NCCL_WIN_DEFAULT));
  UNSUP(ncclCommWindowDeregister, ncclCommWindowDeregister(world, win));
  UNSUP(ncclWinGetUserPtr, ncclWinGetUserPtr(world, win, &p));
  UNSUP(ncclPutSignal, ncclPutSignal(bufA, C, ncclInt32, 0, win, 0, 0, 0, 0, world, NULL));
  UNSUP(ncclSignal, ncclSignal(0, 0, 0, 0, world, NULL));
  UNSUP(ncclWaitSignal, ncclWaitSignal(1, &desc, world, NULL));
  UNSUP(ncclGroupSimulateEnd, ncclGroupSimulateEnd(&sim));
  UNSUP(ncclSetEncryption, ncclSetEncryption(&enc));
  UNSUP(ncclParamBind, ncclParamBind(&ph, "NCCL_DEBUG"));
  UNSUP(ncclParamGetI8, ncclParamGetI8(ph, &i8));
  UNSUP(ncclParamGetI16, ncclParamGetI16(ph, &i16));
  UNSUP(ncclParamGetI32, ncclParamGetI32(ph, &i32));
  UNSUP(ncclParamGetI64, ncclParamGetI64(ph, &i64));
  UNSUP(ncclParamGetU8, ncclParamGetU8(ph, &u8));
  UNSUP(ncclParamGetU16, ncclParamGetU16(ph, &u16));
  UNSUP(ncclParamGetU32, ncclParamGetU32(ph, &u32));
  UNSUP(ncclParamGetU64, ncclParamGetU64(ph, &u64));
  UNSUP(ncclParamGetStr, ncclParamGetStr(ph, &str));
  UNSUP(ncclParamGet, ncclParamGet(ph, raw, (int)sizeof raw, &len));
  UNSUP(ncclParamGetParameter, ncclParamGetParameter("NCCL_DEBUG", &str, &len));
  UNSUP(ncclParamGetAllParameterKeys, ncclParamGetAllParameterKeys(&keys, &len));
#undef UNSUP
  ncclParamDumpAll();   /* void: must simply return */
  ncclResetDebugInit(); /* void: must simply return */
  nt_check_allreduce(world, "unsupported calls");
  test_pass("unsupported names: ncclInvalidUsage, naming themselves");
}

static void test_error_strings(void) {
  const char *seen[ncclNumResults];
  for (int c = 0; c < (int)ncclNumResults; c++) {
    const char *s = ncclGetErrorString((ncclResult_t)c);
    CHECK(s != NULL && s[0] != '\0', "ncclGetErrorString(%d) is empty", c);
    for (int k = 0; k < c; k++)
      CHECK(strcmp(seen[k], s) != 0, "ncclGetErrorString(%d) == (%d): \"%s\"", c, k, s);
    seen[c] = s;
  }
  const char *u = ncclGetErrorString((ncclResult_t)ncclNumResults);
  CHECK(u != NULL, "ncclGetErrorString(ncclNumResults) is NULL");
  test_pass("ncclGetErrorString");
}

/* Where NVIDIA's NCCL 2.32.3 answers differently from a blanket "NULL or
 * finished comm: ncclInvalidArgument" (checked against the real library for
 * Finalize(NULL), and NCCL's init.cc for a second Finalize). Run last, so
 * that every other check has run when one of these fails. */
static void test_as_nvidia_nccl(void) {
  BAD("ncclCommFinalize", "NULL comm (no-op in NCCL)", ncclSuccess, ncclCommFinalize(NULL));
  ncclComm_t c = NULL;
  CHECK_NCCL(ncclCommSplit(world, 0, rank, &c, NULL));
  CHECK_NCCL(ncclCommFinalize(c));
  BAD("ncclCommFinalize", "finalized twice", ncclInvalidArgument, ncclCommFinalize(c));
  CHECK_NCCL(ncclCommDestroy(c));
  nt_check_allreduce(world, "ncclCommFinalize(NULL) and a second ncclCommFinalize");
  test_pass("ncclCommFinalize(NULL) is a no-op; a second ncclCommFinalize fails");
}

/* NCCL has no alignment rule: buffers at odd addresses must work. */
static void test_misaligned(void) {
  static unsigned char raw[4 * 64 + 8], rraw[4 * 64 + 8];
  void *in = raw + 1, *out = rraw + 3;
  int32_t v[4], got[4];
  for (int i = 0; i < 4; i++) v[i] = rank + i;
  memcpy(in, v, sizeof v);
  CHECK_NCCL(ncclAllReduce(in, out, 4, ncclInt32, ncclSum, world, NULL));
  memcpy(got, out, sizeof got);
  for (int i = 0; i < 4; i++)
    CHECK(got[i] == nranks * (nranks - 1) / 2 + nranks * i, "misaligned allreduce: [%d] = %d",
          i, (int)got[i]);
  CHECK_NCCL(ncclAllGather(in, out, 1, ncclInt32, world, NULL));
  for (int p = 0; p < nranks; p++) {
    int32_t x;
    memcpy(&x, (unsigned char *)out + 4 * p, sizeof x);
    CHECK(x == p, "misaligned allgather: [%d] = %d", p, (int)x);
  }
  nt_check_allreduce(world, "misaligned buffers");
  test_pass("misaligned buffers work");
}

static void on_alarm(int sig) {
  (void)sig;
  static const char m[] = "FAIL t_nccl_errors: still running after 60 s (a bad call hung)\n";
  if (write(2, m, sizeof m - 1) < 0) _exit(3);
  _exit(3);
}

int main(int argc, char **argv) {
  signal(SIGALRM, on_alarm);
  alarm(60);
  world = nt_init(&argc, &argv, &rank, &nranks);
  bufA = (int32_t *)calloc((size_t)(nranks + 2) * C, sizeof(int32_t));
  bufB = (int32_t *)calloc((size_t)(nranks + 2) * C, sizeof(int32_t));
  CHECK(bufA && bufB, "calloc");
  test_error_strings();
  test_coll_classes();
  test_pointers_and_ops();
  test_init_classes();
  test_group_usage();
  test_unsupported();
  test_misaligned();
  /* The count, printed before the last two pairs are tried (they are
   * counted), so that it shows even when one of them fails. */
  tried("ncclCommFinalize", "NULL comm (no-op in NCCL)");
  tried("ncclCommFinalize", "finalized twice");
  if (rank == 0) {
    int nfns = 0;
    for (int i = 0; i < npairs; i++) {
      size_t len = strcspn(pairs[i], " ");
      int seen = 0;
      for (int j = 0; j < i && !seen; j++)
        seen = strncmp(pairs[j], pairs[i], len) == 0 && pairs[j][len] == ' ';
      nfns += !seen;
    }
    printf("t_nccl_errors: NCCL: %d functions, %d (function x bad-input class) pairs tried, "
           "%d ranks\n", nfns, npairs, nranks);
    if (getenv("NCCL_ERRORS_LIST_PAIRS"))
      for (int i = 0; i < npairs; i++) printf("  %s\n", pairs[i]);
    fflush(stdout);
  }
  test_as_nvidia_nccl();
  nt_check_allreduce(world, "every bad call");
  CHECK_NCCL(ncclCommDestroy(world));
  /* The world comm itself, destroyed, is dead too. */
  int x = 0;
  BAD("ncclAllReduce", "destroyed comm", ncclInvalidArgument,
      ncclAllReduce(bufA, bufB, C, ncclInt32, ncclSum, world, NULL));
  BAD("ncclCommCount", "destroyed comm", ncclInvalidArgument, ncclCommCount(world, &x));
  BAD("ncclCommDestroy", "destroyed comm", ncclInvalidArgument, ncclCommDestroy(world));
  if (rank == 0)
    printf("t_nccl_errors: %ld bad calls, every one answered as expected\n", nbad);
  free(bufA);
  free(bufB);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
