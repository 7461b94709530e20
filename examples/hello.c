/* hello: every rank reports its rank, the job size and its host; rank 0 checks
 * that each rank 0..size-1 reported exactly once. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int rank, size, len, i, failures = 0;
  char host[MPI_MAX_PROCESSOR_NAME];
  int *ranks = NULL;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_processor_name(host, &len);
  printf("hello from rank %d of %d on %s\n", rank, size, host);
  fflush(stdout);

  if (rank == 0) {
    ranks = (int *)malloc(sizeof(int) * (size_t)size);
    if (ranks == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Gather(&rank, 1, MPI_INT, ranks, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    for (i = 0; i < size; i++) {
      if (ranks[i] != i) {
        fprintf(stderr, "hello: slot %d holds rank %d\n", i, ranks[i]);
        failures++;
      }
    }
    if (len <= 0) {
      fprintf(stderr, "hello: empty processor name\n");
      failures++;
    }
    printf("hello: %d ranks reported%s\n", size, failures ? " WRONGLY" : "");
    free(ranks);
  }
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return failures ? 1 : 0;
}
