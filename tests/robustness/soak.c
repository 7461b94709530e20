/* Soak: ITERS random collectives (op, datatype, reduction, size, root,
 * communicator) on four communicators used side by side -- the world, a
 * duplicate that is freed and made again every 500 calls, the two halves
 * of a split by rank parity (each half runs its own random sequence at the
 * same time as the other), and the world in reverse order -- plus
 * point-to-point rings. Every result is checked against a reference each
 * rank computes itself; the first wrong element ends the job with a
 * message. Resident memory is sampled at 10%, 50% and 100% of the run
 * (after every size has been seen once) and printed by rank 0 as the
 * largest over ranks, in all (VmRSS), private (RssAnon) and shared (the
 * segment's touched pages, RssShmem):
 *   SOAK ops=N ranks=R seed=S seconds=T rss_kib_10=A rss_kib_50=B rss_kib_end=C
 *        anon_kib_10=... shmem_kib_10=...
 *
 * Usage: soak [ITERS [SEED]]   (defaults 10000, 1) */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int wrank, wsize;

#define FAIL(...)                                                                 \
  do {                                                                          \
    fprintf(stderr, "SOAK FAIL rank %d: ", wrank);                              \
    fprintf(stderr, __VA_ARGS__);                                               \
    fprintf(stderr, "\n");                                                      \
    MPI_Abort(MPI_COMM_WORLD, 1);                                               \
  } while (0)

