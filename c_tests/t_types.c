/* Datatypes and user ops: sizes, extents and names of every predefined type,
 * contiguous derived types in point-to-point and Bcast, user-defined
 * reduction ops (commutative and not). Runs at any number of ranks. */
#include "testutil.h"

#include <stddef.h>
#include <stdint.h>
#include <wchar.h>

static int rank, size;

struct type_case {
  MPI_Datatype t;
  const char *name; /* what MPI_Type_get_name must say */
  int size;
  long extent;
};

/* Pair types: size is the sum of the members, extent is the C struct's. */
struct float_int { float a; int b; };
struct double_int { double a; int b; };
struct long_int { long a; int b; };
struct short_int { short a; int b; };
struct long_double_int { long double a; int b; };

#define PLAIN(t, ctype) {t, #t, (int)sizeof(ctype), (long)sizeof(ctype)}
#define PAIR(t, st, ta, tb) \
  {t, #t, (int)(sizeof(ta) + sizeof(tb)), (long)sizeof(struct st)}

static void case_predefined(void) {
  const struct type_case cases[] = {
      PLAIN(MPI_CHAR, char),
      PLAIN(MPI_SIGNED_CHAR, signed char),
      PLAIN(MPI_UNSIGNED_CHAR, unsigned char),
      PLAIN(MPI_BYTE, unsigned char),
      PLAIN(MPI_WCHAR, wchar_t),
      PLAIN(MPI_SHORT, short),
      PLAIN(MPI_UNSIGNED_SHORT, unsigned short),
      PLAIN(MPI_INT, int),
      PLAIN(MPI_UNSIGNED, unsigned),
      PLAIN(MPI_LONG, long),
      PLAIN(MPI_UNSIGNED_LONG, unsigned long),
      /* MPI_LONG_LONG is the same handle as MPI_LONG_LONG_INT; MPICH names
       * it by the older name. */
      {MPI_LONG_LONG, "MPI_LONG_LONG_INT", (int)sizeof(long long),
       (long)sizeof(long long)},
      PLAIN(MPI_LONG_LONG_INT, long long),
      PLAIN(MPI_UNSIGNED_LONG_LONG, unsigned long long),
      PLAIN(MPI_FLOAT, float),
      PLAIN(MPI_DOUBLE, double),
      PLAIN(MPI_LONG_DOUBLE, long double),
      PLAIN(MPI_INT8_T, int8_t),
      PLAIN(MPI_INT16_T, int16_t),
      PLAIN(MPI_INT32_T, int32_t),
      PLAIN(MPI_INT64_T, int64_t),
      PLAIN(MPI_UINT8_T, uint8_t),
      PLAIN(MPI_UINT16_T, uint16_t),
      PLAIN(MPI_UINT32_T, uint32_t),
      PLAIN(MPI_UINT64_T, uint64_t),
      PLAIN(MPI_C_BOOL, unsigned char), /* _Bool is one byte here */
      PLAIN(MPI_PACKED, unsigned char),
      PLAIN(MPI_AINT, MPI_Aint),
      PLAIN(MPI_OFFSET, MPI_Offset),
      PLAIN(MPI_COUNT, MPI_Count),
      PAIR(MPI_FLOAT_INT, float_int, float, int),
      PAIR(MPI_DOUBLE_INT, double_int, double, int),
      PAIR(MPI_LONG_INT, long_int, long, int),
      PAIR(MPI_SHORT_INT, short_int, short, int),
      PAIR(MPI_LONG_DOUBLE_INT, long_double_int, long double, int),
      {MPI_2INT, "MPI_2INT", (int)(2 * sizeof(int)), (long)(2 * sizeof(int))},
  };
  const int n = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < n; i++) {
    const struct type_case *c = &cases[i];
    int sz = -1, len = -1;
    MPI_Aint lb = -1, ext = -1;
    char name[MPI_MAX_OBJECT_NAME];
    CHECK_MPI(MPI_Type_size(c->t, &sz));
    CHECK(sz == c->size, "%s: size %d want %d", c->name, sz, c->size);
    CHECK_MPI(MPI_Type_get_extent(c->t, &lb, &ext));
    CHECK(lb == 0 && ext == c->extent, "%s: lb %ld extent %ld want 0 %ld",
          c->name, (long)lb, (long)ext, c->extent);
    memset(name, 'x', sizeof name);
    CHECK_MPI(MPI_Type_get_name(c->t, name, &len));
    CHECK(strcmp(name, c->name) == 0 && len == (int)strlen(c->name),
          "name '%.40s' len %d, want '%s'", name, len, c->name);
  }
  test_pass("predefined_types");
}

/* Each rank's element i of a value. */
static int val(int r, int i) { return r * 1000003 + i * 7 - 5; }

