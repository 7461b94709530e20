/* Every NCCL collective x every datatype x every reduction (sum, prod, max,
 * min, avg and a PreMulSum), out of place and in place, at counts 0, 1,
 * 1031 and a few MB, plain and through the *Config variants (NULL config
 * and NCCL_COLLCONFIG_INITIALIZER), on host buffers from ncclMemAlloc.
 *
 * Inputs are chosen so that every result is exact whatever the reduction
 * order: small integers scaled by a power of two per type, so every partial
 * sum is representable even in fp8. The reference is computed in double and
 * converted with this file's own round-to-nearest-even encoders (fp8
 * saturating like __NV_SATFINITE). ncclAvg: integers are summed then
 * divided (C truncation); float inputs are multiples of n, so scaling by 1/n
 * and summing is exact. Separate cases check single roundings (f16, bf16,
 * fp8), overflow (f16 -> inf, fp8 -> max finite), and when a PreMulSum
 * scalar is read (ncclScalarHostImmediate: at creation; ncclScalarDevice:
 * at the call).
 *
 * Buffers carry guard bytes before and after; outputs start as a sentinel;
 * sendbuffs of out-of-place calls, and recvbuffs that a rank does not own
 * (Reduce/Gather at a non-root), must come back unchanged.
 *
 * Usage: t_nccl_coll [quick]   (quick: no multi-MB cases) */
#include "nccl_testutil.h"

#include <math.h>
#include <stdint.h>

static int rank, nranks;
static ncclComm_t comm;
static long ncases;

/* ---- element types and their exact encoders ------------------------------ */

enum { K_SINT, K_UINT, K_FLT };
typedef struct {
  ncclDataType_t t;
  const char *name;
  size_t size;
  int kind;
  double scale; /* a power of two: inputs are small integers times this */
} tinfo_t;

static const tinfo_t types[] = {
    {ncclInt8, "int8", 1, K_SINT, 1.0},
    {ncclUint8, "uint8", 1, K_UINT, 1.0},
    {ncclInt32, "int32", 4, K_SINT, 1048576.0},
    {ncclUint32, "uint32", 4, K_UINT, 1048576.0},
    {ncclInt64, "int64", 8, K_SINT, 1099511627776.0},
    {ncclUint64, "uint64", 8, K_UINT, 1099511627776.0},
    {ncclFloat16, "float16", 2, K_FLT, 0.125},
    {ncclFloat32, "float32", 4, K_FLT, 1073741824.0},
    {ncclFloat64, "float64", 8, K_FLT, 1152921504606846976.0},
    {ncclBfloat16, "bfloat16", 2, K_FLT, 1267650600228229401496703205376.0},
    {ncclFloat8e4m3, "float8e4m3", 1, K_FLT, 0.125},
    {ncclFloat8e5m2, "float8e5m2", 1, K_FLT, 1.0},
};
enum { NTYPES = sizeof types / sizeof types[0] };

/* A small float format: `fn` formats (e4m3) have no infinity and only
 * S.1111.111 as NaN; `sat` formats saturate to the largest finite value. */
typedef struct {
  int ebits, mbits, bias;
  double maxfin;
  int sat, fn;
} mf_t;
static const mf_t MF_F16 = {5, 10, 15, 65504.0, 0, 0};
static const mf_t MF_BF16 = {8, 7, 127, 3.3895313892515355e38, 0, 0};
static const mf_t MF_E4M3 = {4, 3, 7, 448.0, 1, 1};
static const mf_t MF_E5M2 = {5, 2, 15, 57344.0, 1, 0};

/* Rounds v to the nearest value of format f (ties to even) and encodes it. */
static uint32_t mf_encode(double v, const mf_t *f) {
  uint32_t sign = signbit(v) ? 1u : 0u;
  int sshift = f->ebits + f->mbits;
  uint32_t emax = (1u << f->ebits) - 1u;
  if (isnan(v))
    return (sign << sshift) | (emax << f->mbits) | (f->fn ? (1u << f->mbits) - 1u : 1u << (f->mbits - 1));
  double a = fabs(v), r = a;
  if (!isinf(a) && a != 0.0) {
    int e = 0;
    (void)frexp(a, &e); /* a in [2^(e-1), 2^e) */
    int E = e - 1, emin = 1 - f->bias;
    int qe = (E < emin ? emin : E) - f->mbits; /* the quantum's exponent */
    r = ldexp(nearbyint(ldexp(a, -qe)), qe);   /* exact scaling; RNE */
  }
  if (r > f->maxfin) {
    if (f->sat) r = f->maxfin;
    else return (sign << sshift) | (emax << f->mbits); /* infinity */
  }
  if (r == 0.0) return sign << sshift;
  int e = 0;
  (void)frexp(r, &e);
  int E = e - 1;
  uint32_t ef, m;
  if (E < 1 - f->bias) {
    ef = 0;
    m = (uint32_t)ldexp(r, f->bias - 1 + f->mbits);
  } else {
    ef = (uint32_t)(E + f->bias);
    m = (uint32_t)ldexp(r, f->mbits - E) - (1u << f->mbits);
  }
  return (sign << sshift) | (ef << f->mbits) | m;
}

