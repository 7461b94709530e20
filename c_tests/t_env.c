/* Environment functions: init state, version strings, timers, error strings and
 * classes, error handlers. Runs at any number of ranks. */
#include "testutil.h"

#include <time.h>

struct err_class {
  int cls;
  const char *name;
};

#define EC(x) {x, #x}
/* Every error class MPICH 4.0's mpi.h defines (54 is unused there). */
static const struct err_class classes[] = {
    EC(MPI_SUCCESS), EC(MPI_ERR_BUFFER), EC(MPI_ERR_COUNT), EC(MPI_ERR_TYPE),
    EC(MPI_ERR_TAG), EC(MPI_ERR_COMM), EC(MPI_ERR_RANK), EC(MPI_ERR_ROOT),
    EC(MPI_ERR_GROUP), EC(MPI_ERR_OP), EC(MPI_ERR_TOPOLOGY), EC(MPI_ERR_DIMS),
    EC(MPI_ERR_ARG), EC(MPI_ERR_UNKNOWN), EC(MPI_ERR_TRUNCATE),
    EC(MPI_ERR_OTHER), EC(MPI_ERR_INTERN), EC(MPI_ERR_IN_STATUS),
    EC(MPI_ERR_PENDING), EC(MPI_ERR_REQUEST), EC(MPI_ERR_ACCESS),
    EC(MPI_ERR_AMODE), EC(MPI_ERR_BAD_FILE), EC(MPI_ERR_CONVERSION),
    EC(MPI_ERR_DUP_DATAREP), EC(MPI_ERR_FILE_EXISTS), EC(MPI_ERR_FILE_IN_USE),
    EC(MPI_ERR_FILE), EC(MPI_ERR_INFO), EC(MPI_ERR_INFO_KEY),
    EC(MPI_ERR_INFO_VALUE), EC(MPI_ERR_INFO_NOKEY), EC(MPI_ERR_IO),
    EC(MPI_ERR_NAME), EC(MPI_ERR_NO_MEM), EC(MPI_ERR_NOT_SAME),
    EC(MPI_ERR_NO_SPACE), EC(MPI_ERR_NO_SUCH_FILE), EC(MPI_ERR_PORT),
    EC(MPI_ERR_QUOTA), EC(MPI_ERR_READ_ONLY), EC(MPI_ERR_SERVICE),
    EC(MPI_ERR_SPAWN), EC(MPI_ERR_UNSUPPORTED_DATAREP),
    EC(MPI_ERR_UNSUPPORTED_OPERATION), EC(MPI_ERR_WIN), EC(MPI_ERR_BASE),
    EC(MPI_ERR_LOCKTYPE), EC(MPI_ERR_KEYVAL), EC(MPI_ERR_RMA_CONFLICT),
    EC(MPI_ERR_RMA_SYNC), EC(MPI_ERR_SIZE), EC(MPI_ERR_DISP),
    EC(MPI_ERR_ASSERT), EC(MPI_ERR_RMA_RANGE), EC(MPI_ERR_RMA_ATTACH),
    EC(MPI_ERR_RMA_SHARED), EC(MPI_ERR_RMA_FLAVOR), EC(MPI_T_ERR_MEMORY),
    EC(MPI_T_ERR_NOT_INITIALIZED), EC(MPI_T_ERR_CANNOT_INIT),
    EC(MPI_T_ERR_INVALID_INDEX), EC(MPI_T_ERR_INVALID_ITEM),
    EC(MPI_T_ERR_INVALID_HANDLE), EC(MPI_T_ERR_OUT_OF_HANDLES),
    EC(MPI_T_ERR_OUT_OF_SESSIONS), EC(MPI_T_ERR_INVALID_SESSION),
    EC(MPI_T_ERR_CVAR_SET_NOT_NOW), EC(MPI_T_ERR_CVAR_SET_NEVER),
    EC(MPI_T_ERR_PVAR_NO_STARTSTOP), EC(MPI_T_ERR_PVAR_NO_WRITE),
    EC(MPI_T_ERR_PVAR_NO_ATOMIC), EC(MPI_T_ERR_INVALID_NAME),
    EC(MPI_T_ERR_INVALID), EC(MPI_ERR_SESSION), EC(MPI_ERR_PROC_ABORTED),
    EC(MPI_ERR_VALUE_TOO_LARGE),
};
#define NCLASSES ((int)(sizeof classes / sizeof classes[0]))

/* Error_string must give a non-empty, NUL-terminated string whose length is
 * reported correctly. */
