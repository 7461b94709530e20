/* A program as an NCCL user builds it: NVIDIA's nccl.h, linked to NVIDIA's
 * libnccl.so.2 only (no MPI). run_abi.sh runs it with ferrocoll's drop-in
 * substituted (LD_LIBRARY_PATH, or LD_PRELOAD over the real library's
 * directory), two ranks started by ferrorun: rank and size come from
 * FERROCOLL_RANK/FERROCOLL_SIZE, and the unique id travels through a file
 * (rank 0 writes it whole with a rename; the others poll for it).
 *
 * Usage: abi_dropin which                 print the file ncclAllReduce is in
 *        abi_dropin probe                 print the answers to calls that need
 *          no GPU (bad arguments, error strings), to compare NVIDIA's library
 *          with ours
 *        abi_dropin run ID_FILE WANT AVOID  collectives in host mode; fails
 *          unless ncclAllReduce comes from a file whose path contains WANT
 *          and no mapped file's path starts with AVOID (the real library) */
#define _GNU_SOURCE
#include <nccl.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank = -1, nranks = 0;

#define FAILF(...)                                                             \
  do {                                                                         \
    fprintf(stderr, "FAIL abi_dropin rank %d line %d: ", rank, __LINE__);     \
    fprintf(stderr, __VA_ARGS__);                                              \
    fprintf(stderr, "\n");                                                     \
    exit(1);                                                                   \
  } while (0)
#define NCHECK(call)                                                           \
  do {                                                                         \
    ncclResult_t r_ = (call);                                                  \
    if (r_ != ncclSuccess)                                                     \
      FAILF("%s returned %d (%s): %s", #call, (int)r_, ncclGetErrorString(r_), \
            ncclGetLastError(NULL));                                           \
  } while (0)

static const char *home_of(void *sym) {
  Dl_info info;
  if (!dladdr(sym, &info) || !info.dli_fname) return "(unknown)";
  return info.dli_fname;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static ncclUniqueId share_id(const char *path) {
  ncclUniqueId id;
  if (rank == 0) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    NCHECK(ncclGetUniqueId(&id));
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0) FAILF("writing %s", tmp);
    if (rename(tmp, path) != 0) FAILF("renaming %s", tmp);
    return id;
  }
  double t0 = now();
  for (;;) {
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t got = fread(&id, sizeof id, 1, f);
      fclose(f);
      if (got == 1) return id;
    }
    if (now() - t0 > 30) FAILF("no unique id in %s after 30 s", path);
    usleep(10 * 1000);
  }
}

/* Calls NVIDIA's library answers without touching CUDA (checked on a
 * machine without a GPU): argument checks before any device work, groups,
 * error strings. */