static double mf_decode(uint32_t b, const mf_t *f) {
  int sshift = f->ebits + f->mbits;
  uint32_t emax = (1u << f->ebits) - 1u;
  uint32_t sign = (b >> sshift) & 1u, ef = (b >> f->mbits) & emax;
  uint32_t m = b & ((1u << f->mbits) - 1u);
  double v;
  if (f->fn && ef == emax && m == (1u << f->mbits) - 1u) v = NAN;
  else if (!f->fn && ef == emax) v = m ? NAN : INFINITY;
  else if (ef == 0) v = ldexp((double)m, 1 - f->bias - f->mbits);
  else v = ldexp((double)(m + (1u << f->mbits)), (int)ef - f->bias - f->mbits);
  return sign ? -v : v;
}

static const mf_t *minifloat(ncclDataType_t t) {
  switch (t) {
  case ncclFloat16: return &MF_F16;
  case ncclBfloat16: return &MF_BF16;
  case ncclFloat8e4m3: return &MF_E4M3;
  case ncclFloat8e5m2: return &MF_E5M2;
  default: return NULL;
  }
}

/* Stores v (exact, or rounded to nearest even) as element i. */
static void put(void *buf, size_t i, const tinfo_t *t, double v) {
  const mf_t *f = minifloat(t->t);
  switch (t->t) {
  case ncclInt8: ((int8_t *)buf)[i] = (int8_t)v; break;
  case ncclUint8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
  case ncclInt32: ((int32_t *)buf)[i] = (int32_t)v; break;
  case ncclUint32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
  case ncclInt64: ((int64_t *)buf)[i] = (int64_t)v; break;
  case ncclUint64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
  case ncclFloat32: ((float *)buf)[i] = (float)v; break;
  case ncclFloat64: ((double *)buf)[i] = v; break;
  case ncclFloat16:
  case ncclBfloat16: ((uint16_t *)buf)[i] = (uint16_t)mf_encode(v, f); break;
  default: ((uint8_t *)buf)[i] = (uint8_t)mf_encode(v, f); break;
  }
}

static double get(const void *buf, size_t i, const tinfo_t *t) {
  const mf_t *f = minifloat(t->t);
  switch (t->t) {
  case ncclInt8: return ((const int8_t *)buf)[i];
  case ncclUint8: return ((const uint8_t *)buf)[i];
  case ncclInt32: return ((const int32_t *)buf)[i];
  case ncclUint32: return ((const uint32_t *)buf)[i];
  case ncclInt64: return (double)((const int64_t *)buf)[i];
  case ncclUint64: return (double)((const uint64_t *)buf)[i];
  case ncclFloat32: return ((const float *)buf)[i];
  case ncclFloat64: return ((const double *)buf)[i];
  case ncclFloat16:
  case ncclBfloat16: return mf_decode(((const uint16_t *)buf)[i], f);
  default: return mf_decode(((const uint8_t *)buf)[i], f);
  }
}

/* ---- operations and inputs ------------------------------------------------ */

enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_AVG, OP_PREMUL, NOPS };
static const char *const op_names[NOPS] = {"sum", "prod", "max", "min", "avg", "premulsum"};
static const ncclRedOp_t base_ops[NOPS - 1] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

/* The PreMulSum scalar: 3 for integers, 0.5 for floats. */
static double premul_scalar(const tinfo_t *t) { return t->kind == K_FLT ? 0.5 : 3.0; }

/* Inputs repeat with this period (a prime, so it lines up with no chunking). */
enum { PERIOD = 251 };

