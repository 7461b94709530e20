/* mpibench: a portable MPI collective benchmark in the style of OSU and
 * nccl-tests. One source builds against Open MPI, MPICH or ferrocoll, so the
 * three can be compared on the same machine (see compare.sh).
 *
 * For each op and size it prints: op, bytes, avg_us, algbw_GBps, busbw_GBps, ok.
 *   avg_us  median over -r timed batches of the batch average (averaged over
 *           ranks; pingpong: rank 0's round trip / 2, i.e. one-way latency;
 *           sendrecv: every rank sends to its right neighbour and receives
 *           from its left in one MPI_Sendrecv, a ring shift; halo: every rank
 *           exchanges the buffer with both ring neighbours, two MPI_Irecv,
 *           two MPI_Isend and one MPI_Waitall, as a 1-D halo exchange).
 *   bytes   total message size as nccl-tests defines it: the buffer for
 *           allreduce/bcast/reduce/pingpong/sendrecv/halo (one message), the whole array (n blocks) for
 *           allgather/reduce_scatter/alltoall/gather/scatter, 0 for barrier.
 *   busbw   algbw * factor, nccl-tests factors: allreduce 2(n-1)/n;
 *           allgather, reduce_scatter, alltoall, gather, scatter (n-1)/n;
 *           bcast, reduce, pingpong, sendrecv 1; halo 2 (two messages out).
 *   ok      the result of the last timed call and of one more call into a
 *           cleared buffer, checked on every rank against exactly known values.
 * Data are floats; reductions use MPI_SUM over small integers, so every
 * summation order gives the exact same result and the check is bit-exact. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum op_kind {
  OP_ALLREDUCE,
  OP_BCAST,
  OP_REDUCE,
  OP_ALLGATHER,
  OP_REDUCE_SCATTER,
  OP_ALLTOALL,
  OP_GATHER,
  OP_SCATTER,
  OP_BARRIER,
  OP_PINGPONG,
  OP_SENDRECV,
  OP_HALO,
  OP_COUNT
};

/* Names as nccl-tests and the peer baseline print them. reduce_scatter is
 * MPI_Reduce_scatter_block (equal blocks, the nccl ReduceScatter). */
static const char *const op_names[OP_COUNT] = {
    "allreduce", "bcast",   "reduce",  "allgather", "reduce_scatter",
    "alltoall",  "gather",  "scatter", "barrier",   "pingpong", "sendrecv",
    "halo"};

struct config {
  size_t min_bytes, max_bytes, factor;
  long iters_max;    /* -i: iterations per timed batch, upper bound */
  long warmup;       /* -w: warm-up calls, upper bound */
  int reps;          /* -r: timed batches; the median is printed */
  double budget;     /* -T: seconds per (op, size); 0 = fixed -i iterations */
  int short_runs;    /* -S: each size once, OSU's way (see measure_short) */
  int check;         /* -c */
  int ops[OP_COUNT];
  int nops;
};

static int g_rank, g_size;
static float *g_sbuf, *g_rbuf;
/* -t: before each call, store to every cache line of the send buffer (the
 * same values back), as a program that computes what it sends does: the
 * lines are then this core's alone, and a peer that reads them must fetch
 * them from it. Without -t the send buffer never changes, and a library
 * that reads it in place finds it in its own core's cache from the second
 * call on, which no program that sends new data sees. */
static int g_touch;
static int g_same_host; /* all ranks on one host: the barrier check needs it */

#define ROOT 0
#define PP_TAG 17
#define HALO_TAG 18

static void die_mpi(int rc, const char *what, int line) {
  char msg[4096]; /* larger than any implementation's MPI_MAX_ERROR_STRING */
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
    snprintf(msg, sizeof msg, "error code %d", rc);
  fprintf(stderr, "mpibench: rank %d, line %d: %s failed: %s\n", g_rank, line,
          what, msg);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 2);
  exit(2);
}

/* The default error handler aborts on failure; this also catches a library
 * that returns an error code under MPI_ERRORS_ARE_FATAL. */
