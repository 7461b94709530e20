/* Long waits are never silent (FERROCOLL_STALL_WARN, set here to 0.2 s
 * before MPI_Init): a rank that waits in a collective or a receive for a
 * rank that comes late says so on stderr, naming the call and the ranks it
 * waits for, and again each time the wait has doubled; the call then
 * completes as usual. Each waiting rank catches its own stderr in a file
 * around the wait and checks the lines (on ferrocoll only: another MPI
 * prints nothing).
 *
 * Mode "timeout" (FERROCOLL_TIMEOUT=0.5, set here): rank 1 waits for a
 * message that rank 0 never sends; under MPI_ERRORS_ARE_FATAL the job must
 * end with an error naming the call and rank 0 (run_expect_fail.sh). */
#include "testutil.h"

#include <fcntl.h>
#include <unistd.h>

/* How long the late rank keeps the others waiting, in microseconds: the
 * waiters must start waiting 0.4 s before it comes, even on a busy host. */
#define LATE_US 1500000

static int rank, size, ferro;
static int saved_fd = -1;
static char path[64];

/* Sends this rank's stderr to a file of its own until `release_stderr`. */
static void catch_stderr(void) {
  fflush(stderr);
  snprintf(path, sizeof path, "/tmp/t_stall.%d.XXXXXX", (int)getpid());
  int fd = mkstemp(path);
  CHECK(fd >= 0, "mkstemp %s failed", path);
  saved_fd = dup(2);
  CHECK(saved_fd >= 0 && dup2(fd, 2) == 2, "redirecting stderr failed");
  close(fd);
}

/* Gives stderr back and returns what was written to it meanwhile (free it). */
static char *release_stderr(void) {
  fflush(stderr);
  CHECK(dup2(saved_fd, 2) == 2, "restoring stderr failed");
  close(saved_fd);
  FILE *f = fopen(path, "r");
  CHECK(f != NULL, "reopening %s failed", path);
  char *text = (char *)calloc(1, 1 << 16);
  CHECK(text != NULL, "out of memory");
  size_t n = fread(text, 1, (1 << 16) - 1, f);
  text[n] = '\0';
  fclose(f);
  unlink(path);
  /* Shown, so a run's log keeps what the library said. */
  fputs(text, stderr);
  return text;
}

/* `text` holds "ferrocoll: rank <rank> has waited <secs> s in <op> for rank(s) <peers>". */
static void expect_note(const char *text, const char *secs, const char *op, const char *peers) {
  char want[160];
  snprintf(want, sizeof want, "ferrocoll: rank %d has waited %s s in %s for rank(s) %s", rank,
           secs, op, peers);
  CHECK(strstr(text, want) != NULL, "no line \"%s\" on stderr; it held:\n%s", want, text);
}

/* Every rank but 0 waits in a barrier while rank 0 comes late. */
static void late_barrier(void) {
  if (rank != 0) catch_stderr();
  if (rank == 0) usleep(LATE_US);
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  if (rank != 0) {
    char *text = release_stderr();
    if (ferro) {
      /* Whom it names depends on the barrier's pattern: any rank. */
      expect_note(text, "0.2", "MPI_Barrier", "");
      expect_note(text, "0.4", "MPI_Barrier", "");
    }
    free(text);
  }
  test_pass("stall.late_barrier");
}

/* The last rank waits in MPI_Recv for rank 0, which sends late; the
 * others wait for both in a barrier. */
static void late_message(void) {
  int v = -1;
  if (rank != 0) catch_stderr();
  if (rank == 0) {
    usleep(LATE_US);
    v = 42;
    CHECK_MPI(MPI_Send(&v, 1, MPI_INT, size - 1, 7, MPI_COMM_WORLD));
  } else if (rank == size - 1) {
    CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(v == 42, "received %d, want 42", v);
  }
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  if (rank != 0) {
    char *text = release_stderr();
    if (ferro && rank == size - 1) {
      expect_note(text, "0.2", "MPI_Recv", "0 and waits on");
      expect_note(text, "0.4", "MPI_Recv", "0 and waits on");
    }
    free(text);
  }
  test_pass("stall.late_message");
}

int main(int argc, char **argv) {
  int timeout = argc > 1 && strcmp(argv[1], "timeout") == 0;
  setenv("FERROCOLL_STALL_WARN", "0.2", 1);
  if (timeout) setenv("FERROCOLL_TIMEOUT", "0.5", 1);
  CHECK_MPI(MPI_Init(&argc, &argv));
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  ferro = test_is_ferrocoll();
  if (timeout) {
    /* Under the default MPI_ERRORS_ARE_FATAL: the job must end here. */
    int v = 0;
    if (rank == 1) {
      MPI_Recv(&v, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      printf("UNEXPECTED-RETURN from a receive that timed out\n");
    } else {
      sleep(10);
    }
    MPI_Finalize();
    return 2;
  }
  if (size < 2) {
    printf("SKIP: one rank never waits for another\n");
    MPI_Finalize();
    return 0;
  }
  late_barrier();
  late_message();
  CHECK_MPI(MPI_Finalize());
  return 0;
}