/* Input of rank r at element j (mod PERIOD) for a reduction. */
static double xval(int op, const tinfo_t *t, int r, int j) {
  int sgn = t->kind != K_UINT;
  switch (op) {
  case OP_PROD: {
    static const double s[4] = {-2, -1, 1, 2};
    return sgn ? s[(r + j) % 4] : (double)(1 + (r + j) % 2);
  }
  case OP_MAX:
  case OP_MIN: return t->scale * ((r * 13 + j * 7) % 11 - (sgn ? 5 : 0));
  case OP_AVG:
    if (t->kind == K_FLT) return t->scale * nranks * ((r * 7 + j * 3) % 5 - 2);
    return t->scale * ((r * 5 + j * 3) % 7 - (sgn ? 3 : 0)); /* sums: any residue mod n */
  default: /* sum, premulsum */
    return t->scale * ((r * 7 + j * 3) % 5 - (sgn ? 2 : 0));
  }
}

/* The exact result at element j (then rounded by put()). */
static double refval(int op, const tinfo_t *t, int j) {
  double acc = xval(op, t, 0, j);
  for (int r = 1; r < nranks; r++) {
    double x = xval(op, t, r, j);
    switch (op) {
    case OP_PROD: acc *= x; break;
    case OP_MAX: acc = x > acc ? x : acc; break;
    case OP_MIN: acc = x < acc ? x : acc; break;
    default: acc += x; break;
    }
  }
  if (op == OP_PREMUL) acc *= premul_scalar(t);
  if (op == OP_AVG) {
    if (t->kind == K_SINT) acc = (double)((long long)acc / nranks);
    else if (t->kind == K_UINT) acc = (double)((unsigned long long)acc / (unsigned)nranks);
    else acc = acc / nranks; /* exact: every input is a multiple of n */
  }
  return acc;
}

/* Byte b of rank r's input to a data-movement collective. */
static unsigned char mvbyte(int r, size_t b) {
  uint32_t h = (uint32_t)b * 2654435761u ^ (uint32_t)(r + 1) * 2246822519u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return (unsigned char)(h >> 24);
}

/* ---- buffers --------------------------------------------------------------- */

enum { GUARD = 64 };
#define SENTINEL 0xA5
#define GUARDBYTE 0x5A

typedef struct {
  unsigned char *base; /* from ncclMemAlloc */
  size_t cap;          /* usable bytes */
} buf_t;

static buf_t bufs[2];
static unsigned char *in_tab, *exp_tab; /* [nranks][PERIOD] and [PERIOD] elements */

static void buf_reserve(buf_t *b, size_t bytes) {
  if (b->cap >= bytes && b->base) return;
  if (b->base) CHECK_NCCL(ncclMemFree(b->base));
  void *p = NULL;
  CHECK_NCCL(ncclMemAlloc(&p, bytes + 2 * GUARD));
  CHECK(p != NULL, "ncclMemAlloc gave NULL for %zu bytes", bytes + 2 * GUARD);
  b->base = (unsigned char *)p;
  b->cap = bytes;
}

/* The usable area of b, `bytes` long: sentinel inside, guards around. */
static unsigned char *buf_prep(buf_t *b, size_t bytes) {
  buf_reserve(b, bytes);
  memset(b->base, GUARDBYTE, GUARD);
  memset(b->base + GUARD, SENTINEL, bytes);
  memset(b->base + GUARD + bytes, GUARDBYTE, GUARD);
  return b->base + GUARD;
}

static void buf_guards(const buf_t *b, size_t bytes, const char *ctx) {
  for (size_t i = 0; i < GUARD; i++) {
    CHECK(b->base[i] == GUARDBYTE, "%s: guard byte %zu before the buffer was overwritten",
          ctx, GUARD - i);
    CHECK(b->base[GUARD + bytes + i] == GUARDBYTE,
          "%s: guard byte %zu after the %zu-byte buffer was overwritten", ctx, i, bytes);
  }
}

/* dst[0..count) = tab[(first + i) % PERIOD] (element size esz). */
static void fill_periodic(unsigned char *dst, size_t count, size_t first,
                          const unsigned char *tab, size_t esz) {
  size_t i = 0, j = first % PERIOD;
  while (i < count) {
    size_t k = PERIOD - j < count - i ? PERIOD - j : count - i;
    memcpy(dst + i * esz, tab + j * esz, k * esz);
    i += k;
    j = 0;
  }
}

