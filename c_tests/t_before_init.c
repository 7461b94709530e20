/* Calls outside the MPI_Init..MPI_Finalize window must fail loudly: no
 * communicator exists yet (or any more), so the error is always fatal. Not
 * a normal test: run through run_expect_fail.sh. Modes (argv[1]):
 *   send-before-init (default)  MPI_Send before MPI_Init
 *   double-init                 MPI_Init twice
 *   send-after-finalize         MPI_Send after MPI_Finalize
 * If the bad call returns, "UNEXPECTED-RETURN" is printed and the exit is 0. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "send-before-init";
  int v = 1, rc;
  if (strcmp(mode, "send-before-init") == 0) {
    rc = MPI_Send(&v, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
  } else if (strcmp(mode, "double-init") == 0) {
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
      fprintf(stderr, "t_before_init: first MPI_Init failed\n");
      return 3;
    }
    rc = MPI_Init(&argc, &argv);
  } else if (strcmp(mode, "send-after-finalize") == 0) {
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS || MPI_Finalize() != MPI_SUCCESS) {
      fprintf(stderr, "t_before_init: MPI_Init/MPI_Finalize failed\n");
      return 3;
    }
    rc = MPI_Send(&v, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
  } else {
    fprintf(stderr, "t_before_init: unknown mode '%s'\n", mode);
    return 2;
  }
  printf("UNEXPECTED-RETURN: %s returned %d\n", mode, rc);
  return 0;
}
