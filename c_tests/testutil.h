/* Shared helpers for ferrocoll's C tests: checks that name the rank and line,
 * and a PASS line per test case printed by rank 0. Compiles as C and C++. */
#ifndef FERROCOLL_TESTUTIL_H
#define FERROCOLL_TESTUTIL_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fails the whole job, naming the rank, file and line. */
#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      int r_ = -1, init_ = 0;                                                  \
      MPI_Initialized(&init_);                                                 \
      if (init_) MPI_Comm_rank(MPI_COMM_WORLD, &r_);                           \
      fprintf(stderr, "FAIL rank %d %s:%d: %s: ", r_, __FILE__, __LINE__,     \
              #cond);                                                          \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      fflush(stderr);                                                          \
      if (init_) MPI_Abort(MPI_COMM_WORLD, 1);                                 \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

/* Checks that an MPI call returned MPI_SUCCESS. */
#define CHECK_MPI(call)                                                        \
  do {                                                                         \
    int rc_ = (call);                                                          \
    CHECK(rc_ == MPI_SUCCESS, "%s returned %d", #call, rc_);                   \
  } while (0)

/* Checks that an MPI call failed with the given error class. */
#define CHECK_ERR(call, cls)                                                   \
  do {                                                                         \
    int rc_ = (call), c_ = -1;                                                 \
    if (rc_ != MPI_SUCCESS) MPI_Error_class(rc_, &c_);                         \
    CHECK(rc_ != MPI_SUCCESS && c_ == (cls), "%s: got code %d class %d, "      \
          "want class %d (%s)", #call, rc_, c_, (int)(cls), #cls);             \
  } while (0)

/* Rank 0 prints one PASS line for a finished test case. */
static inline void test_pass(const char *name) {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  if (r == 0) {
    printf("PASS %s\n", name);
    fflush(stdout);
  }
}

#endif

/* Helpers added for the non-collective tests (t_env, t_p2p, t_errors): the
 * suite is also run against a reference MPI, whose known deviations from
 * the standard must not be mistaken for ours. */

/* The library's version string, read once (MPI_Get_library_version is
 * allowed before MPI_Init). */
static inline const char *test_library_version(void) {
  static char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  if (!lib[0]) {
    int len = 0;
    MPI_Get_library_version(lib, &len);
  }
  return lib;
}

/* Nonzero when the test runs on ferrocoll (or FERROCOLL_TEST_STRICT=1 is
 * set): then our documented behaviour is required exactly. */
static inline int test_is_ferrocoll(void) {
  const char *e = getenv("FERROCOLL_TEST_STRICT");
  if (e && strcmp(e, "1") == 0) return 1;
  return strstr(test_library_version(), "ferrocoll") != NULL;
}

/* Nonzero when the test runs on MPICH 4.0.x as a reference, which has bugs
 * that later MPICH fixed (each use names the bug). */
static inline int test_is_mpich40_reference(void) {
  return !test_is_ferrocoll() &&
         strstr(test_library_version(), "MPICH Version:\t4.0.") != NULL;
}