static void expect_periodic(const unsigned char *got, size_t count, size_t first,
                            const unsigned char *tab, const tinfo_t *t, const char *ctx,
                            const char *what) {
  size_t esz = t->size, i = 0, j = first % PERIOD;
  while (i < count) {
    size_t k = PERIOD - j < count - i ? PERIOD - j : count - i;
    if (memcmp(got + i * esz, tab + j * esz, k * esz) != 0) {
      for (size_t e = 0; e < k; e++)
        if (memcmp(got + (i + e) * esz, tab + (j + e) * esz, esz) != 0) {
          unsigned long long gb = 0, wb = 0;
          memcpy(&gb, got + (i + e) * esz, esz);
          memcpy(&wb, tab + (j + e) * esz, esz);
          CHECK(gb == wb, "%s: %s element %zu is %.17g (bits 0x%llx), want %.17g (bits 0x%llx)",
                ctx, what, i + e, get(got, i + e, t), gb, get(tab, j + e, t), wb);
        }
    }
    i += k;
    j = 0;
  }
}

static void fill_mv(unsigned char *dst, size_t bytes, int r, size_t first) {
  for (size_t b = 0; b < bytes; b++) dst[b] = mvbyte(r, first + b);
}

static void expect_mv(const unsigned char *got, size_t bytes, int r, size_t first,
                      const char *ctx, const char *what) {
  for (size_t b = 0; b < bytes; b++)
    CHECK(got[b] == mvbyte(r, first + b), "%s: %s byte %zu is 0x%02x, want 0x%02x (rank %d's "
          "byte %zu)", ctx, what, b, got[b], mvbyte(r, first + b), r, first + b);
}

static void expect_bytes(const unsigned char *got, size_t bytes, unsigned char v,
                         const char *ctx, const char *what) {
  for (size_t b = 0; b < bytes; b++)
    CHECK(got[b] == v, "%s: %s byte %zu is 0x%02x, want it untouched (0x%02x)", ctx, what, b,
          got[b], v);
}

/* ---- the collectives ------------------------------------------------------ */

enum { C_ALLREDUCE, C_REDUCE, C_REDUCESCATTER, C_BROADCAST, C_BCAST, C_ALLGATHER,
       C_ALLTOALL, C_GATHER, C_SCATTER, NCOLLS };
static const char *const coll_names[NCOLLS] = {
    "AllReduce", "Reduce", "ReduceScatter", "Broadcast", "Bcast",
    "AllGather", "AlltoAll", "Gather", "Scatter"};
static int is_reduction(int c) { return c <= C_REDUCESCATTER; }

/* How a call is made: 0 plain, 1 the *Config variant with a NULL config,
 * 2 the *Config variant with NCCL_COLLCONFIG_INITIALIZER. */
static ncclResult_t call(int c, int how, const void *s, void *r, size_t count,
                         ncclDataType_t t, ncclRedOp_t op, int root) {
  ncclCollConfig_t cfg = NCCL_COLLCONFIG_INITIALIZER;
  const ncclCollConfig_t *cp = how == 2 ? &cfg : NULL;
  if (how == 0 || c == C_BCAST) {
    switch (c) {
    case C_ALLREDUCE: return ncclAllReduce(s, r, count, t, op, comm, NULL);
    case C_REDUCE: return ncclReduce(s, r, count, t, op, root, comm, NULL);
    case C_REDUCESCATTER: return ncclReduceScatter(s, r, count, t, op, comm, NULL);
    case C_BROADCAST: return ncclBroadcast(s, r, count, t, root, comm, NULL);
    case C_BCAST: return ncclBcast(r, count, t, root, comm, NULL);
    case C_ALLGATHER: return ncclAllGather(s, r, count, t, comm, NULL);
    case C_ALLTOALL: return ncclAlltoAll(s, r, count, t, comm, NULL);
    case C_GATHER: return ncclGather(s, r, count, t, root, comm, NULL);
    default: return ncclScatter(s, r, count, t, root, comm, NULL);
    }
  }
  switch (c) {
  case C_ALLREDUCE: return ncclAllReduceConfig(s, r, count, t, op, comm, NULL, cp);
  case C_REDUCE: return ncclReduceConfig(s, r, count, t, op, root, comm, NULL, cp);
  case C_REDUCESCATTER: return ncclReduceScatterConfig(s, r, count, t, op, comm, NULL, cp);
  case C_BROADCAST: return ncclBroadcastConfig(s, r, count, t, root, comm, NULL, cp);
  case C_ALLGATHER: return ncclAllGatherConfig(s, r, count, t, comm, NULL, cp);
  case C_ALLTOALL: return ncclAlltoAllConfig(s, r, count, t, comm, NULL, cp);
  case C_GATHER: return ncclGatherConfig(s, r, count, t, root, comm, NULL, cp);
  default: return ncclScatterConfig(s, r, count, t, root, comm, NULL, cp);
  }
}

