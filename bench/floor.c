/* floor: what this machine can do right now, without any MPI library, for
 * reading benchmark tables. Shared machines change speed for minutes at a
 * time (where the host runs the two vCPUs, what else uses its memory), and
 * every library's large-message figures move with them: compare.sh prints
 * this probe before each round so a table can be read against it.
 *
 * It prints one line: one core's memcpy of 8 MiB (cached source, best of
 * 20), and the two-copy stream that shared-memory collectives are built on:
 * two processes, one copying 64 KiB chunks of an 8 MiB or 32 MiB buffer into
 * a ring of 16 shared slots, the other copying them out (median of 11). A
 * library that stages through shared memory cannot beat the stream figure
 * for a 2-rank broadcast of that size; one that copies once (cross-memory
 * attach) pays the kernel's page pinning instead. Last, the round trip of
 * one cache line between the two processes (each spins on the other's line,
 * median of 5 batches): the floor of every small-message latency, and the
 * figure that moves most when the host places the two vCPUs far apart
 * (110-130 ns usually here, over 500 ns at times). And the cost of one core
 * switch: two processes bound to one CPU hand it to each other with
 * sched_yield (median of 5 batches). Where ranks outnumber cores this sets
 * the floor of every small collective: in one turn on its core a rank can
 * finish the call its core-mates already reached and then at most the next
 * (they reach the one after only once they run again), so with 4 ranks on 2
 * cores each core switches at least once per call (compare.py's FLOOR line).
 * Usage: floor (no arguments). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (64 * 1024)
#define SLOTS 16
#define REPS 11

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Shared between the two processes: the ring, its counters, a barrier. */
struct shared {
  volatile int64_t published, consumed, arrived[2];
  char ring[SLOTS][CHUNK];
};

static void spin_until(volatile int64_t *v, int64_t at_least) {
  while (__atomic_load_n(v, __ATOMIC_ACQUIRE) < at_least) {
  }
}

/* Microseconds per stream of `len` bytes, median of REPS; -1 on failure. */
static double stream_us(size_t len) {
  struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return -1;
  memset((void *)sh, 0, sizeof *sh);
  double *times = mmap(NULL, REPS * sizeof(double), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (times == MAP_FAILED) return -1;
  pid_t child = fork();
  if (child < 0) return -1;
  int writer = child != 0;
  char *buf = malloc(len);
  if (!buf) _exit(1);
  memset(buf, writer ? 1 : 0, len);
  size_t chunks = (len + CHUNK - 1) / CHUNK;
  int64_t seq = 0;
  for (int r = 0; r <= REPS; r++) { /* round 0 warms up */
    __atomic_fetch_add(&sh->arrived[0], 1, __ATOMIC_ACQ_REL);
    spin_until(&sh->arrived[0], 2 * (r + 1));
    double t = now();
    for (size_t k = 0; k < chunks; k++) {
      int64_t s = seq + (int64_t)k + 1;
      char *slot = sh->ring[s % SLOTS];
      size_t n = len - k * CHUNK < CHUNK ? len - k * CHUNK : CHUNK;
      if (writer) {
        spin_until(&sh->consumed, s - SLOTS);
        memcpy(slot, buf + k * CHUNK, n);
        __atomic_store_n(&sh->published, s, __ATOMIC_RELEASE);
      } else {
        spin_until(&sh->published, s);
        memcpy(buf + k * CHUNK, slot, n);
        __atomic_store_n(&sh->consumed, s, __ATOMIC_RELEASE);
      }
    }
    seq += (int64_t)chunks;
    if (writer) spin_until(&sh->consumed, seq);
    if (writer && r > 0) times[r - 1] = (now() - t) * 1e6;
    __atomic_fetch_add(&sh->arrived[1], 1, __ATOMIC_ACQ_REL);
    spin_until(&sh->arrived[1], 2 * (r + 1));
  }
  free(buf);
  if (!writer) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  qsort(times, REPS, sizeof(double), cmp);
  double median = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? times[REPS / 2] : -1;
  munmap(times, REPS * sizeof(double));
  munmap(sh, sizeof *sh);
  return median;
}

/* Nanoseconds per round trip of a cache line between two processes, median
 * of 5 batches of `TRIPS`; -1 on failure. */
static double line_round_trip_ns(int TRIPS) {
  enum { BATCHES = 5 };
  /* Two lines a page apart, so neither process's line is the other's. */
  volatile int64_t *pings = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (pings == MAP_FAILED) return -1;
  volatile int64_t *pongs = pings + 512;
  *pings = 0;
  *pongs = 0;
  pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    for (int64_t i = 1; i <= (int64_t)BATCHES * TRIPS; i++) {
      spin_until(pings, i);
      __atomic_store_n(pongs, i, __ATOMIC_RELEASE);
    }
    _exit(0);
  }
  double times[BATCHES];
  int64_t i = 0;
  for (int b = 0; b < BATCHES; b++) {
    double t = now();
    for (int k = 0; k < TRIPS; k++) {
      i++;
      __atomic_store_n(pings, i, __ATOMIC_RELEASE);
      spin_until(pongs, i);
    }
    times[b] = (now() - t) / TRIPS * 1e9;
  }
  int status = 0;
  waitpid(child, &status, 0);
  munmap((void *)pings, 8192);
  qsort(times, BATCHES, sizeof(double), cmp);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? times[BATCHES / 2] : -1;
}

