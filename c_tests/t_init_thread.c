/* MPI_Init_thread: even ranks ask for MULTIPLE, odd ranks for SERIALIZED (a
 * process may ask for its own level). Both must get at least SERIALIZED, and
 * then a second thread may make MPI calls as long as calls are serialized. */
#include "testutil.h"

#include <pthread.h>

/* The rank before MPI_Init, from the launcher's environment (ferrorun, hydra,
 * Open MPI), or -1 when run as a singleton. */
static int launcher_rank(void) {
  static const char *vars[] = {"FERROCOLL_RANK", "PMI_RANK",
                               "OMPI_COMM_WORLD_RANK"};
  for (unsigned i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return atoi(v);
  }
  return -1;
}

struct thread_arg {
  MPI_Comm comm;
  int is_main;
  int sum;
  int rc;
};

/* Runs on a second thread while the main thread waits in pthread_join, so
 * the calls are serialized. */
static void *worker(void *p) {
  struct thread_arg *a = (struct thread_arg *)p;
  int rank = -1, size = 0;
  a->rc = MPI_Is_thread_main(&a->is_main);
  if (a->rc == MPI_SUCCESS) a->rc = MPI_Comm_rank(a->comm, &rank);
  if (a->rc == MPI_SUCCESS) a->rc = MPI_Comm_size(a->comm, &size);
  if (a->rc == MPI_SUCCESS)
    a->rc = MPI_Allreduce(&rank, &a->sum, 1, MPI_INT, MPI_SUM, a->comm);
  return NULL;
}

int main(int argc, char **argv) {
  const int pre_rank = launcher_rank();
  const int required =
      (pre_rank >= 0 && pre_rank % 2 == 1) ? MPI_THREAD_SERIALIZED
                                            : MPI_THREAD_MULTIPLE;
  int provided = -1;
  CHECK_MPI(MPI_Init_thread(&argc, &argv, required, &provided));
  int rank, size;
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  if (pre_rank >= 0)
    CHECK(pre_rank == rank, "launcher said rank %d, MPI says %d", pre_rank,
          rank);

  CHECK(provided >= MPI_THREAD_SERIALIZED && provided <= MPI_THREAD_MULTIPLE,
        "required %d, provided %d", required, provided);
  int queried = -1, is_main = -1;
  CHECK_MPI(MPI_Query_thread(&queried));
  CHECK(queried == provided, "Query_thread %d, provided %d", queried, provided);
  CHECK_MPI(MPI_Is_thread_main(&is_main));
  CHECK(is_main == 1, "Is_thread_main on main thread: %d", is_main);
  test_pass("init_thread_levels");

  /* Every process saw the same kind of answer: report the levels seen. */
  int min_p = 0, max_p = 0;
  CHECK_MPI(MPI_Allreduce(&provided, &min_p, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  CHECK_MPI(MPI_Allreduce(&provided, &max_p, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  CHECK(min_p >= MPI_THREAD_SERIALIZED, "some rank got level %d", min_p);

  /* Serialized use from a non-main thread, on WORLD and on a duplicate. */
  MPI_Comm dup;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  MPI_Comm comms[2] = {MPI_COMM_WORLD, dup};
  for (int round = 0; round < 4; round++) {
    struct thread_arg a;
    a.comm = comms[round % 2];
    a.is_main = -1;
    a.sum = -1;
    a.rc = -1;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, worker, &a) == 0, "pthread_create");
    CHECK(pthread_join(th, NULL) == 0, "pthread_join");
    CHECK(a.rc == MPI_SUCCESS, "MPI call on second thread returned %d", a.rc);
    CHECK(a.is_main == 0, "Is_thread_main on second thread: %d", a.is_main);
    CHECK(a.sum == size * (size - 1) / 2, "sum %d", a.sum);
    /* The main thread keeps working between the worker's turns. */
    int one = 1, total = 0;
    CHECK_MPI(MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, comms[(round + 1) % 2]));
    CHECK(total == size, "total %d", total);
  }
  CHECK_MPI(MPI_Comm_free(&dup));
  test_pass("serialized_second_thread");
  if (rank == 0)
    printf("thread levels provided: min %d max %d\n", min_p, max_p);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