/* One case: collective c on type t with op (reductions only), count
 * elements (per block), in place or not, called as `how`, at `root`. */
static void run_case(int c, const tinfo_t *t, int op, ncclRedOp_t nop, size_t count,
                     int inplace, int how, int root) {
  char ctx[200];
  snprintf(ctx, sizeof ctx, "nccl%s%s %s %s count %zu %s root %d (%d ranks)",
           coll_names[c], how ? (how == 1 ? "Config(NULL)" : "Config(init)") : "", t->name,
           is_reduction(c) ? op_names[op] : "-", count,
           inplace ? "in-place" : "out-of-place", root, nranks);
  const size_t esz = t->size, n = (size_t)nranks, me = (size_t)rank;
  const size_t blk = count * esz;
  const int red = is_reduction(c);
  const int rooted = c == C_REDUCE || c == C_BROADCAST || c == C_BCAST || c == C_GATHER ||
                     c == C_SCATTER;
  const int am_root = rooted && rank == root;
  /* Sizes (bytes) of the send and receive areas this rank uses. */
  size_t sbytes = blk, rbytes = blk;
  switch (c) {
  case C_REDUCESCATTER: sbytes = n * blk; break;
  case C_ALLGATHER: rbytes = n * blk; break;
  case C_ALLTOALL: sbytes = rbytes = n * blk; break;
  case C_GATHER: rbytes = n * blk; break;
  case C_SCATTER: sbytes = n * blk; break;
  default: break;
  }
  if (red) {
    for (int r = 0; r < nranks; r++)
      for (int j = 0; j < PERIOD; j++) put(in_tab + (size_t)r * PERIOD * esz, (size_t)j, t,
                                           xval(op, t, r, j));
    for (int j = 0; j < PERIOD; j++) put(exp_tab, (size_t)j, t, refval(op, t, j));
  }
  const unsigned char *my_in = in_tab + me * PERIOD * esz;

  /* Set up the buffers: `sp`/`rp` are what the call gets. */
  unsigned char *sp = NULL, *rp = NULL, *rarea = NULL, *sarea = NULL;
  size_t rarea_bytes = 0, sarea_bytes = 0;
  int null_bufs = count == 0 && !inplace; /* count 0: NULL buffers are fine */
  if (!inplace) {
    sarea = buf_prep(&bufs[0], sbytes);
    sarea_bytes = sbytes;
    rarea = buf_prep(&bufs[1], rbytes);
    rarea_bytes = rbytes;
    sp = sarea;
    rp = rarea;
    if (red) fill_periodic(sarea, sbytes / esz, 0, my_in, esz);
    else fill_mv(sarea, sbytes, rank, 0);
  } else {
    /* One buffer; the send area sits where NCCL's in-place rule puts it. */
    switch (c) {
    case C_ALLREDUCE:
    case C_REDUCE:
    case C_BROADCAST:
    case C_BCAST:
    case C_ALLTOALL:
      rarea = buf_prep(&bufs[1], rbytes);
      rarea_bytes = rbytes;
      sp = rp = rarea;
      if (red) fill_periodic(rarea, count, 0, my_in, esz);
      else if (c != C_BROADCAST && c != C_BCAST) fill_mv(rarea, rbytes, rank, 0);
      else if (am_root) fill_mv(rarea, rbytes, rank, 0);
      break;
    case C_REDUCESCATTER:
      rarea = buf_prep(&bufs[1], sbytes);
      rarea_bytes = sbytes;
      sp = rarea;
      rp = rarea + me * blk;
      fill_periodic(rarea, n * count, 0, my_in, esz);
      break;
    case C_ALLGATHER:
      rarea = buf_prep(&bufs[1], rbytes);
      rarea_bytes = rbytes;
      rp = rarea;
      sp = rarea + me * blk;
      fill_mv(sp, blk, rank, 0);
      break;
    case C_GATHER:
      if (am_root) {
        rarea = buf_prep(&bufs[1], rbytes);
        rarea_bytes = rbytes;
        rp = rarea;
        sp = rarea + me * blk;
      } else { /* a non-root's recvbuff is unused: NULL */
        sarea = buf_prep(&bufs[0], sbytes);
        sarea_bytes = sbytes;
        sp = sarea;
      }
      fill_mv(sp, blk, rank, 0);
      break;
    default: /* C_SCATTER */
      if (am_root) {
        rarea = buf_prep(&bufs[1], sbytes);
        rarea_bytes = sbytes;
        sp = rarea;
        rp = rarea + me * blk;
        fill_mv(rarea, sbytes, rank, 0);
      } else { /* a non-root's sendbuff is unused: NULL */
        rarea = buf_prep(&bufs[1], rbytes);
        rarea_bytes = rbytes;
        rp = rarea;
      }
      break;
    }
  }
  if (null_bufs) sp = rp = NULL;

  CHECK_NCCL(call(c, how, sp, rp, count, t->t, nop, root));
  ncases++;

  /* Results. */
  if (null_bufs) {
    expect_bytes(sarea, sbytes, SENTINEL, ctx, "unused sendbuff");
  } else {
    switch (c) {
    case C_ALLREDUCE:
      expect_periodic(rp, count, 0, exp_tab, t, ctx, "recvbuff");
      break;
    case C_REDUCE:
      if (am_root) expect_periodic(rp, count, 0, exp_tab, t, ctx, "root's recvbuff");
      else if (!inplace) expect_bytes(rp, rbytes, SENTINEL, ctx, "non-root's recvbuff");
      break;
    case C_REDUCESCATTER:
      expect_periodic(rp, count, me * count, exp_tab, t, ctx, "recvbuff");
      break;
    case C_BROADCAST:
    case C_BCAST:
      expect_mv(rp, blk, root, 0, ctx, "recvbuff");
      break;
    case C_ALLGATHER:
    case C_ALLTOALL:
      for (size_t q = 0; q < n; q++) {
        char what[64];
        snprintf(what, sizeof what, "recvbuff block %zu", q);
        expect_mv(rp + q * blk, blk, (int)q, c == C_ALLTOALL ? me * blk : 0, ctx, what);
      }
      break;
    case C_GATHER:
      if (am_root)
        for (size_t q = 0; q < n; q++) {
          char what[64];
          snprintf(what, sizeof what, "root's recvbuff block %zu", q);
          expect_mv(rp + q * blk, blk, (int)q, 0, ctx, what);
        }
      else if (!inplace) expect_bytes(rarea, rbytes, SENTINEL, ctx, "non-root's recvbuff");
      break;
    default: /* C_SCATTER */
      expect_mv(rp, blk, root, me * blk, ctx, "recvbuff");
      break;
    }
    /* Out of place, the sendbuff is read only. */
    if (!inplace && c != C_BCAST) {
      if (red) expect_periodic(sarea, sbytes / esz, 0, my_in, t, ctx, "sendbuff (changed)");
      else expect_mv(sarea, sbytes, rank, 0, ctx, "sendbuff (changed)");
    }
  }
  if (sarea) buf_guards(&bufs[0], sarea_bytes, ctx);
  if (rarea) buf_guards(&bufs[1], rarea_bytes, ctx);
}