#define MPI_OK(call)                                                           \
  do {                                                                         \
    int rc_ = (call);                                                          \
    if (rc_ != MPI_SUCCESS) die_mpi(rc_, #call, __LINE__);                     \
  } while (0)

static double mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- data patterns: small integers, exact in float ---------------------- */

static float red_in(int r, size_t i) {
  return (float)((r + 1) * (int)(i % 13 + 1));
}
static float red_out(int n, size_t i) {
  return (float)(n * (n + 1) / 2 * (int)(i % 13 + 1));
}
/* A value that depends on (a, b, j), so a block delivered to the wrong place
 * or shifted is noticed. Stays below 2^14. */
static float tag_val(int a, int b, size_t j) {
  return (float)(((long)a * 131 + (long)b * 17 + (long)(j % 4093)) % 16381);
}
#define SENTINEL (-1.0f) /* no pattern value is negative */

/* ---- sizes -------------------------------------------------------------- */

static int is_rooted_block_op(int op) {
  return op == OP_ALLGATHER || op == OP_REDUCE_SCATTER || op == OP_ALLTOALL ||
         op == OP_GATHER || op == OP_SCATTER;
}

/* Elements per rank (per peer for alltoall) for a nominal size; at least 1. */
static size_t count_for(int op, size_t bytes) {
  size_t c = bytes / sizeof(float);
  if (is_rooted_block_op(op)) c /= (size_t)g_size;
  return c ? c : 1;
}

/* The size that is printed, from the element count actually used. */
static size_t bytes_for(int op, size_t c) {
  if (op == OP_BARRIER) return 0;
  if (is_rooted_block_op(op)) return c * (size_t)g_size * sizeof(float);
  return c * sizeof(float);
}

static double bus_factor(int op) {
  double n = (double)g_size;
  switch (op) {
  case OP_ALLREDUCE: return 2.0 * (n - 1.0) / n;
  case OP_ALLGATHER:
  case OP_REDUCE_SCATTER:
  case OP_ALLTOALL:
  case OP_GATHER:
  case OP_SCATTER: return (n - 1.0) / n;
  case OP_HALO: return 2.0;
  default: return 1.0;
  }
}

/* ---- one call of each op ------------------------------------------------ */

static void run_once(int op, int c) {
  MPI_Comm w = MPI_COMM_WORLD;
  switch (op) {
  case OP_ALLREDUCE:
    MPI_OK(MPI_Allreduce(g_sbuf, g_rbuf, c, MPI_FLOAT, MPI_SUM, w));
    break;
  case OP_BCAST: MPI_OK(MPI_Bcast(g_sbuf, c, MPI_FLOAT, ROOT, w)); break;
  case OP_REDUCE:
    MPI_OK(MPI_Reduce(g_sbuf, g_rbuf, c, MPI_FLOAT, MPI_SUM, ROOT, w));
    break;
  case OP_ALLGATHER:
    MPI_OK(MPI_Allgather(g_sbuf, c, MPI_FLOAT, g_rbuf, c, MPI_FLOAT, w));
    break;
  case OP_REDUCE_SCATTER:
    MPI_OK(MPI_Reduce_scatter_block(g_sbuf, g_rbuf, c, MPI_FLOAT, MPI_SUM, w));
    break;
  case OP_ALLTOALL:
    MPI_OK(MPI_Alltoall(g_sbuf, c, MPI_FLOAT, g_rbuf, c, MPI_FLOAT, w));
    break;
  case OP_GATHER:
    MPI_OK(MPI_Gather(g_sbuf, c, MPI_FLOAT, g_rbuf, c, MPI_FLOAT, ROOT, w));
    break;
  case OP_SCATTER:
    MPI_OK(MPI_Scatter(g_sbuf, c, MPI_FLOAT, g_rbuf, c, MPI_FLOAT, ROOT, w));
    break;
  case OP_BARRIER: MPI_OK(MPI_Barrier(w)); break;
  case OP_PINGPONG:
    if (g_rank == 0) {
      MPI_OK(MPI_Send(g_sbuf, c, MPI_FLOAT, 1, PP_TAG, w));
      MPI_OK(MPI_Recv(g_rbuf, c, MPI_FLOAT, 1, PP_TAG, w, MPI_STATUS_IGNORE));
    } else if (g_rank == 1) {
      MPI_OK(MPI_Recv(g_rbuf, c, MPI_FLOAT, 0, PP_TAG, w, MPI_STATUS_IGNORE));
      MPI_OK(MPI_Send(g_sbuf, c, MPI_FLOAT, 0, PP_TAG, w));
    }
    break;
  case OP_SENDRECV:
    MPI_OK(MPI_Sendrecv(g_sbuf, c, MPI_FLOAT, (g_rank + 1) % g_size, PP_TAG, g_rbuf, c,
                        MPI_FLOAT, (g_rank + g_size - 1) % g_size, PP_TAG, w,
                        MPI_STATUS_IGNORE));
    break;
  case OP_HALO: {
    /* From the left into the first half, from the right into the second;
     * the tag says which way a message goes (at 2 ranks both neighbours
     * are the same rank). */
    int left = (g_rank + g_size - 1) % g_size, right = (g_rank + 1) % g_size;
    MPI_Request rq[4];
    MPI_OK(MPI_Irecv(g_rbuf, c, MPI_FLOAT, left, HALO_TAG, w, &rq[0]));
    MPI_OK(MPI_Irecv(g_rbuf + c, c, MPI_FLOAT, right, HALO_TAG + 1, w, &rq[1]));
    MPI_OK(MPI_Isend(g_sbuf, c, MPI_FLOAT, right, HALO_TAG, w, &rq[2]));
    MPI_OK(MPI_Isend(g_sbuf, c, MPI_FLOAT, left, HALO_TAG + 1, w, &rq[3]));
    MPI_OK(MPI_Waitall(4, rq, MPI_STATUSES_IGNORE));
    break;
  }
  default: break;
  }
}

/* ---- inputs, cleared outputs, checks ------------------------------------ */

static void fill_inputs(int op, size_t c) {
  size_t n = (size_t)g_size, i, d;
  switch (op) {
  case OP_ALLREDUCE:
  case OP_REDUCE:
    for (i = 0; i < c; i++) g_sbuf[i] = red_in(g_rank, i);
    break;
  case OP_REDUCE_SCATTER:
    for (i = 0; i < c * n; i++) g_sbuf[i] = red_in(g_rank, i);
    break;
  case OP_BCAST:
    for (i = 0; i < c; i++) g_sbuf[i] = g_rank == ROOT ? tag_val(ROOT, 1, i) : SENTINEL;
    break;
  case OP_ALLGATHER:
    for (i = 0; i < c; i++) g_sbuf[i] = tag_val(g_rank, 0, i);
    break;
  case OP_ALLTOALL:
    for (d = 0; d < n; d++)
      for (i = 0; i < c; i++) g_sbuf[d * c + i] = tag_val(g_rank, (int)d + 1000, i);
    break;
  case OP_GATHER:
    for (i = 0; i < c; i++) g_sbuf[i] = tag_val(g_rank, 2, i);
    break;
  case OP_SCATTER:
    for (d = 0; d < n; d++)
      for (i = 0; i < c; i++)
        g_sbuf[d * c + i] = g_rank == ROOT ? tag_val((int)d, 3, i) : SENTINEL;
    break;
  case OP_PINGPONG:
    for (i = 0; i < c; i++) g_sbuf[i] = tag_val(g_rank, 5, i);
    break;
  case OP_SENDRECV:
    for (i = 0; i < c; i++) g_sbuf[i] = tag_val(g_rank, 6, i);
    break;
  case OP_HALO:
    for (i = 0; i < c; i++) g_sbuf[i] = tag_val(g_rank, 7, i);
    break;
  default: break;
  }
}

/* Elements of the output buffer this rank checks. */
static size_t out_count(int op, size_t c) {
  size_t n = (size_t)g_size;
  switch (op) {
  case OP_ALLREDUCE:
  case OP_REDUCE_SCATTER:
  case OP_SCATTER: return c;
  case OP_REDUCE: return g_rank == ROOT ? c : 0;
  case OP_GATHER: return g_rank == ROOT ? c * n : 0;
  case OP_ALLGATHER:
  case OP_ALLTOALL: return c * n;
  case OP_PINGPONG: return g_rank <= 1 && g_size >= 2 ? c : 0;
  case OP_SENDRECV: return c;
  case OP_HALO: return 2 * c;
  default: return 0;
  }
}

static void clear_outputs(int op, size_t c) {
  size_t i, m = out_count(op, c);
  if (op == OP_BCAST) {
    if (g_rank != ROOT)
      for (i = 0; i < c; i++) g_sbuf[i] = SENTINEL;
    return;
  }
  for (i = 0; i < m; i++) g_rbuf[i] = SENTINEL;
}

static float expected(int op, size_t c, size_t k) {
  int n = g_size;
  size_t blk = c ? k / c : 0, j = c ? k % c : 0;
  switch (op) {
  case OP_ALLREDUCE:
  case OP_REDUCE: return red_out(n, k);
  case OP_REDUCE_SCATTER: return red_out(n, (size_t)g_rank * c + k);
  case OP_BCAST: return tag_val(ROOT, 1, k);
  case OP_ALLGATHER: return tag_val((int)blk, 0, j);
  case OP_ALLTOALL: return tag_val((int)blk, g_rank + 1000, j);
  case OP_GATHER: return tag_val((int)blk, 2, j);
  case OP_SCATTER: return tag_val(g_rank, 3, k);
  case OP_PINGPONG: return tag_val(1 - g_rank, 5, k);
  case OP_SENDRECV: return tag_val((g_rank + n - 1) % n, 6, k);
  case OP_HALO: return tag_val(blk == 0 ? (g_rank + n - 1) % n : (g_rank + 1) % n, 7, j);
  default: return 0.0f;
  }
}

/* Mismatches on this rank: the output, and inputs that must stay unchanged. */
static long verify_local(int op, size_t c) {
  long bad = 0;
  size_t k, m;
  if (op == OP_BCAST) {
    for (k = 0; k < c; k++) bad += g_sbuf[k] != tag_val(ROOT, 1, k);
    return bad;
  }
  m = out_count(op, c);
  for (k = 0; k < m; k++) bad += g_rbuf[k] != expected(op, c, k);
  /* Send buffers are const in MPI: a library must not scribble on them. */
  if (op == OP_ALLREDUCE || op == OP_REDUCE)
    for (k = 0; k < c; k++) bad += g_sbuf[k] != red_in(g_rank, k);
  return bad;
}

static int all_true(int local) {
  int all = 0;
  MPI_OK(MPI_Allreduce(&local, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  return all;
}

/* Returns 1 ok, 0 wrong. Checks what the timed loop left behind, then clears
 * the outputs and checks one more call, so a stale buffer cannot pass. */
static int check_result(int op, int c) {
  int ok = verify_local(op, (size_t)c) == 0;
  clear_outputs(op, (size_t)c);
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  run_once(op, c);
  ok = ok && verify_local(op, (size_t)c) == 0;
  return all_true(ok);
}

/* The timing itself goes through the library under test: batch times are
 * averaged with MPI_Allreduce(MPI_DOUBLE, MPI_SUM), the calibration takes
 * MPI_MAX, the checks MPI_INT MIN and MPI_Bcast. A library whose reduction
 * of doubles is wrong would print wrong times next to "ok" rows (the rows
 * check only the op under test, on floats), so these are checked first,
 * on exactly known values, and a wrong one stops the run. */
static int timing_calls_ok(void) {
  double mine = (double)(g_rank + 1), sum = 0.0, most = 0.0, least = 0.0;
  double from_root = g_rank == 0 ? 0.25 : -1.0;
  double n = (double)g_size;
  int low = 0, high = 0, ok;
  MPI_OK(MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  MPI_OK(MPI_Allreduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  MPI_OK(MPI_Allreduce(&mine, &least, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
  MPI_OK(MPI_Allreduce(&g_rank, &low, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  MPI_OK(MPI_Allreduce(&g_rank, &high, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  MPI_OK(MPI_Bcast(&from_root, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  ok = sum == n * (n + 1.0) / 2.0 && most == n && least == 1.0 && low == 0 &&
       high == g_size - 1 && from_root == 0.25;
  if (!ok)
    fprintf(stderr,
            "mpibench: rank %d: the calls that time and check the benchmark give "
            "wrong results (double sum %g max %g min %g, int min %d max %d, bcast %g)\n",
            g_rank, sum, most, least, low, high, from_root);
  return ok;
}

/* A barrier is right if no rank leaves it before the last rank enters. Rank 0
 * enters late (after a sleep); CLOCK_MONOTONIC is one clock for all processes
 * of a host. Returns 1 ok, 0 wrong, -1 cannot tell (ranks on several hosts). */
static int check_barrier(void) {
  int k, ok = 1;
  if (!g_same_host) return -1;
  for (k = 0; k < 3; k++) {
    double enter = 0.0, leave, first_leave = 0.0;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == 0) {
      struct timespec ts = {0, 5 * 1000 * 1000};
      nanosleep(&ts, NULL);
      enter = mono_now();
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    leave = mono_now();
    MPI_OK(MPI_Allreduce(&leave, &first_leave, 1, MPI_DOUBLE, MPI_MIN,
                         MPI_COMM_WORLD));
    MPI_OK(MPI_Bcast(&enter, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    if (first_leave < enter) ok = 0;
  }
  return ok;
}

/* ---- timing ------------------------------------------------------------- */

/* Elements of g_sbuf that `op` sends from with count c. */
static size_t send_count(int op, size_t c) {
  switch (op) {
  case OP_REDUCE_SCATTER:
  case OP_ALLTOALL:
  case OP_SCATTER: return c * (size_t)g_size;
  case OP_BARRIER: return 0;
  default: return c;
  }
}

/* Stores every 64th byte of the first n floats of g_sbuf back (-t). */
static void touch_send(size_t n) {
  volatile unsigned char *p = (volatile unsigned char *)g_sbuf;
  size_t i, bytes = n * sizeof(float);
  for (i = 0; i < bytes; i += 64) p[i] = p[i];
}

static double timed_batch(int op, int c, long iters) {
  long i;
  double t0;
  size_t n = g_touch ? send_count(op, (size_t)c) : 0;
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  t0 = MPI_Wtime();
  if (n > 0) {
    for (i = 0; i < iters; i++) {
      touch_send(n);
      run_once(op, c);
    }
  } else {
    for (i = 0; i < iters; i++) run_once(op, c);
  }
  return MPI_Wtime() - t0;
}

static double max_over_ranks(double v) {
  double m = 0.0;
  MPI_OK(MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return m;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* What a size reports from this rank's mean time per call `t`: pingpong
 * (only ranks 0 and 1 take part) rank 0's one-way latency, every other op
 * the average over ranks, like nccl-tests' default. */
static double reported(int op, double t) {
  double sum = 0.0;
  if (op == OP_PINGPONG) {
    t *= 0.5;
    MPI_OK(MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    return t;
  }
  MPI_OK(MPI_Allreduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  return sum / g_size;
}

/* -S: the time of each timed call with the barrier after it (the slowest
 * rank's loop over the timed calls), printed after each row as a "# loop"
 * line. Where ranks outnumber cores, who runs first after the barrier
 * decides which call's timer a core switch falls into: the calls' own
 * times can differ several-fold between libraries whose loops take the
 * same time. */
static double g_short_loop;

/* -S: one short run per size as OSU's benchmarks make it (their defaults:
 * 200 untimed calls and 1000 timed ones, 10 and 100 above 8 KiB a rank;
 * each call timed alone and followed by a barrier; the mean over the timed
 * calls and the ranks), one process for all sizes in turn. What a library
 * does on the first calls of a size (mapping memory, finding its way)
 * shows here, where the batches of `measure` leave it out. */
static double measure_short(int op, int c) {
  int large = (size_t)c * sizeof(float) > 8192;
  long i, skip = large ? 10 : 200, iters = large ? 100 : 1000;
  size_t n = g_touch ? send_count(op, (size_t)c) : 0;
  double t0, t, sum = 0.0, loop0 = 0.0;
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  for (i = 0; i < skip + iters; i++) {
    if (i == skip) loop0 = MPI_Wtime();
    if (n > 0) touch_send(n);
    t0 = MPI_Wtime();
    run_once(op, c);
    t = MPI_Wtime() - t0;
    if (i >= skip) sum += t;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  }
  g_short_loop = max_over_ranks((MPI_Wtime() - loop0) / (double)iters);
  return reported(op, sum / (double)iters);
}

/* Median over reps of the per-call time in seconds. Every decision about
 * iteration counts uses values reduced over all ranks, so all ranks run the
 * same number of calls. */
static double measure(const struct config *cfg, int op, int c) {
  double t_first, t_call, times[64];
  long nwarm = cfg->warmup, iters = cfg->iters_max;
  int r;

  if (cfg->short_runs) return measure_short(op, c);

  /* The first call pays for lazy set-up and page faults; it calibrates. */
  t_first = max_over_ranks(timed_batch(op, c, 1));
  t_call = t_first;
  if (cfg->budget > 0.0) {
    double w = 0.2 * cfg->budget / (t_first > 1e-9 ? t_first : 1e-9);
    if (w < (double)nwarm) nwarm = (long)w;
  }
  if (nwarm > 0) t_call = max_over_ranks(timed_batch(op, c, nwarm)) / (double)nwarm;
  if (cfg->budget > 0.0) {
    double it = 0.7 * cfg->budget / cfg->reps / (t_call > 1e-9 ? t_call : 1e-9);
    iters = it < 1.0 ? 1 : it > (double)cfg->iters_max ? cfg->iters_max : (long)it;
  }
  for (r = 0; r < cfg->reps; r++) {
    times[r] = reported(op, timed_batch(op, c, iters) / (double)iters);
  }
  qsort(times, (size_t)cfg->reps, sizeof times[0], cmp_double);
  return cfg->reps % 2 ? times[cfg->reps / 2]
                       : 0.5 * (times[cfg->reps / 2 - 1] + times[cfg->reps / 2]);
}

/* ---- driver ------------------------------------------------------------- */

/* Times to the nanosecond: small calls take 40-150 ns here, and at 10 ns
 * steps a 5 ns difference read as a ratio of 1.2. */
static void print_row(const char *name, size_t bytes, double sec, double factor,
                      int ok) {
  double algbw = sec > 0.0 ? (double)bytes / 1e9 / sec : 0.0;
  printf("%-16s%12zu %12.3f %12.3f %12.3f %4s\n", name, bytes, sec * 1e6, algbw,
         algbw * factor, ok > 0 ? "yes" : ok == 0 ? "no" : "-");
  fflush(stdout);
}

/* -S: the "# loop" line after a row (see g_short_loop). */
static void print_loop(int op, size_t bytes) {
  printf("# loop %s %zu %.3f us a call with its barrier\n", op_names[op], bytes,
         g_short_loop * 1e6);
  fflush(stdout);
}

static void print_header(int op) {
  printf("# op=%s ranks=%d\n", op_names[op], g_size);
  printf("%-16s%12s %12s %12s %12s %4s\n", "#op", "bytes", "avg_us",
         "algbw_GBps", "busbw_GBps", "ok");
  fflush(stdout);
}

static void bench_op(const struct config *cfg, int op) {
  size_t nominal, prev_bytes = (size_t)-1;
  int all_ok = 1;

  if (g_rank == 0) print_header(op);
  if (op == OP_PINGPONG && g_size < 2) {
    if (g_rank == 0) printf("# pingpong skipped: needs 2 ranks\n");
    return;
  }
  if (op == OP_BARRIER) {
    int ok = cfg->check ? check_barrier() : -1;
    double t = measure(cfg, op, 0);
    if (g_rank == 0) print_row(op_names[op], 0, t, 1.0, ok);
    if (g_rank == 0 && cfg->short_runs) print_loop(op, 0);
    return;
  }
  for (nominal = cfg->min_bytes; nominal <= cfg->max_bytes; nominal *= cfg->factor) {
    size_t c = count_for(op, nominal), bytes = bytes_for(op, c);
    double t;
    int ok = -1;
    /* Tiny sizes can round to the same block count at many ranks. */
    if (bytes != prev_bytes) {
      prev_bytes = bytes;
      fill_inputs(op, c);
      t = measure(cfg, op, (int)c);
      if (cfg->check) ok = check_result(op, (int)c);
      if (ok == 0) all_ok = 0;
      if (g_rank == 0) print_row(op_names[op], bytes, t, bus_factor(op), ok);
      if (g_rank == 0 && cfg->short_runs) print_loop(op, bytes);
    }
    if (nominal > cfg->max_bytes / cfg->factor) break; /* no overflow */
  }
  if (!all_ok && g_rank == 0) printf("# %s: WRONG RESULTS (ok=no above)\n", op_names[op]);
}

static int parse_size(const char *s, size_t *out) {
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  unsigned long long mul = 1;
  if (end == s) return -1;
  switch (*end) {
  case 'k': case 'K': mul = 1ull << 10; end++; break;
  case 'm': case 'M': mul = 1ull << 20; end++; break;
  case 'g': case 'G': mul = 1ull << 30; end++; break;
  default: break;
  }
  if (*end == 'B' || *end == 'b') end++;
  if (*end != '\0' || v > (unsigned long long)SIZE_MAX / mul) return -1;
  *out = (size_t)(v * mul);
  return 0;
}

static int parse_ops(const char *list, struct config *cfg) {
  char buf[512];
  char *tok, *save = NULL;
  int k;
  if (strlen(list) >= sizeof buf) return -1;
  strcpy(buf, list);
  cfg->nops = 0;
  for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int op = -1;
    if (strcmp(tok, "all") == 0) {
      for (k = 0; k < OP_COUNT && cfg->nops < OP_COUNT; k++) cfg->ops[cfg->nops++] = k;
      continue;
    }
    for (k = 0; k < OP_COUNT; k++)
      if (strcmp(tok, op_names[k]) == 0) op = k;
    if (strcmp(tok, "reduce_scatter_block") == 0) op = OP_REDUCE_SCATTER;
    if (strcmp(tok, "broadcast") == 0) op = OP_BCAST;
    if (strcmp(tok, "p2p") == 0) op = OP_PINGPONG;
    if (op < 0 || cfg->nops >= OP_COUNT) return -1;
    cfg->ops[cfg->nops++] = op;
  }
  return cfg->nops > 0 ? 0 : -1;
}

static void usage(void) {
  printf(
      "usage: mpibench [-b MIN] [-e MAX] [-f FACTOR] [-o OP[,OP...]] [-i ITERS]\n"
      "                [-w WARMUP] [-r REPS] [-T SECONDS] [-c 0|1] [-t] [-S]\n"
      "  -b MIN      smallest size in bytes, K/M/G suffixes (default 8)\n"
      "  -e MAX      largest size; sizes are MIN*FACTOR^k <= MAX (default 64M)\n"
      "  -f FACTOR   size step (default 4)\n"
      "  -o OPS      comma list of: allreduce bcast reduce allgather\n"
      "              reduce_scatter(=reduce_scatter_block) alltoall gather\n"
      "              scatter barrier pingpong sendrecv halo, or all (default all)\n"
      "  -i ITERS    most calls per timed batch (default 1000)\n"
      "  -w WARMUP   most warm-up calls per size (default 20)\n"
      "  -r REPS     timed batches per size, median printed (default 5, max 64)\n"
      "  -T SECONDS  time budget per op and size; calls per batch shrink to fit\n"
      "              (default 0.2; 0 = always ITERS calls and WARMUP warm-ups)\n"
      "  -c 0|1      check results after timing (default 1)\n"
      "  -t          store to every cache line of the send buffer before each\n"
      "              call (the same values), as a program sending new data does\n"
      "  -S          each size once, as OSU's benchmarks run it: 200 untimed and\n"
      "              1000 timed calls (10 and 100 above 8 KiB a rank), each timed\n"
      "              alone and followed by a barrier; -i, -w, -r, -T unused\n");
}

static int parse_args(int argc, char **argv, struct config *cfg) {
  int opt;
  cfg->min_bytes = 8;
  cfg->max_bytes = 64u << 20;
  cfg->factor = 4;
  cfg->iters_max = 1000;
  cfg->warmup = 20;
  cfg->reps = 5;
  cfg->budget = 0.2;
  cfg->check = 1;
  cfg->short_runs = 0;
  parse_ops("all", cfg);
  while ((opt = getopt(argc, argv, "b:e:f:o:i:w:r:T:c:tSh")) != -1) {
    char *end = NULL;
    switch (opt) {
    case 'b': if (parse_size(optarg, &cfg->min_bytes)) return -1; break;
    case 'e': if (parse_size(optarg, &cfg->max_bytes)) return -1; break;
    case 'f': if (parse_size(optarg, &cfg->factor) || cfg->factor < 2) return -1; break;
    case 'o': if (parse_ops(optarg, cfg)) return -1; break;
    case 'i':
      cfg->iters_max = strtol(optarg, &end, 10);
      if (*end || cfg->iters_max < 1) return -1;
      break;
    case 'w':
      cfg->warmup = strtol(optarg, &end, 10);
      if (*end || cfg->warmup < 0) return -1;
      break;
    case 'r':
      cfg->reps = (int)strtol(optarg, &end, 10);
      if (*end || cfg->reps < 1 || cfg->reps > 64) return -1;
      break;
    case 'T':
      cfg->budget = strtod(optarg, &end);
      if (*end || cfg->budget < 0.0) return -1;
      break;
    case 't': g_touch = 1; break;
    case 'S': cfg->short_runs = 1; break;
    case 'c':
      cfg->check = (int)strtol(optarg, &end, 10);
      if (*end || (cfg->check != 0 && cfg->check != 1)) return -1;
      break;
    case 'h': return 1;
    default: return -1;
    }
  }
  if (optind != argc || cfg->min_bytes < 1 || cfg->min_bytes > cfg->max_bytes) return -1;
  return 0;
}

/* Largest buffer any (op, size) needs: every op's send and receive buffers
 * are at most bytes_for() of that size. */
static size_t buffer_bytes(const struct config *cfg) {
  size_t most = sizeof(float), nominal;
  int k;
  for (k = 0; k < cfg->nops; k++) {
    for (nominal = cfg->min_bytes; nominal <= cfg->max_bytes; nominal *= cfg->factor) {
      size_t b = bytes_for(cfg->ops[k], count_for(cfg->ops[k], nominal));
      if (cfg->ops[k] == OP_HALO) b *= 2; /* a message from each side */
      if (b > most) most = b;
      if (nominal > cfg->max_bytes / cfg->factor) break;
    }
  }
  return most;
}

static unsigned fnv1a(const char *s) {
  unsigned h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

int main(int argc, char **argv) {
  struct config cfg;
  char lib[8192], host[1024]; /* larger than any MPI_MAX_* in use */
  int len = 0, rc, k, hash, hmin = 0, hmax = 0;
  size_t bufbytes;

  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &g_size));

  rc = parse_args(argc, argv, &cfg);
  if (rc != 0) {
    /* Every rank parses the same argv, so all leave here together. */
    if (g_rank == 0) {
      if (rc < 0) fprintf(stderr, "mpibench: bad arguments\n");
      usage();
    }
    MPI_Finalize();
    return rc < 0 ? 2 : 0;
  }

  bufbytes = buffer_bytes(&cfg);
  if (bufbytes / sizeof(float) > (size_t)INT_MAX) {
    if (g_rank == 0) fprintf(stderr, "mpibench: -e too large for int counts\n");
    MPI_Finalize();
    return 2;
  }
  {
    void *s = NULL, *r = NULL;
    int got = posix_memalign(&s, 4096, bufbytes) == 0 &&
              posix_memalign(&r, 4096, bufbytes) == 0;
    if (!all_true(got)) {
      if (g_rank == 0) fprintf(stderr, "mpibench: cannot allocate 2 x %zu bytes\n", bufbytes);
      MPI_Finalize();
      return 2;
    }
    g_sbuf = (float *)s; /* casts: the file also compiles as C++ */
    g_rbuf = (float *)r;
    memset(g_sbuf, 0, bufbytes); /* fault the pages in before any timing */
    memset(g_rbuf, 0, bufbytes);
  }

  if (!timing_calls_ok()) MPI_Abort(MPI_COMM_WORLD, 2);

  MPI_OK(MPI_Get_processor_name(host, &len));
  hash = (int)(fnv1a(host) & 0x7fffffff);
  MPI_OK(MPI_Allreduce(&hash, &hmin, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  MPI_OK(MPI_Allreduce(&hash, &hmax, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  g_same_host = hmin == hmax;

  if (g_rank == 0) {
    lib[0] = '\0';
    MPI_OK(MPI_Get_library_version(lib, &len));
    lib[strcspn(lib, "\n")] = '\0';
    printf("# mpibench ranks=%d bytes=%zu..%zu x%zu iters<=%ld warmup<=%ld reps=%d "
           "budget=%gs check=%d short=%d\n",
           g_size, cfg.min_bytes, cfg.max_bytes, cfg.factor, cfg.iters_max,
           cfg.warmup, cfg.reps, cfg.budget, cfg.check, cfg.short_runs);
    printf("# library: %s\n", lib);
    fflush(stdout);
  }
  for (k = 0; k < cfg.nops; k++) {
    bench_op(&cfg, cfg.ops[k]);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  }
  if (g_rank == 0) {
    printf("# mpibench done\n");
    fflush(stdout);
  }
  free(g_sbuf);
  free(g_rbuf);
  MPI_OK(MPI_Finalize());
  return 0;
}
