/* Every predefined datatype x every predefined reduction op, in Allreduce and
 * Reduce. The table below records which combinations MPICH 4.0.2 accepts
 * (found by calling each one under MPI_ERRORS_RETURN): those must produce the
 * value of a naive rank-order fold computed here, and the rest must fail with
 * MPI_ERR_OP, as MPICH's do. Values are small integers so that no sum or
 * product overflows at any rank count and floating-point results are exact.
 * Logical ops use 0, 1 and 2, so a library that forgets to normalise to 0/1
 * (or normalises the single-rank case, which is a plain copy) is caught.
 * MINLOC/MAXLOC data has many ties, with indices not in rank order, so the
 * smaller-index rule is checked rather than "lowest rank wins". */
#include "testutil.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
typedef bool cbool;
#else
typedef _Bool cbool;
#endif

static int rank, size;

enum {
  O_MAX, O_MIN, O_SUM, O_PROD, O_LAND, O_BAND, O_LOR, O_BOR, O_LXOR, O_BXOR,
  O_MINLOC, O_MAXLOC, O_REPLACE, O_NO_OP, NOPS
};

typedef struct {
  MPI_Op op;
  const char *name;
} opinfo;

static const opinfo ops[NOPS] = {
    {MPI_MAX, "MPI_MAX"},       {MPI_MIN, "MPI_MIN"},       {MPI_SUM, "MPI_SUM"},
    {MPI_PROD, "MPI_PROD"},     {MPI_LAND, "MPI_LAND"},     {MPI_BAND, "MPI_BAND"},
    {MPI_LOR, "MPI_LOR"},       {MPI_BOR, "MPI_BOR"},       {MPI_LXOR, "MPI_LXOR"},
    {MPI_BXOR, "MPI_BXOR"},     {MPI_MINLOC, "MPI_MINLOC"}, {MPI_MAXLOC, "MPI_MAXLOC"},
    {MPI_REPLACE, "MPI_REPLACE"}, {MPI_NO_OP, "MPI_NO_OP"},
};

#define BIT(o) (1u << (o))
/* What MPICH 4.0.2 accepts in Reduce and Allreduce (identical for both).
 * REPLACE and NO_OP are rejected for every type: they are for one-sided
 * accumulates only. */
#define INT_OPS                                                              \
  (BIT(O_MAX) | BIT(O_MIN) | BIT(O_SUM) | BIT(O_PROD) | BIT(O_LAND) |        \
   BIT(O_BAND) | BIT(O_LOR) | BIT(O_BOR) | BIT(O_LXOR) | BIT(O_BXOR))
#define FLOAT_OPS (BIT(O_MAX) | BIT(O_MIN) | BIT(O_SUM) | BIT(O_PROD) | BIT(O_LXOR))
#define BYTE_OPS (BIT(O_BAND) | BIT(O_BOR) | BIT(O_BXOR))
#define BOOL_OPS (BIT(O_LAND) | BIT(O_LOR) | BIT(O_LXOR))
#define PAIR_OPS (BIT(O_MINLOC) | BIT(O_MAXLOC))
/* MPICH's argument check passes LAND and LOR on floating types, but its
 * kernel then fails an assertion and aborts the job, so there is no answer to
 * match: neither accepted nor rejected is checked for these. */
#define FLOAT_UNTESTED (BIT(O_LAND) | BIT(O_LOR))

/* How element values are stored and generated. */
enum { C_SINT, C_UINT, C_FLT, C_BOOL, C_PAIR };

typedef struct { float v; int i; } float_int;
typedef struct { double v; int i; } double_int;
typedef struct { long v; int i; } long_int;
typedef struct { short v; int i; } short_int;
typedef struct { int v; int i; } two_int;
typedef struct { long double v; int i; } ldouble_int;

typedef struct {
  MPI_Datatype type;
  const char *name;
  int cls;
  size_t size;     /* extent: sizeof the C type (the struct, for pairs) */
  int vcls;        /* pairs: class of the value field */
  size_t vsize;    /* pairs: sizeof the value field */
  size_t ioff;     /* pairs: offset of the int index */
  unsigned accepted;
  unsigned untested;
} typeinfo;

