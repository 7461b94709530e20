/* Plain MPI program: sums the ranks and checks the result. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  int rank, size, sum = -1;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("findmpi C: %d ranks, sum of ranks %d\n", size, sum);
  MPI_Finalize();
  return sum == size * (size - 1) / 2 ? 0 : 1;
}