static void check_error_string(int code, const char *what) {
  char s[MPI_MAX_ERROR_STRING];
  int len = -1;
  memset(s, 'x', sizeof s);
  CHECK_MPI(MPI_Error_string(code, s, &len));
  CHECK(len > 0 && len < MPI_MAX_ERROR_STRING, "%s: length %d", what, len);
  CHECK(s[len] == '\0' && (int)strlen(s) == len, "%s: len %d strlen %d", what,
        len, (int)strnlen(s, sizeof s));
}

static void case_before_init(void) {
  int flag = -1, v = -1, sv = -1, len = -1, cls = -1;
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  CHECK_MPI(MPI_Initialized(&flag));
  CHECK(flag == 0, "Initialized before init: %d", flag);
  CHECK_MPI(MPI_Finalized(&flag));
  CHECK(flag == 0, "Finalized before init: %d", flag);
  CHECK_MPI(MPI_Get_version(&v, &sv));
  CHECK(v == 4 && sv == 0, "version %d.%d", v, sv);
  CHECK_MPI(MPI_Get_library_version(lib, &len));
  CHECK(len > 0 && (int)strlen(lib) == len, "library version len %d", len);
  /* Both are allowed before init (MPI-4.0 and MPICH agree). */
  check_error_string(MPI_ERR_TYPE, "Error_string before init");
  CHECK_MPI(MPI_Error_class(MPI_ERR_TYPE, &cls));
  CHECK(cls == MPI_ERR_TYPE, "Error_class before init: %d", cls);
}

static void case_init_state(void) {
  int flag = -1, level = -1, main_thread = -1;
  CHECK_MPI(MPI_Initialized(&flag));
  CHECK(flag == 1, "Initialized after init: %d", flag);
  CHECK_MPI(MPI_Finalized(&flag));
  CHECK(flag == 0, "Finalized after init: %d", flag);
  CHECK_MPI(MPI_Query_thread(&level));
  CHECK(level >= MPI_THREAD_SINGLE && level <= MPI_THREAD_MULTIPLE,
        "Query_thread gave %d", level);
  CHECK_MPI(MPI_Is_thread_main(&main_thread));
  CHECK(main_thread == 1, "Is_thread_main gave %d", main_thread);
  test_pass("init_state");
}

static void case_names_and_versions(void) {
  char name[MPI_MAX_PROCESSOR_NAME];
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = -1, v = -1, sv = -1;
  memset(name, 'x', sizeof name);
  CHECK_MPI(MPI_Get_processor_name(name, &len));
  CHECK(len > 0 && len < MPI_MAX_PROCESSOR_NAME, "processor name len %d", len);
  CHECK(name[len] == '\0' && (int)strlen(name) == len, "name not terminated");
  CHECK_MPI(MPI_Get_version(&v, &sv));
  CHECK(v == MPI_VERSION && sv == MPI_SUBVERSION && v == 4 && sv == 0,
        "Get_version %d.%d, header %d.%d", v, sv, MPI_VERSION, MPI_SUBVERSION);
  memset(lib, 'x', sizeof lib);
  CHECK_MPI(MPI_Get_library_version(lib, &len));
  CHECK(len > 0 && len < MPI_MAX_LIBRARY_VERSION_STRING, "lib len %d", len);
  CHECK(lib[len] == '\0' && (int)strlen(lib) == len, "lib version unterminated");
  test_pass("names_and_versions");
}

static void case_wtime(void) {
  double tick = MPI_Wtick();
  CHECK(tick > 0.0 && tick <= 1.0, "Wtick %g", tick);
  double prev = MPI_Wtime();
  for (int i = 0; i < 100000; i++) {
    double t = MPI_Wtime();
    CHECK(t >= prev, "Wtime went backwards: %.9f < %.9f at %d", t, prev, i);
    prev = t;
  }
  /* A 20 ms sleep must be visible, and not wildly overstated. */
  double t0 = MPI_Wtime();
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
  double dt = MPI_Wtime() - t0;
  CHECK(dt >= 0.019 && dt < 5.0, "20 ms sleep measured as %.6f s", dt);
  test_pass("wtime_wtick");
}