/* ---- the matrix ------------------------------------------------------------ */

static void test_matrix(int quick) {
  const size_t small_counts[] = {0, 1, 1031};
  const size_t large_bytes = (size_t)2 << 20; /* 2 MiB (+ 3 elements) */
  int serial = 0;
  for (int c = 0; c < NCOLLS; c++) {
    double t0 = nt_now();
    long before = ncases;
    for (int ti = 0; ti < NTYPES; ti++) {
      const tinfo_t *t = &types[ti];
      ncclRedOp_t premul;
      unsigned char scalar[8];
      put(scalar, 0, t, premul_scalar(t));
      CHECK_NCCL(ncclRedOpCreatePreMulSum(&premul, scalar, t->t, ncclScalarHostImmediate, comm));
      CHECK(premul >= ncclNumOps, "PreMulSum op %d is below ncclNumOps", (int)premul);
      memset(scalar, 0, sizeof scalar); /* read at creation: must not matter */
      int nops = is_reduction(c) ? NOPS : 1;
      for (int op = 0; op < nops; op++) {
        ncclRedOp_t nop = op == OP_PREMUL ? premul : op < OP_PREMUL ? base_ops[op] : ncclSum;
        for (int k = 0; k < 4; k++) {
          size_t count;
          if (k < 3) count = small_counts[k];
          else if (quick) continue;
          else if (c == C_REDUCESCATTER || c >= C_ALLGATHER) /* a few MB in all */
            count = large_bytes / (t->size * (size_t)nranks) + 3;
          else count = large_bytes / t->size + 3;
          for (int inplace = c == C_BCAST; inplace < 2; inplace++) { /* Bcast: one buffer */
            int how = (k + inplace + op) % 3; /* every variant on every collective */
            int root = serial++ % nranks;
            run_case(c, t, op, nop, count, inplace, how, root);
          }
        }
      }
      CHECK_NCCL(ncclRedOpDestroy(premul, comm));
    }
    char name[96];
    snprintf(name, sizeof name, "%s: %ld cases in %.2f s", coll_names[c], ncases - before,
             nt_now() - t0);
    test_pass(name);
  }
}

