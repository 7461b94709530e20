/* Helpers for ferrocoll's NCCL-face C tests (host mode). Ranks are started
 * by ferrorun and meet through MPI, as nccl-tests does with MPI=1: rank 0
 * makes the ncclUniqueId and MPI_Bcast's its 128 bytes. Compiles as C and
 * C++, against our nccl.h and against NVIDIA's. */
#ifndef FERROCOLL_NCCL_TESTUTIL_H
#define FERROCOLL_NCCL_TESTUTIL_H

#include <nccl.h>

#include "testutil.h" /* CHECK, CHECK_MPI, test_pass (MPI based) */

#include <time.h>

/* Fails the job unless `call` returned ncclSuccess; names the call, the
 * code, its string and the thread's last NCCL error. */
#define CHECK_NCCL(call)                                                       \
  do {                                                                         \
    ncclResult_t rn_ = (call);                                                 \
    CHECK(rn_ == ncclSuccess, "%s returned %d (%s); last error: \"%s\"",       \
          #call, (int)rn_, ncclGetErrorString(rn_), ncclGetLastError(NULL));   \
  } while (0)

/* Fails the job unless `call` returned exactly `code`. */
#define CHECK_NCCL_ERR(call, code)                                             \
  do {                                                                         \
    ncclResult_t rn_ = (call);                                                 \
    CHECK(rn_ == (code), "%s returned %d (%s), want %d (%s); last error: "     \
          "\"%s\"", #call, (int)rn_, ncclGetErrorString(rn_), (int)(code),     \
          #code, ncclGetLastError(NULL));                                      \
  } while (0)

/* Monotonic seconds. */
static inline double nt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A unique id made by rank 0 of `mcomm` and broadcast to the others. */
static inline ncclUniqueId nt_bcast_id(MPI_Comm mcomm) {
  ncclUniqueId id;
  int r = 0;
  memset(&id, 0, sizeof id);
  CHECK_MPI(MPI_Comm_rank(mcomm, &r));
  if (r == 0) CHECK_NCCL(ncclGetUniqueId(&id));
  CHECK_MPI(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, mcomm));
  return id;
}

/* MPI_Init, then a communicator over MPI_COMM_WORLD (rank for rank). */
static inline ncclComm_t nt_init(int *argc, char ***argv, int *rank, int *size) {
  ncclComm_t comm = NULL;
  CHECK_MPI(MPI_Init(argc, argv));
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, size));
  ncclUniqueId id = nt_bcast_id(MPI_COMM_WORLD);
  CHECK_NCCL(ncclCommInitRank(&comm, *size, id, *rank));
  CHECK(comm != NULL, "ncclCommInitRank gave a NULL communicator");
  return comm;
}

/* How many nt_check_allreduce calls each communicator has had (the same
 * at every rank of it, so each call can use its own values). */
static inline int nt_seq(ncclComm_t comm) {
  static struct { ncclComm_t c; int n; } seen[256];
  static int nseen;
  for (int i = 0; i < nseen; i++)
    if (seen[i].c == comm) return ++seen[i].n;
  if (nseen < 256) {
    seen[nseen].c = comm;
    seen[nseen++].n = 1;
  }
  return 1;
}

/* An allreduce (int32 sum, 7 elements) that must succeed: shows a
 * communicator still works, e.g. after rejected calls. The values change
 * from call to call, so ranks that fell out of step are caught too. */
static inline void nt_check_allreduce(ncclComm_t comm, const char *after) {
  int n = 0, r = 0, seq = nt_seq(comm);
  int32_t in[7], out[7];
  CHECK_NCCL(ncclCommCount(comm, &n));
  CHECK_NCCL(ncclCommUserRank(comm, &r));
  for (int i = 0; i < 7; i++) {
    in[i] = (r + 1) * (i + 1) + 1000 * seq;
    out[i] = -1;
  }
  CHECK_NCCL(ncclAllReduce(in, out, 7, ncclInt32, ncclSum, comm, NULL));
  for (int i = 0; i < 7; i++) {
    int32_t want = (int32_t)((i + 1) * n * (n + 1) / 2 + 1000 * seq * n);
    CHECK(out[i] == want, "allreduce number %d after %s: element %d is %d, want %d (a "
          "rank out of step?)", seq, after, i, (int)out[i], (int)want);
  }
}

#endif