static void case_error_classes(void) {
  for (int i = 0; i < NCLASSES; i++) {
    int cls = -1;
    check_error_string(classes[i].cls, classes[i].name);
    CHECK_MPI(MPI_Error_class(classes[i].cls, &cls));
    CHECK(cls == classes[i].cls, "Error_class(%s=%d) = %d", classes[i].name,
          classes[i].cls, cls);
  }
  /* The classes a user meets most must be told apart by their strings. */
  static const int common[] = {MPI_SUCCESS, MPI_ERR_BUFFER, MPI_ERR_COUNT,
                               MPI_ERR_TYPE, MPI_ERR_TAG, MPI_ERR_COMM,
                               MPI_ERR_RANK, MPI_ERR_ROOT, MPI_ERR_OP,
                               MPI_ERR_ARG, MPI_ERR_TRUNCATE, MPI_ERR_OTHER,
                               MPI_ERR_REQUEST, MPI_ERR_IN_STATUS};
  const int nc = (int)(sizeof common / sizeof common[0]);
  static char strs[sizeof common / sizeof common[0]][MPI_MAX_ERROR_STRING];
  for (int i = 0; i < nc; i++) {
    int len;
    CHECK_MPI(MPI_Error_string(common[i], strs[i], &len));
    for (int j = 0; j < i; j++)
      CHECK(strcmp(strs[i], strs[j]) != 0, "classes %d and %d share \"%s\"",
            common[i], common[j], strs[i]);
  }
  test_pass("error_classes");
}

static void case_errhandlers(void) {
  MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
  CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
  CHECK(eh == MPI_ERRORS_ARE_FATAL, "default WORLD handler %#x", (unsigned)eh);
  CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_SELF, &eh));
  CHECK(eh == MPI_ERRORS_ARE_FATAL, "default SELF handler %#x", (unsigned)eh);

  /* MPICH 4.0.x asserts (comm_set_errhandler.c:53) when MPI_ERRORS_ABORT is
   * set on a communicator; later MPICH fixed it. */
  const int abort_ok = !test_is_mpich40_reference();
  static const MPI_Errhandler hs[] = {MPI_ERRORS_RETURN, MPI_ERRORS_ABORT,
                                      MPI_ERRORS_ARE_FATAL, MPI_ERRORS_RETURN};
  for (unsigned i = 0; i < sizeof hs / sizeof hs[0]; i++) {
    if (hs[i] == MPI_ERRORS_ABORT && !abort_ok) continue;
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, hs[i]));
    CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == hs[i], "set %#x got %#x", (unsigned)hs[i], (unsigned)eh);
  }
  /* Handlers are per communicator: SELF is untouched. */
  CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_SELF, &eh));
  CHECK(eh == MPI_ERRORS_ARE_FATAL, "SELF handler changed to %#x", (unsigned)eh);

  /* A duplicate inherits the handler; changing it leaves the parent alone. */
  MPI_Comm dup;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  CHECK_MPI(MPI_Comm_get_errhandler(dup, &eh));
  CHECK(eh == MPI_ERRORS_RETURN, "dup inherited %#x", (unsigned)eh);
  const MPI_Errhandler other = abort_ok ? MPI_ERRORS_ABORT : MPI_ERRORS_ARE_FATAL;
  CHECK_MPI(MPI_Comm_set_errhandler(dup, other));
  CHECK_MPI(MPI_Comm_get_errhandler(dup, &eh));
  CHECK(eh == other, "dup handler %#x", (unsigned)eh);
  CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
  CHECK(eh == MPI_ERRORS_RETURN, "parent changed to %#x", (unsigned)eh);

  /* Under ERRORS_RETURN the code comes back and its class is right. */
  int one = 1;
  int rc = MPI_Send(&one, 1, MPI_INT, 0, -5, MPI_COMM_WORLD), cls = -1;
  CHECK(rc != MPI_SUCCESS, "bad tag accepted");
  CHECK_MPI(MPI_Error_class(rc, &cls));
  CHECK(cls == MPI_ERR_TAG, "class %d", cls);
  check_error_string(rc, "returned error code");

  CHECK_MPI(MPI_Comm_free(&dup));
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  if (!abort_ok) {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    if (r == 0) printf("SKIP errhandlers_abort: MPICH 4.0 asserts on MPI_ERRORS_ABORT\n");
  }
  test_pass("errhandlers");
}

int main(int argc, char **argv) {
  case_before_init();
  CHECK_MPI(MPI_Init(&argc, &argv));
  test_pass("before_init");
  case_init_state();
  case_names_and_versions();
  case_wtime();
  case_error_classes();
  case_errhandlers();
  int rank = 0;
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Finalize());
  /* CHECK would call MPI_Comm_rank, which is erroneous after Finalize. */
  int fin = -1, init = -1;
  int rc1 = MPI_Finalized(&fin), rc2 = MPI_Initialized(&init);
  if (rc1 != MPI_SUCCESS || rc2 != MPI_SUCCESS || fin != 1 || init != 1) {
    fprintf(stderr, "FAIL rank %d: after Finalize: Finalized rc %d flag %d, "
            "Initialized rc %d flag %d\n", rank, rc1, fin, rc2, init);
    return 1;
  }
  if (rank == 0) printf("PASS after_finalize\n");
  return 0;
}
