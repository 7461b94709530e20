/* allreduce_demo: each rank contributes a vector; MPI_Allreduce sums it for a few
 * message sizes. Every rank checks every element; rank 0 prints one line per size
 * with the average time and the bus bandwidth (nccl-tests' formula for allreduce:
 * bytes * 2 * (n - 1) / n / time). Exit status 1 if any element is wrong. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* Rank r contributes r + (i % 7) at index i; integers this small are exact in double. */
static double contribution(int rank, long i) { return (double)rank + (double)(i % 7); }

int main(int argc, char **argv) {
  static const long counts[] = {1, 1000, 65536, 1 << 20};
  const int ncounts = (int)(sizeof(counts) / sizeof(counts[0]));
  int rank, size, c, iter, wrong_total = 0;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) printf("allreduce_demo: %d ranks, MPI_SUM of doubles\n", size);

  for (c = 0; c < ncounts; c++) {
    const long n = counts[c];
    const int iters = n >= (1 << 20) ? 10 : 50;
    double *send = (double *)malloc(sizeof(double) * (size_t)n);
    double *recv = (double *)malloc(sizeof(double) * (size_t)n);
    double t0, elapsed, max_elapsed, bytes, busbw;
    long i, wrong = 0;
    if (send == NULL || recv == NULL) {
      fprintf(stderr, "allreduce_demo: out of memory\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (i = 0; i < n; i++) send[i] = contribution(rank, i);

    /* Warm-up call, which is also the one whose result is checked. */
    MPI_Allreduce(send, recv, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (i = 0; i < n; i++) {
      const double expect = (double)size * (double)(size - 1) / 2.0 + (double)size * (double)(i % 7);
      if (recv[i] != expect) {
        if (wrong < 3)
          fprintf(stderr, "rank %d: count %ld index %ld: got %g, expected %g\n", rank, n, i,
                  recv[i], expect);
        wrong++;
      }
    }

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (iter = 0; iter < iters; iter++)
      MPI_Allreduce(send, recv, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    elapsed = (MPI_Wtime() - t0) / iters;
    /* The slowest rank defines the collective's time. */
    MPI_Reduce(&elapsed, &max_elapsed, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
      bytes = (double)n * sizeof(double);
      busbw = size > 1 ? bytes * 2.0 * (size - 1) / size / max_elapsed / 1e9 : 0.0;
      printf("  count %8ld (%9.0f bytes): %s, %10.2f us avg over %d, busbw %7.3f GB/s\n", n, bytes,
             wrong ? "WRONG" : "correct", max_elapsed * 1e6, iters, busbw);
    }
    if (wrong) wrong_total = 1;
    free(send);
    free(recv);
  }
  if (rank == 0) printf("allreduce_demo: %s\n", wrong_total ? "FAILED" : "all results correct");
  MPI_Finalize();
  return wrong_total;
}