#define OK(call)                                                                \
  do {                                                                          \
    int rc_ = (call);                                                           \
    if (rc_ != MPI_SUCCESS) {                                                   \
      char s_[MPI_MAX_ERROR_STRING];                                            \
      int l_ = 0;                                                               \
      MPI_Error_string(rc_, s_, &l_);                                           \
      FAIL("%s: %s", #call, s_);                                                \
    }                                                                           \
  } while (0)

/* splitmix64: the same sequence on every rank that seeds it alike. */
static uint64_t mix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* ---- element types: values are small integers, exact in every type ---- */
enum { T_INT, T_LL, T_FLOAT, T_DOUBLE, T_UCHAR, T_SHORT, NTYPES };
static const char *tname[NTYPES] = {"int", "long long", "float", "double", "uchar", "short"};
static MPI_Datatype tmpi(int t) {
  switch (t) {
  case T_INT: return MPI_INT;
  case T_LL: return MPI_LONG_LONG;
  case T_FLOAT: return MPI_FLOAT;
  case T_DOUBLE: return MPI_DOUBLE;
  case T_UCHAR: return MPI_UNSIGNED_CHAR;
  default: return MPI_SHORT;
  }
}
static size_t tsize(int t) {
  static const size_t sz[NTYPES] = {sizeof(int), sizeof(long long), sizeof(float),
                                    sizeof(double), 1, sizeof(short)};
  return sz[t];
}
static double get(const void *b, int t, size_t i) {
  switch (t) {
  case T_INT: return ((const int *)b)[i];
  case T_LL: return (double)((const long long *)b)[i];
  case T_FLOAT: return ((const float *)b)[i];
  case T_DOUBLE: return ((const double *)b)[i];
  case T_UCHAR: return ((const unsigned char *)b)[i];
  default: return ((const short *)b)[i];
  }
}
static void set(void *b, int t, size_t i, double v) {
  switch (t) {
  case T_INT: ((int *)b)[i] = (int)v; break;
  case T_LL: ((long long *)b)[i] = (long long)v; break;
  case T_FLOAT: ((float *)b)[i] = (float)v; break;
  case T_DOUBLE: ((double *)b)[i] = v; break;
  case T_UCHAR: ((unsigned char *)b)[i] = (unsigned char)v; break;
  default: ((short *)b)[i] = (short)v; break;
  }
}

/* The value comm rank r contributes at element k of call i: 1..13 (a PROD
 * of at most 4 such stays exact: values are 1 or 2 there). */
static double val(int r, long i, size_t k, int prod) {
  uint64_t h = (uint64_t)r * 1000003u + (uint64_t)i * 7919u + k * 31u;
  return prod ? (double)(1 + (h >> 3) % 2) : (double)(1 + (h >> 3) % 13);
}
static void fill(void *b, int t, int r, long i, size_t n, size_t off, int prod) {
  for (size_t k = 0; k < n; k++) set(b, t, k, val(r, i, off + k, prod));
}

enum { R_SUM, R_MAX, R_MIN, R_PROD, NREDS };
static const char *rname[NREDS] = {"sum", "max", "min", "prod"};
static MPI_Op rmpi(int o) {
  return o == R_SUM ? MPI_SUM : o == R_MAX ? MPI_MAX : o == R_MIN ? MPI_MIN : MPI_PROD;
}
/* The reduction of ranks lo..hi-1's values at element k. */
static double fold(int o, int lo, int hi, long i, size_t k) {
  double a = val(lo, i, k, o == R_PROD);
  for (int r = lo + 1; r < hi; r++) {
    double v = val(r, i, k, o == R_PROD);
    a = o == R_SUM ? a + v : o == R_MAX ? (v > a ? v : a) : o == R_MIN ? (v < a ? v : a) : a * v;
  }
  return a;
}

static void expect(const void *b, int t, size_t n, long i, const char *what,
                   double (*ref)(size_t, const void *), const void *ctx) {
  for (size_t k = 0; k < n; k++) {
    double want = ref(k, ctx), got = get(b, t, k);
    if (got != want)
      FAIL("call %ld %s (%s, %zu elements): element %zu is %g, want %g", i, what, tname[t],
           n, k, got, want);
  }
}

/* ---- one random collective on one communicator ---- */
struct call {
  long i;
  int t, o, root, me, n;
  size_t count;
};
static double ref_fold(size_t k, const void *c_) {
  const struct call *c = c_;
  return fold(c->o, 0, c->n, c->i, k);
}
static double ref_scan(size_t k, const void *c_) {
  const struct call *c = c_;
  return fold(c->o, 0, c->me + 1, c->i, k);
}
static double ref_exscan(size_t k, const void *c_) {
  const struct call *c = c_;
  return fold(c->o, 0, c->me, c->i, k);
}
static double ref_root(size_t k, const void *c_) {
  const struct call *c = c_;
  return val(c->root, c->i, k, 0);
}
/* Block r of a gathered buffer: rank r's values. */
static double ref_blocks(size_t k, const void *c_) {
  const struct call *c = c_;
  return val((int)(k / c->count), c->i, k % c->count, 0);
}
/* Scatter / reduce_scatter_block: this rank's block of the root's or the
 * reduction's values. */
static double ref_my_block(size_t k, const void *c_) {
  const struct call *c = c_;
  return val(c->root, c->i, c->me * c->count + k, 0);
}
/* Alltoall: block r came from rank r, its part for me. */
static double ref_a2a(size_t k, const void *c_) {
  const struct call *c = c_;
  size_t r = k / c->count;
  return val((int)r, c->i, c->me * c->count + k % c->count, 0);
}

enum { OP_ALLREDUCE, OP_REDUCE, OP_BCAST, OP_ALLGATHER, OP_GATHER, OP_SCATTER, OP_ALLTOALL,
       OP_REDUCE_SCATTER, OP_SCAN, OP_EXSCAN, OP_BARRIER, OP_RING, OP_ALLGATHERV, NOPS };
static const char *oname[NOPS] = {"allreduce", "reduce", "bcast", "allgather", "gather",
                                  "scatter", "alltoall", "reduce_scatter_block", "scan",
                                  "exscan", "barrier", "sendrecv ring", "allgatherv"};
static long per_op[NOPS];

static void one(MPI_Comm comm, uint64_t *rng, long i) {
  struct call c;
  OK(MPI_Comm_rank(comm, &c.me));
  OK(MPI_Comm_size(comm, &c.n));
  c.i = i;
  int op = (int)(mix(rng) % NOPS);
  c.t = (int)(mix(rng) % NTYPES);
  c.o = (int)(mix(rng) % NREDS);
  c.root = (int)(mix(rng) % (uint64_t)c.n);
  uint64_t sz = mix(rng) % 100;
  /* 60% up to 64 elements, 30% up to 4096, 10% up to 256 Ki per rank. */
  c.count = sz < 60 ? mix(rng) % 65 : sz < 90 ? mix(rng) % 4097 : mix(rng) % 262145;
  if (op == OP_ALLTOALL || op == OP_ALLGATHER || op == OP_GATHER || op == OP_SCATTER ||
      op == OP_REDUCE_SCATTER || op == OP_ALLGATHERV)
    c.count /= (size_t)c.n; /* keep whole buffers the same size */
  int prod = c.o == R_PROD;
  MPI_Datatype T = tmpi(c.t);
  size_t es = tsize(c.t), n = c.count, N = n * (size_t)c.n;
  char *s = malloc(N * es + 1), *r = malloc(N * es + 1);
  if (!s || !r) FAIL("malloc of %zu bytes", N * es);
  int cnt = (int)n;
  per_op[op]++;
  switch (op) {
  case OP_ALLREDUCE:
    fill(s, c.t, c.me, i, n, 0, prod);
    OK(MPI_Allreduce(s, r, cnt, T, rmpi(c.o), comm));
    expect(r, c.t, n, i, "allreduce", ref_fold, &c);
    break;
  case OP_REDUCE:
    fill(s, c.t, c.me, i, n, 0, prod);
    OK(MPI_Reduce(s, r, cnt, T, rmpi(c.o), c.root, comm));
    if (c.me == c.root) expect(r, c.t, n, i, "reduce", ref_fold, &c);
    break;
  case OP_BCAST:
    if (c.me == c.root) fill(r, c.t, c.root, i, n, 0, 0);
    OK(MPI_Bcast(r, cnt, T, c.root, comm));
    expect(r, c.t, n, i, "bcast", ref_root, &c);
    break;
  case OP_ALLGATHER:
    fill(s, c.t, c.me, i, n, 0, 0);
    OK(MPI_Allgather(s, cnt, T, r, cnt, T, comm));
    expect(r, c.t, N, i, "allgather", ref_blocks, &c);
    break;
  case OP_ALLGATHERV: {
    /* Every rank sends `count`, placed in reverse rank order. */
    int *counts = malloc(sizeof(int) * (size_t)c.n), *displs = malloc(sizeof(int) * (size_t)c.n);
    for (int q = 0; q < c.n; q++) {
      counts[q] = cnt;
      displs[q] = (c.n - 1 - q) * cnt;
    }
    fill(s, c.t, c.me, i, n, 0, 0);
    OK(MPI_Allgatherv(s, cnt, T, r, counts, displs, T, comm));
    for (int q = 0; q < c.n; q++)
      for (size_t k = 0; k < n; k++)
        if (get(r, c.t, (size_t)displs[q] + k) != val(q, i, k, 0))
          FAIL("call %ld allgatherv: block of rank %d element %zu wrong", i, q, k);
    free(counts);
    free(displs);
    break;
  }
  case OP_GATHER:
    fill(s, c.t, c.me, i, n, 0, 0);
    OK(MPI_Gather(s, cnt, T, r, cnt, T, c.root, comm));
    if (c.me == c.root) expect(r, c.t, N, i, "gather", ref_blocks, &c);
    break;
  case OP_SCATTER:
    if (c.me == c.root) fill(s, c.t, c.root, i, N, 0, 0);
    OK(MPI_Scatter(s, cnt, T, r, cnt, T, c.root, comm));
    expect(r, c.t, n, i, "scatter", ref_my_block, &c);
    break;
  case OP_ALLTOALL:
    fill(s, c.t, c.me, i, N, 0, 0);
    OK(MPI_Alltoall(s, cnt, T, r, cnt, T, comm));
    expect(r, c.t, N, i, "alltoall", ref_a2a, &c);
    break;
  case OP_REDUCE_SCATTER:
    fill(s, c.t, c.me, i, N, 0, prod);
    OK(MPI_Reduce_scatter_block(s, r, cnt, T, rmpi(c.o), comm));
    /* Each rank's values at this rank's block, folded. */
    for (size_t k = 0; k < n; k++) {
      double want = fold(c.o, 0, c.n, i, (size_t)c.me * n + k);
      if (get(r, c.t, k) != want)
        FAIL("call %ld reduce_scatter_block %s: element %zu is %g, want %g", i, rname[c.o], k,
             get(r, c.t, k), want);
    }
    break;
  case OP_SCAN:
    fill(s, c.t, c.me, i, n, 0, prod);
    OK(MPI_Scan(s, r, cnt, T, rmpi(c.o), comm));
    expect(r, c.t, n, i, "scan", ref_scan, &c);
    break;
  case OP_EXSCAN:
    fill(s, c.t, c.me, i, n, 0, prod);
    OK(MPI_Exscan(s, r, cnt, T, rmpi(c.o), comm));
    if (c.me > 0) expect(r, c.t, n, i, "exscan", ref_exscan, &c);
    break;
  case OP_BARRIER:
    OK(MPI_Barrier(comm));
    break;
  default: { /* OP_RING: send to the right, receive from the left */
    int right = (c.me + 1) % c.n, left = (c.me + c.n - 1) % c.n;
    MPI_Status st;
    fill(s, c.t, c.me, i, n, 0, 0);
    OK(MPI_Sendrecv(s, cnt, T, right, (int)(i % 30000), r, cnt, T, left, (int)(i % 30000), comm,
                    &st));
    int got = -1;
    OK(MPI_Get_count(&st, T, &got));
    if (got != cnt || st.MPI_SOURCE != left) FAIL("call %ld ring: count %d source %d", i, got,
                                                  st.MPI_SOURCE);
    c.root = left;
    expect(r, c.t, n, i, "sendrecv ring", ref_root, &c);
    break;
  }
  }
  free(s);
  free(r);
}

/* This process's resident memory in KiB: [0] all (VmRSS), [1] private
 * (RssAnon: heap, stacks), [2] shared memory touched (RssShmem: the job's
 * segment). */
static void rss_kib(long out[3]) {
  static const char *keys[3] = {"VmRSS: %ld", "RssAnon: %ld", "RssShmem: %ld"};
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  out[0] = out[1] = out[2] = -1;
  if (!f) return;
  while (fgets(line, sizeof line, f))
    for (int k = 0; k < 3; k++) sscanf(line, keys[k], &out[k]);
  fclose(f);
}

/* The largest of each figure over the ranks. */
static void max_rss(long most[3]) {
  long mine[3];
  rss_kib(mine);
  OK(MPI_Allreduce(mine, most, 3, MPI_LONG, MPI_MAX, MPI_COMM_WORLD));
}

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &wrank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &wsize));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  long iters = argc > 1 ? atol(argv[1]) : 10000;
  uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
  MPI_Comm dup, half, rev;
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  OK(MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &half));
  OK(MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &rev));
  double t0 = MPI_Wtime();
  long rss10[3] = {0}, rss50[3] = {0}, rss_end[3];
  for (long i = 0; i < iters; i++) {
    /* Which communicator: the same choice everywhere (the halves then draw
     * their own calls, each half its own sequence). */
    uint64_t pick = seed * 0x100000001b3ULL + (uint64_t)i;
    int which = (int)(mix(&pick) % 4);
    uint64_t rng = seed ^ ((uint64_t)i << 20) ^ (which == 2 ? (uint64_t)(wrank % 2) << 60 : 0);
    MPI_Comm comm = which == 0 ? MPI_COMM_WORLD : which == 1 ? dup : which == 2 ? half : rev;
    one(comm, &rng, i);
    if (i % 500 == 499) {
      OK(MPI_Comm_free(&dup));
      OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    }
    if (i == iters / 10) max_rss(rss10);
    if (i == iters / 2) max_rss(rss50);
  }
  double secs = MPI_Wtime() - t0;
  max_rss(rss_end);
  if (wrank == 0) {
    printf("SOAK ops=%ld ranks=%d seed=%llu seconds=%.1f rss_kib_10=%ld rss_kib_50=%ld "
           "rss_kib_end=%ld anon_kib_10=%ld anon_kib_50=%ld anon_kib_end=%ld shmem_kib_10=%ld "
           "shmem_kib_50=%ld shmem_kib_end=%ld\n",
           iters, wsize, (unsigned long long)seed, secs, rss10[0], rss50[0], rss_end[0], rss10[1],
           rss50[1], rss_end[1], rss10[2], rss50[2], rss_end[2]);
    printf("SOAK per op:");
    for (int o = 0; o < NOPS; o++) printf(" %s=%ld", oname[o], per_op[o]);
    printf(" (rank 0's calls)\n");
  }
  OK(MPI_Comm_free(&dup));
  OK(MPI_Comm_free(&half));
  OK(MPI_Comm_free(&rev));
  OK(MPI_Finalize());
  return 0;
}
