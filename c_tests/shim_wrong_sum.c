/* A broken MPI_Allreduce for the benchmark's self-check (bench.mpibench.*):
 * preloaded in front of the library, it adds 1 to the first element of every
 * MPI_DOUBLE MPI_SUM result, the reduction bench/mpibench.c averages its
 * batch times with. mpibench must refuse to run on it rather than print
 * times. Every other call goes through unchanged (PMPI_Allreduce). */
#include <mpi.h>

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                  MPI_Op op, MPI_Comm comm) {
  int rc = PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  if (rc == MPI_SUCCESS && datatype == MPI_DOUBLE && op == MPI_SUM && count > 0)
    ((double *)recvbuf)[0] += 1.0;
  return rc;
}