/* Single roundings, and overflow: only ranks 0 and 1 contribute (others
 * add zeros), so the one rounding is the same in any order. */
static void test_rounding(void) {
  struct {
    ncclDataType_t t;
    double a, b; /* rank 0, rank 1 */
  } cases[] = {
      {ncclFloat16, 2048, 1},   {ncclFloat16, 2048, 3},   {ncclFloat16, 1, 0.00048828125},
      {ncclFloat16, 1, 0.000732421875},
      {ncclFloat16, 32768, 32768}, /* 65536: infinity */
      {ncclBfloat16, 256, 1},   {ncclBfloat16, 256, 3},   {ncclBfloat16, 1, 1.0 / 256},
      {ncclFloat8e4m3, 16, 1},  {ncclFloat8e4m3, 16, 3},  {ncclFloat8e4m3, 256, 256},
      {ncclFloat8e4m3, 448, 32}, /* 480 saturates to 448 */
      {ncclFloat8e5m2, 8, 1},   {ncclFloat8e5m2, 8, 3},   {ncclFloat8e5m2, 32768, 32768},
      {ncclFloat8e5m2, 57344, 8192},
  };
  const int ncs = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < ncs; i++) {
    const tinfo_t *t = NULL;
    for (int k = 0; k < NTYPES; k++)
      if (types[k].t == cases[i].t) t = &types[k];
    CHECK(t != NULL, "no type %d", (int)cases[i].t);
    double mine = rank == 0 ? cases[i].a : rank == 1 ? cases[i].b : 0.0;
    double want = nranks > 1 ? cases[i].a + cases[i].b : cases[i].a;
    unsigned char in[8 * 3], out[8 * 3], wantb[8];
    for (int e = 0; e < 3; e++) put(in, (size_t)e, t, mine);
    CHECK(get(in, 0, t) == mine, "case %d: input %g is not exact in %s", i, mine, t->name);
    memset(out, SENTINEL, sizeof out);
    CHECK_NCCL(ncclAllReduce(in, out, 3, t->t, ncclSum, comm, NULL));
    put(wantb, 0, t, want);
    for (int e = 0; e < 3; e++)
      CHECK(memcmp(out + (size_t)e * t->size, wantb, t->size) == 0,
            "%s sum of %g and %g: element %d is %g, want %g (%g rounded to nearest even%s)",
            t->name, cases[i].a, nranks > 1 ? cases[i].b : 0.0, e, get(out, (size_t)e, t),
            get(wantb, 0, t), want, t->t == ncclFloat8e4m3 || t->t == ncclFloat8e5m2
                                        ? ", saturating" : "");
    ncases++;
  }
  test_pass("rounding and overflow of f16, bf16, fp8 sums");
}

/* When a PreMulSum scalar is read. */
static void test_premul_residence(void) {
  for (int ti = 0; ti < NTYPES; ti++) {
    const tinfo_t *t = &types[ti];
    unsigned char sdev[8], simm[8], in[8 * 5], out[8 * 5], want[8];
    ncclRedOp_t odev, oimm;
    put(sdev, 0, t, 1.0);
    put(simm, 0, t, 2.0);
    CHECK_NCCL(ncclRedOpCreatePreMulSum(&odev, sdev, t->t, ncclScalarDevice, comm));
    CHECK_NCCL(ncclRedOpCreatePreMulSum(&oimm, simm, t->t, ncclScalarHostImmediate, comm));
    CHECK(odev != oimm, "two PreMulSum ops got the same handle %d", (int)odev);
    put(sdev, 0, t, 2.0); /* ncclScalarDevice: read at the call */
    put(simm, 0, t, 4.0); /* ncclScalarHostImmediate: read at creation */
    for (int e = 0; e < 5; e++) put(in, (size_t)e, t, (double)(1 + e % 2));
    for (int pass = 0; pass < 2; pass++) {
      memset(out, SENTINEL, sizeof out);
      CHECK_NCCL(ncclAllReduce(in, out, 5, t->t, pass ? oimm : odev, comm, NULL));
      for (int e = 0; e < 5; e++) {
        put(want, 0, t, 2.0 * (1 + e % 2) * nranks);
        CHECK(memcmp(out + (size_t)e * t->size, want, t->size) == 0,
              "%s PreMulSum (%s, scalar 2 at the call%s): element %d is %g, want %g", t->name,
              pass ? "ncclScalarHostImmediate" : "ncclScalarDevice",
              pass ? ", 4 afterwards" : ", 1 at creation", e, get(out, (size_t)e, t),
              get(want, 0, t));
      }
      ncases++;
    }
    CHECK_NCCL(ncclRedOpDestroy(odev, comm));
    CHECK_NCCL(ncclRedOpDestroy(oimm, comm));
  }
  test_pass("PreMulSum scalar residence (device: at the call; host: at creation)");
}

