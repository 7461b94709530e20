/* Mismatch detection (FERROCOLL_CHECK=1, set here before MPI_Init): ranks
 * that call different collectives, or the same one with different counts,
 * datatypes, ops or roots, all get MPI_ERR_OTHER instead of a hang or wrong
 * data, and the communicator works afterwards. Calls that MPI allows to
 * differ (equal type signatures through different datatypes, per-rank
 * counts of the v-variants, MPI_BYTE against a typed buffer) still run.
 *
 * Mode "fatal": rank 0 calls MPI_Allreduce while the others call MPI_Bcast
 * under MPI_ERRORS_ARE_FATAL; the job must abort with a message naming both
 * calls (checked by run_expect_fail.sh).
 *
 * Detection is ferrocoll's own: on another MPI the test only says SKIP. */
#include "testutil.h"

#include <stdlib.h>

static int rank, size, mismatches;

/* Every rank got MPI_ERR_OTHER from the same mismatched call, and an
 * allreduce on the same communicator gives the right sum afterwards. */
static void expect_mismatch(int rc, MPI_Comm comm, const char *what) {
  int cls = -1;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_OTHER,
        "%s: got code %d class %d, want MPI_ERR_OTHER", what, rc, cls);
  int one = 1, sum = 0, n = 0;
  CHECK_MPI(MPI_Comm_size(comm, &n));
  CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm));
  CHECK(sum == n, "%s: allreduce afterwards gave %d, want %d", what, sum, n);
  mismatches++;
}

static void different_collectives(void) {
  int v = rank, out = -1;
  int rc = rank == 0 ? MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD)
                     : MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
  expect_mismatch(rc, MPI_COMM_WORLD, "allreduce against bcast");
  rc = rank == size - 1 ? MPI_Barrier(MPI_COMM_WORLD)
                        : MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  expect_mismatch(rc, MPI_COMM_WORLD, "barrier against allreduce");
  test_pass("mismatch.different_collectives");
}