#define SCALAR(t, ct, cls, acc, unt) {t, #t, cls, sizeof(ct), cls, sizeof(ct), 0, acc, unt}
#define PAIR(t, st, vc)                                                        \
  {t, #t, C_PAIR, sizeof(st), vc, sizeof(((st *)0)->v), offsetof(st, i), PAIR_OPS, 0}

static const typeinfo types[] = {
    /* MPI_CHAR's signedness is the platform's: only non-negative values. */
    SCALAR(MPI_CHAR, char, C_UINT, INT_OPS, 0),
    SCALAR(MPI_SIGNED_CHAR, signed char, C_SINT, INT_OPS, 0),
    SCALAR(MPI_UNSIGNED_CHAR, unsigned char, C_UINT, INT_OPS, 0),
    SCALAR(MPI_BYTE, unsigned char, C_UINT, BYTE_OPS, 0),
    SCALAR(MPI_WCHAR, wchar_t, C_UINT, 0, 0),
    SCALAR(MPI_SHORT, short, C_SINT, INT_OPS, 0),
    SCALAR(MPI_UNSIGNED_SHORT, unsigned short, C_UINT, INT_OPS, 0),
    SCALAR(MPI_INT, int, C_SINT, INT_OPS, 0),
    SCALAR(MPI_UNSIGNED, unsigned, C_UINT, INT_OPS, 0),
    SCALAR(MPI_LONG, long, C_SINT, INT_OPS, 0),
    SCALAR(MPI_UNSIGNED_LONG, unsigned long, C_UINT, INT_OPS, 0),
    SCALAR(MPI_LONG_LONG, long long, C_SINT, INT_OPS, 0),
    SCALAR(MPI_UNSIGNED_LONG_LONG, unsigned long long, C_UINT, INT_OPS, 0),
    SCALAR(MPI_FLOAT, float, C_FLT, FLOAT_OPS, FLOAT_UNTESTED),
    SCALAR(MPI_DOUBLE, double, C_FLT, FLOAT_OPS, FLOAT_UNTESTED),
    SCALAR(MPI_LONG_DOUBLE, long double, C_FLT, FLOAT_OPS, FLOAT_UNTESTED),
    SCALAR(MPI_INT8_T, int8_t, C_SINT, INT_OPS, 0),
    SCALAR(MPI_INT16_T, int16_t, C_SINT, INT_OPS, 0),
    SCALAR(MPI_INT32_T, int32_t, C_SINT, INT_OPS, 0),
    SCALAR(MPI_INT64_T, int64_t, C_SINT, INT_OPS, 0),
    SCALAR(MPI_UINT8_T, uint8_t, C_UINT, INT_OPS, 0),
    SCALAR(MPI_UINT16_T, uint16_t, C_UINT, INT_OPS, 0),
    SCALAR(MPI_UINT32_T, uint32_t, C_UINT, INT_OPS, 0),
    SCALAR(MPI_UINT64_T, uint64_t, C_UINT, INT_OPS, 0),
    SCALAR(MPI_C_BOOL, cbool, C_BOOL, BOOL_OPS, 0),
    SCALAR(MPI_AINT, MPI_Aint, C_SINT, INT_OPS, 0),
    SCALAR(MPI_OFFSET, MPI_Offset, C_SINT, INT_OPS, 0),
    SCALAR(MPI_COUNT, MPI_Count, C_SINT, INT_OPS, 0),
    PAIR(MPI_FLOAT_INT, float_int, C_FLT),
    PAIR(MPI_DOUBLE_INT, double_int, C_FLT),
    PAIR(MPI_LONG_INT, long_int, C_SINT),
    PAIR(MPI_SHORT_INT, short_int, C_SINT),
    PAIR(MPI_2INT, two_int, C_SINT),
    PAIR(MPI_LONG_DOUBLE_INT, ldouble_int, C_FLT),
};
enum { NTYPES = sizeof types / sizeof types[0] };

/* Stores an integer value into a field of the given class and size. Float
 * fields only ever hold small integers, so the conversion is exact. */
static void store(void *p, int cls, size_t sz, long long v) {
  if (cls == C_FLT) {
    if (sz == sizeof(float)) { float f = (float)v; memcpy(p, &f, sz); }
    else if (sz == sizeof(double)) { double d = (double)v; memcpy(p, &d, sz); }
    else { long double d = (long double)v; memcpy(p, &d, sizeof d); }
    return;
  }
  switch (sz) {
  case 1: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
  case 2: { int16_t x = (int16_t)v; memcpy(p, &x, 2); break; }
  case 4: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
  default: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
  }
}

/* Reads a field back; *exact is cleared if a float holds a non-integer. */
static long long load(const void *p, int cls, size_t sz, int *exact) {
  if (cls == C_FLT) {
    long double d;
    if (sz == sizeof(float)) { float f; memcpy(&f, p, sz); d = f; }
    else if (sz == sizeof(double)) { double x; memcpy(&x, p, sz); d = x; }
    else memcpy(&d, p, sizeof d);
    long long v = (long long)d;
    if ((long double)v != d) *exact = 0;
    return v;
  }
  switch (sz) {
  case 1: {
    if (cls == C_SINT) { int8_t x; memcpy(&x, p, 1); return x; }
    uint8_t x; memcpy(&x, p, 1); return x;
  }
  case 2: {
    if (cls == C_SINT) { int16_t x; memcpy(&x, p, 2); return x; }
    uint16_t x; memcpy(&x, p, 2); return x;
  }
  case 4: {
    if (cls == C_SINT) { int32_t x; memcpy(&x, p, 4); return x; }
    uint32_t x; memcpy(&x, p, 4); return x;
  }
  default: { int64_t x; memcpy(&x, p, 8); return x; }
  }
}

/* Rank r's value for element i under op o. Unsigned classes get
 * non-negative values only. */
static long long gen(int cls, int o, int r, long i) {
  int sgn = cls == C_SINT || cls == C_FLT;
  switch (o) {
  case O_LAND: case O_LOR: case O_LXOR: {
    long long v = i % 4 == 0 ? 1 + r % 2 : (r * 3 + i) % 3;
    return cls == C_BOOL ? v != 0 : v;
  }
  case O_BAND: case O_BOR: case O_BXOR: {
    long long v = (r * 37 + i * 11 + 5) % 128;
    return sgn ? v - 64 : v;
  }
  case O_MAX: case O_MIN: {
    long long v = (r * 5 + i * 3) % 11;
    return sgn ? v - 5 : v;
  }
  case O_SUM:
    return sgn ? (r * 7 + i * 3) % 7 - 3 : (r * 7 + i * 3) % 4;
  default: /* O_PROD: at most two ranks contribute a factor other than 1 */
    if (i % size == r) return sgn && (i / size) % 2 ? -2 : 2;
    if ((i / size) % size == r) return 3;
    return 1;
  }
}

static long long apply(int o, long long a, long long b) {
  switch (o) {
  case O_MAX: return a > b ? a : b;
  case O_MIN: return a < b ? a : b;
  case O_SUM: return a + b;
  case O_PROD: return a * b;
  case O_LAND: return a && b;
  case O_BAND: return a & b;
  case O_LOR: return a || b;
  case O_BOR: return a | b;
  case O_LXOR: return !a != !b;
  default: return a ^ b;
  }
}

/* Pair data: values -1..1 (many ties), indices falling with rank. */
static long long pair_val(int r, long i) { return (r + i) % 3 - 1; }
static int pair_idx(int r, long i) { return (size - 1 - r) * 2 + (int)(i % 2); }

static void fill(const typeinfo *t, int o, int r, void *buf, long n) {
  for (long i = 0; i < n; i++) {
    char *e = (char *)buf + (size_t)i * t->size;
    if (t->cls == C_PAIR) {
      memset(e, 0, t->size);
      store(e, t->vcls, t->vsize, pair_val(r, i));
      int idx = pair_idx(r, i);
      memcpy(e + t->ioff, &idx, sizeof idx);
    } else {
      store(e, t->cls, t->size, gen(t->cls, o, r, i));
    }
  }
}

static void verify(const typeinfo *t, int o, const void *buf, long n, const char *coll) {
  for (long i = 0; i < n; i++) {
    const char *e = (const char *)buf + (size_t)i * t->size;
    int exact = 1;
    if (t->cls == C_PAIR) {
      long long wv = pair_val(0, i);
      int wi = pair_idx(0, i);
      for (int r = 1; r < size; r++) {
        long long v = pair_val(r, i);
        int x = pair_idx(r, i);
        int better = o == O_MINLOC ? v < wv : v > wv;
        if (better || (v == wv && x < wi)) { wv = v; wi = x; }
      }
      long long gv = load(e, t->vcls, t->vsize, &exact);
      int gi;
      memcpy(&gi, e + t->ioff, sizeof gi);
      CHECK(exact && gv == wv && gi == wi,
            "%s %s %s count %ld: element %ld is (%lld,%d), want (%lld,%d)", coll,
            t->name, ops[o].name, n, i, gv, gi, wv, wi);
    } else {
      long long want = gen(t->cls, o, 0, i);
      for (int r = 1; r < size; r++) want = apply(o, want, gen(t->cls, o, r, i));
      long long got = load(e, t->cls, t->size, &exact);
      CHECK(exact && got == want, "%s %s %s count %ld: element %ld is %lld, want %lld",
            coll, t->name, ops[o].name, n, i, got, want);
    }
  }
}

/* 67: past the tail of any vectorised kernel up to 64 lanes. */
static const long counts[] = {1, 67};
enum { NCOUNTS = sizeof counts / sizeof counts[0] };

static void check_sizes(const typeinfo *t) {
  int sz = -1;
  MPI_Aint lb = -1, extent = -1;
  CHECK_MPI(MPI_Type_size(t->type, &sz));
  CHECK_MPI(MPI_Type_get_extent(t->type, &lb, &extent));
  /* Pair types count only their data bytes in the size, padding in the
   * extent. */
  size_t want = t->cls == C_PAIR ? t->vsize + sizeof(int) : t->size;
  CHECK((size_t)sz == want, "MPI_Type_size(%s) = %d, want %zu", t->name, sz, want);
  CHECK(lb == 0 && (size_t)extent == t->size, "%s: lb %ld extent %ld, want 0 and %zu",
        t->name, (long)lb, (long)extent, t->size);
}

static void test_accepted(const typeinfo *t) {
  static int combo = 0;
  for (int o = 0; o < NOPS; o++) {
    if (!(t->accepted & BIT(o))) continue;
    for (int c = 0; c < NCOUNTS; c++) {
      long n = counts[c];
      char *s = (char *)malloc((size_t)n * t->size);
      char *r = (char *)malloc((size_t)(n + 1) * t->size);
      CHECK(s && r, "malloc");
      fill(t, o, rank, s, n);
      memset(r, 0x5a, (size_t)(n + 1) * t->size);
      CHECK_MPI(MPI_Allreduce(s, r, (int)n, t->type, ops[o].op, MPI_COMM_WORLD));
      verify(t, o, r, n, "allreduce");
      /* The root moves round with every combination. */
      int root = combo++ % size;
      memset(r, 0x5a, (size_t)(n + 1) * t->size);
      CHECK_MPI(MPI_Reduce(s, rank == root ? r : NULL, (int)n, t->type, ops[o].op, root,
                           MPI_COMM_WORLD));
      if (rank == root) verify(t, o, r, n, "reduce");
      /* Nothing past the count may be written. */
      for (size_t b = (size_t)n * t->size; b < (size_t)(n + 1) * t->size; b++)
        CHECK((unsigned char)r[b] == 0x5a, "%s %s: byte %zu past the end written",
              t->name, ops[o].name, b);
      free(s);
      free(r);
    }
  }
}

/* Every combination MPICH rejects must be rejected with MPI_ERR_OP, on every
 * rank (an argument check, so no rank enters the collective). */
static int test_rejected(const typeinfo *t) {
  int n = 0;
  char s[4 * sizeof(ldouble_int)], r[4 * sizeof(ldouble_int)];
  memset(s, 0, sizeof s);
  for (int o = 0; o < NOPS; o++) {
    if ((t->accepted | t->untested) & BIT(o)) continue;
    CHECK_ERR(MPI_Allreduce(s, r, 3, t->type, ops[o].op, MPI_COMM_WORLD), MPI_ERR_OP);
    CHECK_ERR(MPI_Reduce(s, r, 3, t->type, ops[o].op, size - 1, MPI_COMM_WORLD), MPI_ERR_OP);
    n++;
  }
  return n;
}

int main(int argc, char **argv) {
  CHECK_MPI(MPI_Init(&argc, &argv));
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));

  char name[96];
  for (int t = 0; t < NTYPES; t++) {
    check_sizes(&types[t]);
    test_accepted(&types[t]);
    snprintf(name, sizeof name, "ops %s", types[t].name);
    test_pass(name);
  }

  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int rejected = 0;
  for (int t = 0; t < NTYPES; t++) rejected += test_rejected(&types[t]);
  /* Guards the table itself: 34 types x 14 ops = 476, less 253 accepted and
   * 6 untested combinations. */
  CHECK(rejected == 217, "checked %d rejected combinations, expected 217", rejected);
  /* The specific cases named in the standard's op/type tables. */
  float f[2] = {1, 2}, g[2];
  float_int fi[2];
  memset(fi, 0, sizeof fi);
  CHECK_ERR(MPI_Allreduce(f, g, 2, MPI_FLOAT, MPI_BAND, MPI_COMM_WORLD), MPI_ERR_OP);
  CHECK_ERR(MPI_Allreduce(fi, fi + 1, 1, MPI_FLOAT_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_OP);
  CHECK_ERR(MPI_Reduce(f, g, 2, MPI_FLOAT, MPI_REPLACE, 0, MPI_COMM_WORLD), MPI_ERR_OP);
  CHECK_ERR(MPI_Reduce(f, g, 2, MPI_FLOAT, MPI_NO_OP, 0, MPI_COMM_WORLD), MPI_ERR_OP);
  CHECK_ERR(MPI_Allreduce(f, g, 2, MPI_FLOAT, MPI_OP_NULL, MPI_COMM_WORLD), MPI_ERR_OP);
  test_pass("ops rejected");

  /* The communicator is still usable after the rejected calls. */
  int one = 1, total = 0;
  CHECK_MPI(MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(total == size, "allreduce after errors: %d, want %d", total, size);

  CHECK_MPI(MPI_Finalize());
  return 0;
}
