/* ncclCommAbort with two ranks (np2), in two scenarios, with alarm() as a
 * safety net so that nothing hangs:
 *
 *  B. The peer aborts: rank 1 calls ncclAllReduce on comm B, which rank 0
 *     never joins; 300 ms later rank 0 calls ncclCommAbort(B), which must
 *     return within 1 s; rank 1's allreduce must then fail with
 *     ncclRemoteError within 2 s.
 *  A. A blocked call on another thread: rank 1 stops taking part (it sleeps,
 *     calling nothing); rank 0 starts ncclAllReduce on comm A in a second
 *     thread, and its main thread calls ncclCommAbort(A) 300 ms later. The
 *     abort must return within 1 s and the blocked allreduce must return a
 *     code other than ncclSuccess within 2 s of it.
 *
 * Neither rank calls MPI_Finalize at the end (rank 1 is still asleep when
 * rank 0 is done): each aborts what it holds and exits 0. */
#include "nccl_testutil.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

static int rank, nranks;

enum { COUNT = 1 << 20 };
static float *sbuf, *rbuf;

typedef struct {
  ncclComm_t comm;
  int done; /* set (atomically) when the call returned */
  ncclResult_t rc;
  double returned_at;
} blocked_t;

static void *run_allreduce(void *arg) {
  blocked_t *b = (blocked_t *)arg;
  b->rc = ncclAllReduce(sbuf, rbuf, COUNT, ncclFloat32, ncclSum, b->comm, NULL);
  b->returned_at = nt_now();
  __atomic_store_n(&b->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

static void on_alarm(int sig) {
  (void)sig;
  static const char m[] = "FAIL t_nccl_abort: still running after 20 s (something hung)\n";
  if (write(2, m, sizeof m - 1) < 0) _exit(3);
  _exit(3);
}

/* B: rank 0 aborts while rank 1 waits for it. */
static void scenario_peer_aborts(ncclComm_t comm) {
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) {
    usleep(300 * 1000);
    double t0 = nt_now();
    CHECK_NCCL(ncclCommAbort(comm));
    double took = nt_now() - t0;
    CHECK(took < 1.0, "B: ncclCommAbort took %.3f s while the peer waited", took);
    printf("B: rank 0's ncclCommAbort returned in %.3f s\n", took);
  } else {
    double t0 = nt_now();
    ncclResult_t rc = ncclAllReduce(sbuf, rbuf, COUNT, ncclFloat32, ncclSum, comm, NULL);
    double took = nt_now() - t0;
    const char *le = ncclGetLastError(NULL);
    printf("B: rank 1's allreduce returned %d (%s) after %.3f s: \"%s\"\n", (int)rc,
           ncclGetErrorString(rc), took, le ? le : "");
    CHECK(rc == ncclRemoteError, "B: allreduce waiting on an aborted peer returned %d (%s), "
          "want ncclRemoteError; last error \"%s\"", (int)rc, ncclGetErrorString(rc), le);
    CHECK(took < 0.3 + 2.0, "B: the allreduce took %.3f s to notice the abort", took);
    ncclResult_t st = ncclSuccess;
    CHECK_NCCL(ncclCommGetAsyncError(comm, &st));
    printf("B: rank 1's ncclCommGetAsyncError afterwards: %d (%s)\n", (int)st,
           ncclGetErrorString(st));
    CHECK_NCCL(ncclCommAbort(comm));
  }
  fflush(stdout);
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  test_pass("abort: a rank waiting on an aborted peer gets ncclRemoteError");
}

/* A: an allreduce blocked in a second thread, aborted from the main one. */
static void scenario_blocked_thread(ncclComm_t comm) {
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 1) {
    sleep(3); /* takes no part; rank 0 is done long before */
    CHECK_NCCL(ncclCommAbort(comm));
    return;
  }
  static blocked_t b;
  pthread_t th;
  b.comm = comm;
  CHECK(pthread_create(&th, NULL, run_allreduce, &b) == 0, "pthread_create");
  usleep(300 * 1000);
  CHECK(!__atomic_load_n(&b.done, __ATOMIC_ACQUIRE),
        "A: the allreduce returned %d without its peer", (int)b.rc);
  double t0 = nt_now();
  CHECK_NCCL(ncclCommAbort(comm));
  double took = nt_now() - t0;
  CHECK(took < 1.0, "A: ncclCommAbort took %.3f s", took);
  while (!__atomic_load_n(&b.done, __ATOMIC_ACQUIRE) && nt_now() - t0 < 2.0) usleep(2000);
  CHECK(__atomic_load_n(&b.done, __ATOMIC_ACQUIRE),
        "A: the blocked allreduce had not returned 2 s after ncclCommAbort");
  CHECK(pthread_join(th, NULL) == 0, "pthread_join");
  printf("A: ncclCommAbort returned in %.3f s; the blocked allreduce returned %d (%s) "
         "%.3f s after it\n", took, (int)b.rc, ncclGetErrorString(b.rc), b.returned_at - t0);
  CHECK(b.rc != ncclSuccess && b.rc != ncclInProgress,
        "A: the aborted allreduce returned %d (%s)", (int)b.rc, ncclGetErrorString(b.rc));
  CHECK_NCCL_ERR(ncclAllReduce(sbuf, rbuf, 1, ncclFloat32, ncclSum, comm, NULL),
                 ncclInvalidArgument);
  test_pass("abort: a call blocked on another thread fails promptly");
}

int main(int argc, char **argv) {
  signal(SIGALRM, on_alarm);
  alarm(20);
  ncclComm_t world = nt_init(&argc, &argv, &rank, &nranks);
  CHECK(nranks == 2, "t_nccl_abort needs exactly 2 ranks, not %d", nranks);
  sbuf = (float *)calloc(COUNT, sizeof(float));
  rbuf = (float *)calloc(COUNT, sizeof(float));
  CHECK(sbuf && rbuf, "calloc");
  ncclComm_t a = NULL, b = NULL;
  CHECK_NCCL(ncclCommSplit(world, 0, rank, &a, NULL));
  CHECK_NCCL(ncclCommSplit(world, 0, rank, &b, NULL));
  nt_check_allreduce(a, "setting up comm A");
  nt_check_allreduce(b, "setting up comm B");

  scenario_peer_aborts(b);
  nt_check_allreduce(world, "aborting comm B"); /* other comms are untouched */
  scenario_blocked_thread(a);
  /* No MPI_Finalize (rank 1 sleeps through rank 0's end): abort and go. */
  CHECK_NCCL(ncclCommAbort(world));
  if (rank == 0) printf("t_nccl_abort: done\n");
  fflush(stdout);
  fflush(stderr);
  _exit(0);
}