static void different_arguments(void) {
  int in[8] = {0}, out[8] = {0};
  int last = rank == size - 1;
  /* count */
  expect_mismatch(MPI_Allreduce(in, out, last ? 5 : 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
                  MPI_COMM_WORLD, "allreduce count");
  /* datatype (same size: without the check this would silently mix them) */
  expect_mismatch(MPI_Allreduce(in, out, 4, last ? MPI_FLOAT : MPI_INT, MPI_SUM,
                                MPI_COMM_WORLD),
                  MPI_COMM_WORLD, "allreduce datatype");
  /* op */
  expect_mismatch(MPI_Allreduce(in, out, 4, MPI_INT, last ? MPI_MAX : MPI_SUM,
                                MPI_COMM_WORLD),
                  MPI_COMM_WORLD, "allreduce op");
  /* root */
  expect_mismatch(MPI_Bcast(in, 4, MPI_INT, last ? 1 : 0, MPI_COMM_WORLD),
                  MPI_COMM_WORLD, "bcast root");
  expect_mismatch(MPI_Reduce(in, out, 4, MPI_INT, MPI_SUM, last ? 1 : 0, MPI_COMM_WORLD),
                  MPI_COMM_WORLD, "reduce root");
  /* a gather whose parts differ in size from what the root expects */
  int *all = (int *)calloc((size_t)size * 8, sizeof(int));
  CHECK(all != NULL, "calloc");
  expect_mismatch(MPI_Gather(in, last ? 3 : 2, MPI_INT, all, 2, MPI_INT, 0, MPI_COMM_WORLD),
                  MPI_COMM_WORLD, "gather count");
  expect_mismatch(MPI_Allgather(in, 2, last ? MPI_FLOAT : MPI_INT, all, 2,
                                last ? MPI_FLOAT : MPI_INT, MPI_COMM_WORLD),
                  MPI_COMM_WORLD, "allgather datatype");
  expect_mismatch(MPI_Scatter(all, 2, MPI_INT, out, 2, MPI_INT, last ? 1 : 0, MPI_COMM_WORLD),
                  MPI_COMM_WORLD, "scatter root");
  free(all);
  test_pass("mismatch.different_arguments");
}

/* A split communicator: the mismatch there leaves the world untouched. */
static void on_a_split_communicator(void) {
  MPI_Comm half;
  CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
  MPI_Comm_set_errhandler(half, MPI_ERRORS_RETURN);
  int hr = 0, hn = 0;
  CHECK_MPI(MPI_Comm_rank(half, &hr));
  CHECK_MPI(MPI_Comm_size(half, &hn));
  if (hn > 1) {
    int v = 0;
    expect_mismatch(MPI_Bcast(&v, hr == 0 ? 1 : 2, MPI_INT, 0, half), half,
                    "bcast count on a split communicator");
  }
  int one = 1, sum = 0;
  CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(sum == size, "world allreduce after the split's mismatch: %d", sum);
  CHECK_MPI(MPI_Comm_free(&half));
  test_pass("mismatch.split_communicator");
}

/* What MPI allows to differ must still run, with the right data. */
static void allowed_differences(void) {
  /* The same type signature through different datatypes. */
  MPI_Datatype pair;
  CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &pair));
  CHECK_MPI(MPI_Type_commit(&pair));
  int b[4] = {0, 0, 0, 0};
  if (rank == 0) b[0] = 11, b[1] = 12, b[2] = 13, b[3] = 14;
  if (rank % 2)
    CHECK_MPI(MPI_Bcast(b, 2, pair, 0, MPI_COMM_WORLD));
  else
    CHECK_MPI(MPI_Bcast(b, 4, MPI_INT, 0, MPI_COMM_WORLD));
  CHECK(b[0] == 11 && b[3] == 14, "bcast through a pair type: %d %d", b[0], b[3]);
  CHECK_MPI(MPI_Type_free(&pair));

  /* MPI_BYTE against a typed buffer of as many bytes. */
  double d = rank == 0 ? 2.5 : 0.0;
  if (rank == 0)
    CHECK_MPI(MPI_Bcast(&d, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  else
    CHECK_MPI(MPI_Bcast(&d, (int)sizeof d, MPI_BYTE, 0, MPI_COMM_WORLD));
  CHECK(d == 2.5, "bcast double against bytes: %g", d);

  /* Per-rank counts in a v-variant. */
  int mine[8], *got = (int *)calloc((size_t)size * 8, sizeof(int));
  int *counts = (int *)calloc((size_t)size, sizeof(int));
  int *displs = (int *)calloc((size_t)size, sizeof(int));
  CHECK(got && counts && displs, "calloc");
  for (int r = 0; r < size; r++) counts[r] = r % 3 + 1, displs[r] = r * 8;
  for (int i = 0; i < 8; i++) mine[i] = rank * 100 + i;
  CHECK_MPI(MPI_Gatherv(mine, counts[rank], MPI_INT, got, counts, displs, MPI_INT,
                        size - 1, MPI_COMM_WORLD));
  if (rank == size - 1)
    for (int r = 0; r < size; r++)
      for (int i = 0; i < counts[r]; i++)
        CHECK(got[r * 8 + i] == r * 100 + i, "gatherv block %d item %d: %d", r, i,
              got[r * 8 + i]);
  CHECK_MPI(MPI_Allgatherv(mine, counts[rank], MPI_INT, got, counts, displs, MPI_INT,
                           MPI_COMM_WORLD));
  for (int r = 0; r < size; r++)
    CHECK(got[r * 8] == r * 100, "allgatherv block %d: %d", r, got[r * 8]);
  free(got);
  free(counts);
  free(displs);

  /* In place at the root, a plain buffer elsewhere. */
  int s = rank + 1, total = rank == 0 ? 1 : 0;
  if (rank == 0)
    CHECK_MPI(MPI_Reduce(MPI_IN_PLACE, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
  else
    CHECK_MPI(MPI_Reduce(&s, NULL, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
  if (rank == 0)
    CHECK(total == size * (size + 1) / 2, "reduce in place: %d", total);
  test_pass("mismatch.allowed_differences");
}

int main(int argc, char **argv) {
  int fatal = argc > 1 && strcmp(argv[1], "fatal") == 0;
  setenv("FERROCOLL_CHECK", "1", 1);
  CHECK_MPI(MPI_Init(&argc, &argv));
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  if (!test_is_ferrocoll()) {
    if (rank == 0) printf("SKIP: mismatch detection (FERROCOLL_CHECK) is ferrocoll's own\n");
    MPI_Finalize();
    return 0;
  }
  if (fatal) {
    /* Under the default MPI_ERRORS_ARE_FATAL: the job must end here. */
    int v = rank, out = 0;
    if (rank == 0)
      MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    else
      MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (size > 1) printf("UNEXPECTED-RETURN from a mismatched collective\n");
    MPI_Finalize();
    return size > 1 ? 1 : 2; /* one rank cannot mismatch: still a failure */
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (size > 1) {
    different_collectives();
    different_arguments();
    on_a_split_communicator();
  } else if (rank == 0) {
    printf("SKIP mismatches: one rank cannot disagree with itself\n");
  }
  allowed_differences();
  if (rank == 0) printf("mismatches detected: %d\n", mismatches);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
