/* Consumer check: an allreduce over the world. argv[1] is the expected world size. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int rank, size, i, ok = 1, all_ok = 0;
  long in[5], out[5];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1 && size != atoi(argv[1])) {
    fprintf(stderr, "rank %d: world size %d, expected %s\n", rank, size, argv[1]);
    ok = 0;
  }
  for (i = 0; i < 5; i++) in[i] = (long)(rank + 1) * (i + 1);
  MPI_Allreduce(in, out, 5, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  for (i = 0; i < 5; i++) {
    long expect = (long)size * (size + 1) / 2 * (i + 1);
    if (out[i] != expect) {
      fprintf(stderr, "rank %d: out[%d] = %ld, expected %ld\n", rank, i, out[i], expect);
      ok = 0;
    }
  }
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0) printf("consumer: allreduce on %d ranks %s\n", size, all_ok ? "ok" : "FAILED");
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