/* The encoders themselves, on known bit patterns. */
static void test_encoders(void) {
  struct {
    const mf_t *f;
    double v;
    uint32_t bits;
  } k[] = {
      {&MF_F16, 1.0, 0x3c00},      {&MF_F16, -2.0, 0xc000},     {&MF_F16, 65504.0, 0x7bff},
      {&MF_F16, 65520.0, 0x7c00},  {&MF_F16, 5.960464477539063e-08, 0x0001},
      {&MF_F16, 2049.0, 0x6800},   {&MF_F16, 2051.0, 0x6802},   {&MF_BF16, 1.0, 0x3f80},
      {&MF_BF16, 257.0, 0x4380},   {&MF_BF16, 259.0, 0x4382},   {&MF_E4M3, 1.0, 0x38},
      {&MF_E4M3, 448.0, 0x7e},     {&MF_E4M3, 1000.0, 0x7e},    {&MF_E4M3, -448.0, 0xfe},
      {&MF_E4M3, 0.001953125, 0x01}, {&MF_E5M2, 1.0, 0x3c},     {&MF_E5M2, 57344.0, 0x7b},
      {&MF_E5M2, 1e6, 0x7b},       {&MF_E5M2, 1.52587890625e-05, 0x01},
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    uint32_t b = mf_encode(k[i].v, k[i].f);
    CHECK(b == k[i].bits, "encoder: %g -> 0x%x, want 0x%x", k[i].v, b, k[i].bits);
  }
  /* Every pattern decodes and encodes back to itself (NaNs aside). */
  const mf_t *fs[4] = {&MF_F16, &MF_BF16, &MF_E4M3, &MF_E5M2};
  for (int f = 0; f < 4; f++) {
    uint32_t top = 1u << (fs[f]->ebits + fs[f]->mbits + 1);
    for (uint32_t b = 0; b < top; b++) {
      double v = mf_decode(b, fs[f]);
      if (isnan(v) || (isinf(v) && fs[f]->sat)) continue; /* sat: inf -> max */
      CHECK(mf_encode(v, fs[f]) == b, "encoder format %d: 0x%x -> %g -> 0x%x", f, b, v,
            mf_encode(v, fs[f]));
    }
  }
  test_pass("reference encoders");
}

int main(int argc, char **argv) {
  comm = nt_init(&argc, &argv, &rank, &nranks);
  int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
  in_tab = (unsigned char *)malloc((size_t)nranks * PERIOD * 8);
  exp_tab = (unsigned char *)malloc(PERIOD * 8);
  CHECK(in_tab && exp_tab, "malloc");
  int version = 0;
  CHECK_NCCL(ncclGetVersion(&version));
  CHECK(version >= 22800, "ncclGetVersion says %d: AlltoAll/Gather/Scatter need 2.28", version);

  double t0 = nt_now();
  test_encoders();
  test_rounding();
  test_premul_residence();
  test_matrix(quick);
  nt_check_allreduce(comm, "the matrix");

  for (int i = 0; i < 2; i++)
    if (bufs[i].base) CHECK_NCCL(ncclMemFree(bufs[i].base));
  free(in_tab);
  free(exp_tab);
  CHECK_NCCL(ncclCommFinalize(comm));
  CHECK_NCCL(ncclCommDestroy(comm));
  if (rank == 0) printf("t_nccl_coll: %ld cases at %d ranks in %.2f s\n", ncases, nranks,
                        nt_now() - t0);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