/* Nanoseconds per hand-over of one CPU between two processes bound to it,
 * each yielding until the other has taken its turn, median of 5 batches of
 * `turns` turns each; -1 on failure. */
static double core_switch_ns(int turns) {
  enum { BATCHES = 5 };
  cpu_set_t allowed, one;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return -1;
  int cpu = -1;
  for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
    if (CPU_ISSET(c, &allowed)) cpu = c;
  if (cpu < 0) return -1;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  volatile int64_t *turn = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (turn == MAP_FAILED) return -1;
  *turn = 0;
  if (sched_setaffinity(0, sizeof one, &one) != 0) return -1;
  pid_t child = fork();
  if (child < 0) {
    sched_setaffinity(0, sizeof allowed, &allowed);
    return -1;
  }
  /* The parent takes the even turns, the child the odd ones. */
  int64_t i = child == 0;
  double times[BATCHES];
  for (int b = 0; b < BATCHES; b++) {
    double t = now();
    for (int k = 0; k < turns; k++, i += 2) {
      while (__atomic_load_n(turn, __ATOMIC_ACQUIRE) != i) sched_yield();
      __atomic_store_n(turn, i + 1, __ATOMIC_RELEASE);
    }
    times[b] = (now() - t) / (2.0 * turns) * 1e9;
  }
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  sched_setaffinity(0, sizeof allowed, &allowed);
  munmap((void *)turn, 4096);
  qsort(times, BATCHES, sizeof(double), cmp);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? times[BATCHES / 2] : -1;
}

static double memcpy_us(size_t len) {
  char *a = malloc(len), *b = malloc(len);
  if (!a || !b) return -1;
  memset(a, 1, len);
  memset(b, 2, len);
  double best = 1e30;
  for (int r = 0; r < 20; r++) {
    double t = now();
    memcpy(b, a, len);
    t = now() - t;
    if (t < best) best = t;
    __asm__ volatile("" : : "r"(b) : "memory"); /* keep the copy */
  }
  free(a);
  free(b);
  return best * 1e6;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--line") == 0) {
    /* The round trip alone, quickly (10-60 ms): compare.sh probes it
     * around every run to tell which ran in the host's slow state. */
    double rt = line_round_trip_ns(20000);
    if (rt < 0) return 1;
    printf("%.0f\n", rt);
    return 0;
  }
  const size_t mib = 1024 * 1024;
  double m8 = memcpy_us(8 * mib), s8 = stream_us(8 * mib), s32 = stream_us(32 * mib);
  double rt = line_round_trip_ns(100000);
  double sw = core_switch_ns(20000);
  if (m8 < 0 || s8 < 0 || s32 < 0 || rt < 0 || sw < 0) {
    fprintf(stderr, "floor: probe failed\n");
    return 1;
  }
  printf("memcpy 8 MiB %.0f us (%.1f GB/s); two-process stream 8 MiB %.0f us "
         "(%.1f GB/s), 32 MiB %.0f us (%.1f GB/s); cache-line round trip %.0f ns; "
         "core switch %.0f ns\n",
         m8, 8 * mib / m8 / 1e3, s8, 8 * mib / s8 / 1e3, s32, 32 * mib / s32 / 1e3, rt, sw);
  return 0;
}