static int probe(void) {
#define P(call) printf("%s -> %d\n", #call, (int)(call))
  int v = 0, x = 0;
  float sc = 1.0f;
  ncclRedOp_t op;
  P(ncclGetVersion(&v));
  printf("version %d\n", v);
  P(ncclGetVersion(NULL));
  P(ncclGetUniqueId(NULL));
  P(ncclCommDestroy(NULL));
  P(ncclCommAbort(NULL));
  P(ncclCommFinalize(NULL));
  P(ncclCommCount(NULL, &x));
  P(ncclCommUserRank(NULL, &x));
  P(ncclCommCuDevice(NULL, &x));
  P(ncclCommGetAsyncError(NULL, NULL));
  P(ncclGroupEnd());
  P(ncclGroupStart());
  P(ncclGroupStart());
  P(ncclGroupEnd());
  P(ncclGroupEnd());
  P(ncclGroupEnd());
  P(ncclRedOpDestroy(ncclSum, NULL));
  P(ncclRedOpCreatePreMulSum(&op, &sc, ncclFloat, ncclScalarHostImmediate, NULL));
  P(ncclAllReduce(&sc, &sc, 1, ncclFloat, ncclSum, NULL, NULL));
  P(ncclBroadcast(&sc, &sc, 1, ncclFloat, 0, NULL, NULL));
  P(ncclSend(&sc, 1, ncclFloat, 0, NULL, NULL));
  P(ncclRecv(&sc, 1, ncclFloat, 0, NULL, NULL));
  for (int c = 0; c <= (int)ncclNumResults + 1; c++)
    printf("ncclGetErrorString(%d) = \"%s\"\n", c, ncclGetErrorString((ncclResult_t)c));
#undef P
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "which") == 0) {
    printf("ncclAllReduce is in %s\n", home_of((void *)ncclAllReduce));
    return 0;
  }
  if (argc >= 2 && strcmp(argv[1], "probe") == 0) return probe();
  if (argc != 5 || strcmp(argv[1], "run") != 0) {
    fprintf(stderr, "usage: abi_dropin which | run ID_FILE WANT AVOID\n");
    return 2;
  }
  const char *er = getenv("FERROCOLL_RANK"), *es = getenv("FERROCOLL_SIZE");
  if (!er || !es) FAILF("FERROCOLL_RANK/FERROCOLL_SIZE not set: start me with ferrorun");
  rank = atoi(er);
  nranks = atoi(es);

  /* Which library answers. */
  const char *home = home_of((void *)ncclAllReduce);
  if (!strstr(home, argv[3])) FAILF("ncclAllReduce is in %s, not in a *%s*", home, argv[3]);
  FILE *maps = fopen("/proc/self/maps", "r");
  char line[8192];
  size_t avoid_len = strlen(argv[4]);
  while (maps && fgets(line, sizeof line, maps)) {
    char *p = strchr(line, '/');
    if (p && strncmp(p, argv[4], avoid_len) == 0) FAILF("mapped from the real library: %s", p);
  }
  if (maps) fclose(maps);
  int version = 0;
  NCHECK(ncclGetVersion(&version));
  if (version != NCCL_VERSION_CODE)
    FAILF("ncclGetVersion %d, NVIDIA's header %d", version, (int)NCCL_VERSION_CODE);

  ncclUniqueId id = share_id(argv[2]);
  ncclComm_t comm = NULL;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.commName = "abi_dropin";
  NCHECK(ncclCommInitRankConfig(&comm, nranks, id, rank, &cfg));
  int n = 0, r = -1;
  NCHECK(ncclCommCount(comm, &n));
  NCHECK(ncclCommUserRank(comm, &r));
  if (n != nranks || r != rank) FAILF("comm says rank %d of %d", r, n);

  enum { N = 100003 };
  float *f = (float *)malloc(sizeof(float) * N * (size_t)nranks);
  int64_t *g = (int64_t *)malloc(sizeof(int64_t) * N * (size_t)nranks);
  int32_t *s = (int32_t *)malloc(sizeof(int32_t) * N), *q = (int32_t *)malloc(sizeof(int32_t) * N);
  if (!f || !g || !s || !q) FAILF("malloc");
  for (int i = 0; i < N; i++) f[i] = (float)(rank + 1) * (float)(i % 64);
  NCHECK(ncclAllReduce(f, f, N, ncclFloat, ncclSum, comm, NULL));
  for (int i = 0; i < N; i++)
    if (f[i] != (float)(nranks * (nranks + 1) / 2) * (float)(i % 64))
      FAILF("allreduce: %d is %g", i, (double)f[i]);
  for (int i = 0; i < N; i++) g[(size_t)rank * N + i] = (int64_t)rank << 40 | i;
  NCHECK(ncclAllGather(g + (size_t)rank * N, g, N, ncclInt64, comm, NULL));
  for (int k = 0; k < nranks; k++)
    for (int i = 0; i < N; i++)
      if (g[(size_t)k * N + i] != ((int64_t)k << 40 | i)) FAILF("allgather: block %d, %d", k, i);
  /* A ring of send/recv in a group, and a broadcast from the last rank. */
  for (int i = 0; i < N; i++) s[i] = rank * 7 + i;
  NCHECK(ncclGroupStart());
  NCHECK(ncclSend(s, N, ncclInt32, (rank + 1) % nranks, comm, NULL));
  NCHECK(ncclRecv(q, N, ncclInt32, (rank + nranks - 1) % nranks, comm, NULL));
  NCHECK(ncclGroupEnd());
  int prev = (rank + nranks - 1) % nranks;
  for (int i = 0; i < N; i++)
    if (q[i] != prev * 7 + i) FAILF("ring: %d is %d", i, (int)q[i]);
  NCHECK(ncclBroadcast(s, s, N, ncclInt32, nranks - 1, comm, NULL));
  for (int i = 0; i < N; i++)
    if (s[i] != (nranks - 1) * 7 + i) FAILF("broadcast: %d is %d", i, (int)s[i]);
  NCHECK(ncclCommFinalize(comm));
  NCHECK(ncclCommDestroy(comm));
  free(f);
  free(g);
  free(s);
  free(q);
  if (rank == 0)
    printf("abi_dropin: %d ranks, NCCL %d, ncclAllReduce from %s: allreduce, allgather, "
           "send/recv ring, broadcast correct\n", nranks, version, home);
  return 0;
}
