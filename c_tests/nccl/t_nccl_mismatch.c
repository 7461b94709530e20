/* Mismatch detection on the NCCL face (FERROCOLL_CHECK=1, set here before
 * MPI_Init): ranks calling different collectives, or the same one with
 * different counts, types, ops or roots (NCCL's most reported user error,
 * which hangs or corrupts data in NVIDIA's NCCL), all get ncclInvalidUsage
 * with a last error naming both calls, alone and inside a group, and the
 * communicator works afterwards. */
#include "nccl_testutil.h"

#include <signal.h>
#include <stdint.h>
#include <unistd.h>

static int rank, nranks, detected;
static ncclComm_t comm;
static float fa[64], fb[64];

static void on_alarm(int sig) {
  (void)sig;
  fprintf(stderr, "FAIL rank %d: t_nccl_mismatch hung\n", rank);
  _exit(1);
}

/* Every rank got ncclInvalidUsage naming rank 0's call and `theirs`, and
 * the communicator still works. */
static void expect_mismatch(ncclResult_t rc, const char *theirs, const char *what) {
  const char *msg = ncclGetLastError(comm);
  CHECK(rc == ncclInvalidUsage, "%s: returned %d (%s), want ncclInvalidUsage; last error \"%s\"",
        what, (int)rc, ncclGetErrorString(rc), msg);
  CHECK(strstr(msg, "collective mismatch") && strstr(msg, "rank 0 called") &&
            strstr(msg, theirs),
        "%s: last error \"%s\" does not name rank 0's call and %s", what, msg, theirs);
  nt_check_allreduce(comm, what);
  detected++;
}

static void mismatches(void) {
  int last = rank == nranks - 1;
  ncclResult_t rc;
  /* Different collectives. */
  rc = last ? ncclBroadcast(fa, fa, 4, ncclFloat32, 0, comm, NULL)
            : ncclAllReduce(fa, fb, 4, ncclFloat32, ncclSum, comm, NULL);
  expect_mismatch(rc, "called ncclBroadcast(count 4, ncclFloat32, root 0)",
                  "allreduce against broadcast");
  /* Count, type, op. */
  rc = ncclAllReduce(fa, fb, last ? 5 : 4, ncclFloat32, ncclSum, comm, NULL);
  expect_mismatch(rc, "ncclAllReduce(count 5, ncclFloat32, ncclSum)", "count");
  rc = ncclAllReduce(fa, fb, 4, last ? ncclInt32 : ncclFloat32, ncclSum, comm, NULL);
  expect_mismatch(rc, "ncclAllReduce(count 4, ncclInt32, ncclSum)", "datatype");
  rc = ncclAllReduce(fa, fb, 4, ncclFloat32, last ? ncclMax : ncclSum, comm, NULL);
  expect_mismatch(rc, "ncclAllReduce(count 4, ncclFloat32, ncclMax)", "op");
  /* Root. */
  rc = ncclReduce(fa, fb, 4, ncclFloat32, ncclSum, last ? 1 : 0, comm, NULL);
  expect_mismatch(rc, "ncclReduce(count 4, ncclFloat32, ncclSum, root 1)", "root");
  /* Nothing to send on one rank: NCCL would skip the call there and hang
   * the others. */
  rc = ncclAllGather(fa, fb, last ? 0 : 2, ncclFloat32, comm, NULL);
  expect_mismatch(rc, "ncclAllGather(count 0, ncclFloat32)", "count 0");
  /* Inside a group: the error comes from ncclGroupEnd. */
  CHECK_NCCL(ncclGroupStart());
  rc = ncclAllReduce(fa, fb, 4, ncclFloat32, ncclSum, comm, NULL);
  CHECK(rc == ncclSuccess, "queued allreduce: %d", (int)rc);
  rc = ncclAllReduce(fa, fb, last ? 3 : 4, ncclFloat32, ncclSum, comm, NULL);
  CHECK(rc == ncclSuccess, "queued allreduce: %d", (int)rc);
  rc = ncclGroupEnd();
  expect_mismatch(rc, "ncclAllReduce(count 3, ncclFloat32, ncclSum)", "group");
}

/* What may differ still runs: the scalars of PreMulSum ops. */
static void allowed(void) {
  float scalar = (float)(rank + 1);
  ncclRedOp_t op;
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
  for (int i = 0; i < 4; i++) fa[i] = 1.0f;
  CHECK_NCCL(ncclAllReduce(fa, fb, 4, ncclFloat32, op, comm, NULL));
  float want = (float)nranks * (float)(nranks + 1) / 2.0f;
  CHECK(fb[0] == want && fb[3] == want, "premulsum: %g, want %g", (double)fb[0], (double)want);
  CHECK_NCCL(ncclRedOpDestroy(op, comm));
}

int main(int argc, char **argv) {
  signal(SIGALRM, on_alarm);
  alarm(60);
  setenv("FERROCOLL_CHECK", "1", 1);
  comm = nt_init(&argc, &argv, &rank, &nranks);
  if (nranks > 1)
    mismatches();
  else if (rank == 0)
    printf("SKIP mismatches: one rank cannot disagree with itself\n");
  allowed();
  nt_check_allreduce(comm, "the end");
  if (rank == 0) printf("t_nccl_mismatch: %d mismatches detected, %d ranks\n", detected, nranks);
  CHECK_NCCL(ncclCommDestroy(comm));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
