/* One rank of a fault-injection run (tests/robustness/faults.sh): calls one
 * collective over and over under MPI_ERRORS_RETURN until a call fails, then
 * prints "DETECTED <rank> <unix time> <error class>" and exits 3. The
 * library's FERROCOLL_DEBUG=warn line on stderr names the dead rank.
 *
 * Usage: storm OP BYTES DIR
 *   OP: allreduce bcast reduce allgather alltoall gather scatter
 *       reduce_scatter barrier sendrecv scan
 *   DIR: where it writes pid.<rank> and, once every rank is in the loop,
 *        ready.<rank> */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double unix_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void touch(const char *dir, const char *what, int rank, long value) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%d", dir, what, rank);
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    exit(2);
  }
  fprintf(f, "%ld\n", value);
  fclose(f);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: storm OP BYTES DIR\n");
    return 2;
  }
  const char *op = argv[1], *dir = argv[3];
  long bytes = atol(argv[2]);
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  touch(dir, "pid", rank, (long)getpid());
  int count = (int)(bytes / 4 > 0 ? bytes / 4 : 1);
  /* Every op's largest buffer: count ints per rank. */
  int *a = (int *)calloc((size_t)count * (size_t)n, sizeof(int));
  int *b = (int *)calloc((size_t)count * (size_t)n, sizeof(int));
  if (!a || !b) return 2;
  int rc = MPI_Barrier(MPI_COMM_WORLD);
  if (rc == MPI_SUCCESS) touch(dir, "ready", rank, 1);
  int right = (rank + 1) % n, left = (rank + n - 1) % n;
  for (long i = 0; rc == MPI_SUCCESS; i++) {
    if (!strcmp(op, "allreduce"))
      rc = MPI_Allreduce(a, b, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    else if (!strcmp(op, "bcast"))
      rc = MPI_Bcast(a, count, MPI_INT, (int)(i % n), MPI_COMM_WORLD);
    else if (!strcmp(op, "reduce"))
      rc = MPI_Reduce(a, b, count, MPI_INT, MPI_SUM, (int)(i % n), MPI_COMM_WORLD);
    else if (!strcmp(op, "allgather"))
      rc = MPI_Allgather(a, count, MPI_INT, b, count, MPI_INT, MPI_COMM_WORLD);
    else if (!strcmp(op, "alltoall"))
      rc = MPI_Alltoall(a, count, MPI_INT, b, count, MPI_INT, MPI_COMM_WORLD);
    else if (!strcmp(op, "gather"))
      rc = MPI_Gather(a, count, MPI_INT, b, count, MPI_INT, (int)(i % n), MPI_COMM_WORLD);
    else if (!strcmp(op, "scatter"))
      rc = MPI_Scatter(a, count, MPI_INT, b, count, MPI_INT, (int)(i % n), MPI_COMM_WORLD);
    else if (!strcmp(op, "reduce_scatter"))
      rc = MPI_Reduce_scatter_block(a, b, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    else if (!strcmp(op, "barrier"))
      rc = MPI_Barrier(MPI_COMM_WORLD);
    else if (!strcmp(op, "scan"))
      rc = MPI_Scan(a, b, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    else if (!strcmp(op, "sendrecv"))
      rc = MPI_Sendrecv(a, count, MPI_INT, right, 5, b, count, MPI_INT, left, 5,
                        MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else {
      fprintf(stderr, "storm: unknown op %s\n", op);
      return 2;
    }
  }
  int cls = -1, len = 0;
  char name[MPI_MAX_ERROR_STRING];
  MPI_Error_class(rc, &cls);
  MPI_Error_string(cls, name, &len);
  printf("DETECTED %d %.6f %d %s\n", rank, unix_now(), cls, name);
  fflush(stdout);
  _exit(3);
}
