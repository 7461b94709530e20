/* Errors under the fatal handlers must end the whole job loudly. Not a
 * normal test: run through run_expect_fail.sh, which wants a non-zero exit
 * and the library's message on stderr. Modes (argv[1]):
 *   allreduce-type (default)  rank 0 passes an invalid datatype handle to
 *                             MPI_Allreduce under MPI_ERRORS_ARE_FATAL while
 *                             the others wait in MPI_Barrier
 *   last-rank                 the last rank sends with a negative tag
 *   abort-handler             rank 0 errs on a communicator whose handler is
 *                             MPI_ERRORS_ABORT
 *   kill-last                 under MPI_ERRORS_RETURN the last rank kills
 *                             itself (SIGKILL) between allreduces; the others
 *                             print the error they get ("DETECTED: ...") and
 *                             exit 3 (run by run_peer_death.sh)
 * If the call returns, "UNEXPECTED-RETURN" is printed and the exit is 0. */
#include "testutil.h"
#include <signal.h>
#include <unistd.h>

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "allreduce-type";
  CHECK_MPI(MPI_Init(&argc, &argv));
  int rank, size, rc = MPI_SUCCESS, in = 1, out = 0;
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  /* Everyone is past init before anyone errs, so the job is fully up. */
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  int culprit = 0;
  if (strcmp(mode, "kill-last") == 0) {
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    for (int i = 0; i < 100000; i++) {
      if (rank == size - 1 && i == 50) raise(SIGKILL);
      rc = MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        printf("DETECTED: rank %d: %s\n", rank, msg);
        fflush(stdout);
        _exit(3);
      }
    }
    printf("UNEXPECTED-RETURN: rank %d finished every allreduce\n", rank);
    return 0;
  }
  if (strcmp(mode, "allreduce-type") == 0) {
    if (rank == 0)
      rc = MPI_Allreduce(&in, &out, 1, (MPI_Datatype)0x1234, MPI_SUM,
                         MPI_COMM_WORLD);
  } else if (strcmp(mode, "last-rank") == 0) {
    culprit = size - 1;
    if (rank == culprit) rc = MPI_Send(&in, 1, MPI_INT, 0, -7, MPI_COMM_WORLD);
  } else if (strcmp(mode, "abort-handler") == 0) {
    MPI_Comm c;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    CHECK_MPI(MPI_Comm_set_errhandler(c, MPI_ERRORS_ABORT));
    if (rank == 0) rc = MPI_Send(&in, 1, MPI_INT, 0, -7, c);
  } else {
    fprintf(stderr, "t_fatal: unknown mode '%s'\n", mode);
    return 2;
  }
  if (rank == culprit) {
    /* Only reached if the handler returned. */
    printf("UNEXPECTED-RETURN: %s returned %d instead of aborting\n", mode, rc);
    fflush(stdout);
    MPI_Finalize();
    return 0;
  }
  /* Bystanders wait here until the launcher takes the job down. */
  MPI_Barrier(MPI_COMM_WORLD);
  printf("UNEXPECTED-RETURN: rank %d left the barrier\n", rank);
  MPI_Finalize();
  return 0;
}