static void case_contiguous(void) {
  MPI_Datatype five, nested, pairs, empty;
  int sz = -1, len = -1;
  MPI_Aint lb = -1, ext = -1;
  char name[MPI_MAX_OBJECT_NAME];
  CHECK_MPI(MPI_Type_contiguous(5, MPI_INT, &five));
  CHECK_MPI(MPI_Type_commit(&five));
  CHECK_MPI(MPI_Type_size(five, &sz));
  CHECK_MPI(MPI_Type_get_extent(five, &lb, &ext));
  CHECK(sz == 20 && lb == 0 && ext == 20, "5 ints: size %d lb %ld extent %ld",
        sz, (long)lb, (long)ext);
  name[0] = 'x';
  CHECK_MPI(MPI_Type_get_name(five, name, &len));
  CHECK(len == 0 && name[0] == '\0', "derived type named '%.20s'", name);

  /* 3 x (4 x (5 ints)) = 60 ints. */
  MPI_Datatype four;
  CHECK_MPI(MPI_Type_contiguous(4, five, &four));
  CHECK_MPI(MPI_Type_contiguous(3, four, &nested));
  CHECK_MPI(MPI_Type_free(&four)); /* nested keeps what it needs */
  CHECK(four == MPI_DATATYPE_NULL, "freed type handle %#x", (unsigned)four);
  CHECK_MPI(MPI_Type_commit(&nested));
  CHECK_MPI(MPI_Type_size(nested, &sz));
  CHECK_MPI(MPI_Type_get_extent(nested, &lb, &ext));
  CHECK(sz == 240 && ext == 240, "nested size %d extent %ld", sz, (long)ext);

  /* Pair elements keep the pair type's padding in the extent. */
  CHECK_MPI(MPI_Type_contiguous(3, MPI_DOUBLE_INT, &pairs));
  CHECK_MPI(MPI_Type_commit(&pairs));
  CHECK_MPI(MPI_Type_size(pairs, &sz));
  CHECK_MPI(MPI_Type_get_extent(pairs, &lb, &ext));
  CHECK(sz == 3 * (int)(sizeof(double) + sizeof(int)) &&
            ext == (MPI_Aint)(3 * sizeof(struct double_int)),
        "3 double_int: size %d extent %ld", sz, (long)ext);

  CHECK_MPI(MPI_Type_contiguous(0, MPI_INT, &empty));
  CHECK_MPI(MPI_Type_commit(&empty));
  CHECK_MPI(MPI_Type_size(empty, &sz));
  CHECK(sz == 0, "empty type size %d", sz);

  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  int out[60], in[70];
  MPI_Status st;
  int c = -1;
  for (int i = 0; i < 60; i++) out[i] = val(rank, i);
  /* 3 elements of 5 ints = 15 ints. */
  for (int i = 0; i < 70; i++) in[i] = -1;
  CHECK_MPI(MPI_Sendrecv(out, 3, five, right, 1, in, 4, five, left, 1,
                         MPI_COMM_WORLD, &st));
  CHECK_MPI(MPI_Get_count(&st, five, &c));
  CHECK(c == 3, "count in 5-int elements %d", c);
  CHECK_MPI(MPI_Get_count(&st, MPI_INT, &c));
  CHECK(c == 15, "count in ints %d", c);
  for (int i = 0; i < 15; i++) CHECK(in[i] == val(left, i), "in[%d]=%d", i, in[i]);
  CHECK(in[15] == -1, "received past 3 elements");
  /* Blocking Send/Recv of derived types around the ring: even ranks send
   * first, odd ranks receive first; every send's receiver is either
   * receiving already or will be after its own send completes. */
  if (size > 1) {
    for (int i = 0; i < 70; i++) in[i] = -1;
    for (int phase = 0; phase < 2; phase++) {
      if ((rank % 2 == 0) == (phase == 0)) {
        CHECK_MPI(MPI_Send(out, 2, five, right, 6, MPI_COMM_WORLD));
      } else {
        CHECK_MPI(MPI_Recv(in, 2, five, left, 6, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Get_count(&st, five, &c));
        CHECK(c == 2 && st.MPI_SOURCE == left, "Recv count %d source %d", c,
              st.MPI_SOURCE);
      }
    }
    for (int i = 0; i < 10; i++) CHECK(in[i] == val(left, i), "Recv in[%d]=%d", i, in[i]);
  }
  /* Sent as a derived type, received as plain ints (same type signature). */
  CHECK_MPI(MPI_Sendrecv(out, 1, nested, right, 2, in, 60, MPI_INT, left, 2,
                         MPI_COMM_WORLD, &st));
  CHECK_MPI(MPI_Get_count(&st, MPI_INT, &c));
  CHECK(c == 60, "nested as ints %d", c);
  CHECK_MPI(MPI_Get_count(&st, five, &c));
  CHECK(c == 12, "nested as 5-int elements %d", c);
  CHECK_MPI(MPI_Get_count(&st, nested, &c));
  CHECK(c == 1, "nested as nested %d", c);
  for (int i = 0; i < 60; i++) CHECK(in[i] == val(left, i), "in[%d]=%d", i, in[i]);
  /* 7 ints are not a whole 5-int element. */
  CHECK_MPI(MPI_Sendrecv(out, 7, MPI_INT, right, 3, in, 2, five, left, 3,
                         MPI_COMM_WORLD, &st));
  CHECK_MPI(MPI_Get_count(&st, five, &c));
  CHECK(c == MPI_UNDEFINED, "partial element count %d", c);
  /* Zero-size type. */
  CHECK_MPI(MPI_Sendrecv(out, 4, empty, right, 4, in, 4, empty, left, 4,
                         MPI_COMM_WORLD, &st));
  CHECK_MPI(MPI_Get_count(&st, MPI_INT, &c));
  CHECK(c == 0, "empty type count %d", c);

  /* Pair elements: the padding is skipped, the values arrive. */
  struct double_int po[3], pi[3];
  memset(po, 0, sizeof po);
  memset(pi, 0, sizeof pi);
  for (int i = 0; i < 3; i++) {
    po[i].a = rank + i * 0.5;
    po[i].b = rank * 10 + i;
  }
  CHECK_MPI(MPI_Sendrecv(po, 1, pairs, right, 5, pi, 1, pairs, left, 5,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  for (int i = 0; i < 3; i++)
    CHECK(pi[i].a == left + i * 0.5 && pi[i].b == left * 10 + i,
          "pair %d: %g %d", i, pi[i].a, pi[i].b);

  /* Bcast with derived types from every root. */
  for (int root = 0; root < size; root++) {
    int b[60];
    for (int i = 0; i < 60; i++) b[i] = rank == root ? val(root, i) : -1;
    CHECK_MPI(MPI_Bcast(b, 4, five, root, MPI_COMM_WORLD));
    for (int i = 0; i < 20; i++) CHECK(b[i] == val(root, i), "bcast b[%d]=%d", i, b[i]);
    for (int i = 20; i < 60; i++)
      CHECK(b[i] == (rank == root ? val(root, i) : -1), "bcast wrote b[%d]", i);
    CHECK_MPI(MPI_Bcast(b, 1, nested, root, MPI_COMM_WORLD));
    for (int i = 0; i < 60; i++) CHECK(b[i] == val(root, i), "bcast b[%d]=%d", i, b[i]);
  }

  CHECK_MPI(MPI_Type_free(&five));
  CHECK(five == MPI_DATATYPE_NULL, "freed type handle %#x", (unsigned)five);
  CHECK_MPI(MPI_Type_free(&nested));
  CHECK_MPI(MPI_Type_free(&pairs));
  CHECK_MPI(MPI_Type_free(&empty));
  test_pass("contiguous_types");

  /* Create/commit/free many times: handles are recycled cleanly. */
  for (int i = 0; i < 500; i++) {
    MPI_Datatype t;
    CHECK_MPI(MPI_Type_contiguous(i % 9 + 1, MPI_SHORT, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    CHECK_MPI(MPI_Type_size(t, &sz));
    CHECK(sz == 2 * (i % 9 + 1), "iteration %d size %d", i, sz);
    CHECK_MPI(MPI_Type_free(&t));
  }
  test_pass("type_churn");
}

/* Commutative and associative: a + b + 1 (wrapping), so an Allreduce over
 * n ranks gives sum + n - 1: the op ran exactly n - 1 times per element. */
static MPI_Datatype seen_type = MPI_DATATYPE_NULL;
static void plus_one_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
  seen_type = *dt;
  const int *a = (const int *)in;
  int *b = (int *)inout;
  for (int i = 0; i < *len; i++)
    b[i] = (int)((unsigned)a[i] + (unsigned)b[i] + 1u);
}

/* Non-commutative, on (value, digits) pairs of long long: concatenates
 * decimal numbers (left operand first), so the result spells the
 * contributions in rank order. */
static MPI_Datatype concat_type = MPI_DATATYPE_NULL;
static int concat_bad_type = 0;
static void concat_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
  if (*dt != concat_type) concat_bad_type = 1;
  const long long *a = (const long long *)in;
  long long *b = (long long *)inout;
  for (int i = 0; i < *len; i++) {
    long long scale = 1;
    for (long long d = 0; d < b[2 * i + 1]; d++) scale *= 10;
    b[2 * i] = a[2 * i] * scale + b[2 * i];
    b[2 * i + 1] += a[2 * i + 1];
  }
}

/* Rank r's digit for element e: 1..9. */
static int digit(int r, int e) { return (r + e) % 9 + 1; }

static void case_user_ops(void) {
  MPI_Op plus_one, concat;
  CHECK_MPI(MPI_Op_create(plus_one_op, 1, &plus_one));
  CHECK_MPI(MPI_Op_create(concat_op, 0, &concat));
  CHECK(plus_one != MPI_OP_NULL && concat != MPI_OP_NULL && plus_one != concat,
        "op handles %#x %#x", (unsigned)plus_one, (unsigned)concat);

  enum { N = 1000 };
  int *in = (int *)malloc(sizeof(int) * N);
  int *out = (int *)malloc(sizeof(int) * N);
  for (int i = 0; i < N; i++) in[i] = val(rank, i);
  CHECK_MPI(MPI_Allreduce(in, out, N, MPI_INT, plus_one, MPI_COMM_WORLD));
  /* Not every rank needs to apply the op, but some rank must, with MPI_INT. */
  CHECK(seen_type == MPI_DATATYPE_NULL || seen_type == MPI_INT,
        "op saw type %#x", (unsigned)seen_type);
  int called = seen_type == MPI_INT, any_called = 0;
  CHECK_MPI(MPI_Allreduce(&called, &any_called, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  CHECK(size == 1 || any_called, "no rank ever called the user op");
  for (int i = 0; i < N; i++) {
    unsigned want = (unsigned)(size - 1);
    for (int r = 0; r < size; r++) want += (unsigned)val(r, i);
    CHECK(out[i] == (int)want, "plus_one[%d] = %d want %d", i, out[i], (int)want);
  }
  /* Reduce to the last rank, with the user op. */
  for (int i = 0; i < N; i++) out[i] = -1;
  CHECK_MPI(MPI_Reduce(in, out, N, MPI_INT, plus_one, size - 1, MPI_COMM_WORLD));
  if (rank == size - 1)
    for (int i = 0; i < N; i++) {
      unsigned want = (unsigned)(size - 1);
      for (int r = 0; r < size; r++) want += (unsigned)val(r, i);
      CHECK(out[i] == (int)want, "Reduce plus_one[%d] = %d", i, out[i]);
    }
  free(in);
  free(out);
  test_pass("user_op_commutative");

  CHECK_MPI(MPI_Type_contiguous(2, MPI_LONG_LONG, &concat_type));
  CHECK_MPI(MPI_Type_commit(&concat_type));
  enum { E = 5 };
  long long mine[2 * E], res[2 * E];
  for (int e = 0; e < E; e++) {
    mine[2 * e] = digit(rank, e);
    mine[2 * e + 1] = 1;
  }
  long long want[E];
  for (int e = 0; e < E; e++) {
    want[e] = 0;
    for (int r = 0; r < size; r++) want[e] = want[e] * 10 + digit(r, e);
  }
  CHECK_MPI(MPI_Allreduce(mine, res, E, concat_type, concat, MPI_COMM_WORLD));
  CHECK(!concat_bad_type, "user op called with another datatype");
  for (int e = 0; e < E; e++)
    CHECK(res[2 * e] == want[e] && res[2 * e + 1] == size,
          "concat[%d] = %lld (%lld digits), want %lld", e, res[2 * e],
          res[2 * e + 1], want[e]);
  for (int root = 0; root < size; root++) {
    memset(res, 0, sizeof res);
    CHECK_MPI(MPI_Reduce(mine, res, E, concat_type, concat, root, MPI_COMM_WORLD));
    if (rank == root)
      for (int e = 0; e < E; e++)
        CHECK(res[2 * e] == want[e], "Reduce root %d concat[%d] = %lld want %lld",
              root, e, res[2 * e], want[e]);
  }
  CHECK_MPI(MPI_Type_free(&concat_type));
  test_pass("user_op_noncommutative");

  CHECK_MPI(MPI_Op_free(&plus_one));
  CHECK(plus_one == MPI_OP_NULL, "freed op handle %#x", (unsigned)plus_one);
  CHECK_MPI(MPI_Op_free(&concat));
  CHECK(concat == MPI_OP_NULL, "freed op handle %#x", (unsigned)concat);
  /* Ops can be created and freed repeatedly. */
  for (int i = 0; i < 200; i++) {
    MPI_Op o;
    CHECK_MPI(MPI_Op_create(plus_one_op, i % 2, &o));
    int one = 1, sum = 0;
    CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, o, MPI_COMM_WORLD));
    CHECK(sum == 2 * size - 1, "iteration %d sum %d", i, sum);
    CHECK_MPI(MPI_Op_free(&o));
  }
  test_pass("op_churn");
}

int main(int argc, char **argv) {
  CHECK_MPI(MPI_Init(&argc, &argv));
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  case_predefined();
  case_contiguous();
  case_user_ops();
  CHECK_MPI(MPI_Finalize());
  return 0;
}
