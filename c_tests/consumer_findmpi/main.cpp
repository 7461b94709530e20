// Plain MPI program in C++ (C API only): the maximum rank reaches every rank.
#include <mpi.h>

#include <cstdio>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, top = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&rank, &top, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) std::printf("findmpi C++: %d ranks, max rank %d\n", size, top);
  MPI_Finalize();
  return top == size - 1 ? 0 : 1;
}
