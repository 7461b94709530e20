/* GPU tests of ferrocoll's NCCL face: device buffers.
 * Built with nvcc where CUDA is installed (c_tests/gpu/run.sh); ranks are
 * processes started by ferrorun that meet through MPI, all on one GPU when
 * the machine has one (NCCL refuses that; ferrocoll allows it).
 *
 * Cases: every type x op of AllReduce against a reference rounded as the
 * device must round; the other collectives, in-place layouts, Send/Recv in
 * a group; stream order (a call runs after the work queued before it on
 * its stream, returns before that work is done where each rank has a GPU,
 * and later work on its stream, or ordered after it by an event, sees its
 * result); PreMulSum with device and host scalars; ncclMemAlloc; large
 * AllReduce, Broadcast and Reduce (12 MiB: the staged path cuts them into
 * pieces); CUDA graphs (an AllReduce and an AllGather captured in global
 * mode between kernels, replayed with new inputs, back to back too; what
 * cannot be captured refused with ncclInvalidUsage); mixed host/device
 * buffers refused; one process holding two ranks (ncclCommInitAll on one
 * device, whose capture is refused) when run with one process. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "nccl_testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <vector>

#define CHECK_CUDA(call)                                                       \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    CHECK(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));         \
  } while (0)

static int g_rank, g_size;

/* Rank 0 says which case starts (a hang then names its case). */
static void step(const char *name) {
  if (g_rank == 0) {
    fprintf(stderr, "[%.3f] start: %s\n", nt_now(), name);
    fflush(stderr);
  }
}

/* ---- element types on the host: load as double, store rounded ---------- */
static size_t tsize(ncclDataType_t t) {
  switch (t) {
  case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
  case ncclFloat16: case ncclBfloat16: return 2;
  case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
  default: return 8;
  }
}
static bool is_float(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat32 || t == ncclFloat64 ||
         t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}
static double ld(ncclDataType_t t, const void *p) {
  switch (t) {
  case ncclInt8: return *(const int8_t *)p;
  case ncclUint8: return *(const uint8_t *)p;
  case ncclInt32: return *(const int32_t *)p;
  case ncclUint32: return *(const uint32_t *)p;
  case ncclInt64: return (double)*(const int64_t *)p;
  case ncclUint64: return (double)*(const uint64_t *)p;
  case ncclFloat16: return __half2float(*(const __half *)p);
  case ncclBfloat16: return __bfloat162float(*(const __nv_bfloat16 *)p);
  case ncclFloat32: return *(const float *)p;
  case ncclFloat64: return *(const double *)p;
  case ncclFloat8e4m3: {
    __half_raw h = __nv_cvt_fp8_to_halfraw(*(const __nv_fp8_storage_t *)p, __NV_E4M3);
    return __half2float(__half(h));
  }
  default: {
    __half_raw h = __nv_cvt_fp8_to_halfraw(*(const __nv_fp8_storage_t *)p, __NV_E5M2);
    return __half2float(__half(h));
  }
  }
}
static void st(ncclDataType_t t, double v, void *p) {
  switch (t) {
  case ncclInt8: *(int8_t *)p = (int8_t)(int64_t)v; break;
  case ncclUint8: *(uint8_t *)p = (uint8_t)(int64_t)v; break;
  case ncclInt32: *(int32_t *)p = (int32_t)(int64_t)v; break;
  case ncclUint32: *(uint32_t *)p = (uint32_t)(int64_t)v; break;
  case ncclInt64: *(int64_t *)p = (int64_t)v; break;
  case ncclUint64: *(uint64_t *)p = (uint64_t)v; break;
  case ncclFloat16: *(__half *)p = __float2half_rn((float)v); break;
  case ncclBfloat16: *(__nv_bfloat16 *)p = __float2bfloat16_rn((float)v); break;
  case ncclFloat32: *(float *)p = (float)v; break;
  case ncclFloat64: *(double *)p = v; break;
  case ncclFloat8e4m3:
    *(__nv_fp8_storage_t *)p = __nv_cvt_float_to_fp8((float)v, __NV_SATFINITE, __NV_E4M3);
    break;
  default:
    *(__nv_fp8_storage_t *)p = __nv_cvt_float_to_fp8((float)v, __NV_SATFINITE, __NV_E5M2);
    break;
  }
}
/* Rounds v to type t (as stored). */
static double rnd(ncclDataType_t t, double v) {
  unsigned char b[8];
  st(t, v, b);
  return ld(t, b);
}
/* Rank r's input element i (small values: exact in every type). */
static double input(int r, size_t i, ncclRedOp_t op) {
  if (op == ncclProd) return 1 + (double)((r + i) % 2);
  return 1 + (double)((r * 7 + i) % 3);
}
/* The reduction of every rank's element i, in rank order, rounded after
 * every step as ferrocoll's kernels do (floats in f32 except f64). */
static double reference(ncclDataType_t t, ncclRedOp_t op, size_t i, int n, const double *scal) {
  double acc = 0;
  for (int r = 0; r < n; r++) {
    double x = input(r, i, op);
    if (op == ncclAvg && is_float(t)) {
      double f = t == ncclFloat64 ? 1.0 / n : (double)(float)(1.0 / n);
      x = rnd(t, t == ncclFloat64 ? x * f : (double)((float)x * (float)f));
    }
    if (scal) {
      if (is_float(t))
        x = rnd(t, t == ncclFloat64 ? x * scal[r] : (double)((float)x * (float)scal[r]));
      else
        x = rnd(t, x * scal[r]);
    }
    if (r == 0) { acc = x; continue; }
    double y;
    switch (op) {
    case ncclProd: y = t == ncclFloat64 || !is_float(t) ? x * acc : (double)((float)x * (float)acc); break;
    case ncclMax: y = acc > x ? acc : x; break;
    case ncclMin: y = acc < x ? acc : x; break;
    default: y = t == ncclFloat64 || !is_float(t) ? x + acc : (double)((float)x + (float)acc); break;
    }
    acc = rnd(t, y);
  }
  if (op == ncclAvg && !is_float(t)) acc = (double)((int64_t)acc / n);
  return acc;
}

static void fill(ncclDataType_t t, ncclRedOp_t op, size_t count, int r, void *dev) {
  std::vector<unsigned char> h(count * tsize(t));
  for (size_t i = 0; i < count; i++) st(t, input(r, i, op), &h[i * tsize(t)]);
  CHECK_CUDA(cudaMemcpy(dev, h.data(), h.size(), cudaMemcpyHostToDevice));
}

static const char *tname(ncclDataType_t t) {
  static const char *n[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                            "f16", "f32", "f64", "bf16", "e4m3", "e5m2"};
  return n[(int)t];
}

static void check_result(const char *what, ncclDataType_t t, ncclRedOp_t op, const void *dev,
                         size_t count, int n, const double *scal) {
  std::vector<unsigned char> h(count * tsize(t));
  CHECK_CUDA(cudaMemcpy(h.data(), dev, h.size(), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < count; i++) {
    double want = reference(t, op, i, n, scal), got = ld(t, &h[i * tsize(t)]);
    CHECK(got == want, "%s %s op %d: element %zu is %g, want %g", what, tname(t), (int)op, i, got,
          want);
  }
}

/* ---- every type x op ------------------------------------------------------ */
static void test_types(ncclComm_t comm, cudaStream_t s) {
  step("types");
  const size_t count = 1031;
  void *in, *out;
  CHECK_CUDA(cudaMalloc(&in, count * 8));
  CHECK_CUDA(cudaMalloc(&out, count * 8));
  for (int t = 0; t < (int)ncclNumTypes; t++) {
    for (int op = 0; op < (int)ncclNumOps; op++) {
      ncclDataType_t dt = (ncclDataType_t)t;
      fill(dt, (ncclRedOp_t)op, count, g_rank, in);
      CHECK_NCCL(ncclAllReduce(in, out, count, dt, (ncclRedOp_t)op, comm, s));
      CHECK_CUDA(cudaStreamSynchronize(s));
      check_result("allreduce", dt, (ncclRedOp_t)op, out, count, g_size, NULL);
      /* in place */
      CHECK_NCCL(ncclAllReduce(in, in, count, dt, (ncclRedOp_t)op, comm, s));
      CHECK_CUDA(cudaStreamSynchronize(s));
      check_result("allreduce in place", dt, (ncclRedOp_t)op, in, count, g_size, NULL);
    }
  }
  CHECK_CUDA(cudaFree(in));
  CHECK_CUDA(cudaFree(out));
  test_pass("every type x op (allreduce, also in place)");
}

/* ---- stream order ----------------------------------------------------------- */
__device__ unsigned long long now_ns(void) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
/* Waits `ns` nanoseconds, then fills p with v. */
__global__ void slow_fill(float *p, size_t n, float v, unsigned long long ns) {
  unsigned long long t0 = now_ns();
  while (now_ns() - t0 < ns) {
  }
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v;
}
__global__ void twice(const float *a, float *b, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    b[i] = 2 * a[i];
}

static void test_stream_order(ncclComm_t comm, cudaStream_t s) {
  step("stream order");
  const size_t n = 1 << 20;
  float *in, *out, *after;
  CHECK_CUDA(cudaMalloc(&in, n * 4));
  CHECK_CUDA(cudaMalloc(&out, n * 4));
  CHECK_CUDA(cudaMalloc(&after, n * 4));
  cudaStream_t other;
  CHECK_CUDA(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  cudaEvent_t before, call;
  CHECK_CUDA(cudaEventCreateWithFlags(&before, cudaEventDisableTiming));
  CHECK_CUDA(cudaEventCreateWithFlags(&call, cudaEventDisableTiming));
  int ndev = 1;
  CHECK_CUDA(cudaGetDeviceCount(&ndev));
  const char *algo = getenv("FERROCOLL_ALGO");
  const bool staged = algo && strstr(algo, "gpu=staged");
  const bool ordered = algo && strstr(algo, "gpu=ordered");
  const bool barriers = algo && strstr(algo, "gpu=graph");
  for (int round = 0; round < 3; round++) {
    /* about 100 ms of work before the call fills its input */
    slow_fill<<<64, 256, 0, s>>>(in, n, (float)(g_rank + 1 + round), 100000000ull);
    CHECK_CUDA(cudaEventRecord(before, s));
    CHECK_NCCL(ncclAllReduce(in, out, n, ncclFloat, ncclSum, comm, s));
    /* Stream-ordered, as NCCL: the call returned with the work before it
     * still running, where every rank has a GPU of its own or order is
     * forced (processes sharing a GPU, and the staged path, wait on the
     * host). Round 0 may open mappings and load kernels. */
    if (round > 0 && !staged && (g_size <= ndev || ordered || barriers))
      CHECK(cudaEventQuery(before) == cudaErrorNotReady,
            "round %d: the call waited for the work queued before it", round);
    /* later work on the same stream, and on an unrelated stream ordered
     * after the call by an event, sees the result */
    if (round == 1) {
      CHECK_CUDA(cudaEventRecord(call, s));
      CHECK_CUDA(cudaStreamWaitEvent(other, call, 0));
    }
    twice<<<64, 256, 0, round == 1 ? other : s>>>(out, after, n);
    CHECK_CUDA(cudaStreamSynchronize(round == 1 ? other : s));
    std::vector<float> h(n);
    CHECK_CUDA(cudaMemcpy(h.data(), after, n * 4, cudaMemcpyDeviceToHost));
    float want = 0;
    for (int r = 0; r < g_size; r++) want += (float)(r + 1 + round);
    for (size_t i = 0; i < n; i += 4099)
      CHECK(h[i] == 2 * want, "round %d: element %zu is %g, want %g", round, i, h[i], 2 * want);
  }
  /* The legacy default stream too. */
  slow_fill<<<64, 256>>>(in, n, 1.0f, 20000000ull);
  CHECK_NCCL(ncclAllReduce(in, out, n, ncclFloat, ncclSum, comm, 0));
  twice<<<64, 256>>>(out, after, n);
  CHECK_CUDA(cudaDeviceSynchronize());
  float x = 0;
  CHECK_CUDA(cudaMemcpy(&x, after + 5, 4, cudaMemcpyDeviceToHost));
  CHECK(x == 2.0f * g_size, "legacy stream: %g, want %g", x, 2.0f * g_size);
  CHECK_CUDA(cudaStreamDestroy(other));
  CHECK_CUDA(cudaEventDestroy(before));
  CHECK_CUDA(cudaEventDestroy(call));
  CHECK_CUDA(cudaFree(in));
  CHECK_CUDA(cudaFree(out));
  CHECK_CUDA(cudaFree(after));
  test_pass("stream order: after the work before it (returning first where each rank has a "
            "GPU); later work sees the result");
}

/* ---- the other collectives ------------------------------------------------ */
static std::vector<float> down(const float *d, size_t n) {
  std::vector<float> h(n);
  CHECK_CUDA(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost));
  return h;
}
static void up(float *d, const std::vector<float> &h) {
  CHECK_CUDA(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
}
static float val(int r, size_t i) { return (float)(r * 1000 + (int)(i % 997)); }

/* ---- large calls: the staged path cuts them into pieces ------------------- */
static void test_large(ncclComm_t comm, cudaStream_t s) {
  step("large");
  const int n = g_size, me = g_rank, root = n - 1;
  const size_t c = (3u << 20) + 7; /* 12 MiB of floats: three pieces and a bit */
  float *a, *b;
  CHECK_CUDA(cudaMalloc(&a, c * 4));
  CHECK_CUDA(cudaMalloc(&b, c * 4));
  std::vector<float> mine(c), h;
  for (size_t i = 0; i < c; i++) mine[i] = val(me, i);
  float base = 0; /* sum over ranks of r * 1000 */
  for (int r = 0; r < n; r++) base += (float)(r * 1000);
  up(a, mine);
  CHECK_NCCL(ncclAllReduce(a, b, c, ncclFloat, ncclSum, comm, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  h = down(b, c);
  for (size_t i = 0; i < c; i++)
    CHECK(h[i] == base + n * (float)(i % 997), "large allreduce %zu: %g", i, h[i]);
  CHECK_NCCL(ncclAllReduce(a, a, c, ncclFloat, ncclMax, comm, s)); /* in place */
  CHECK_CUDA(cudaStreamSynchronize(s));
  h = down(a, c);
  for (size_t i = 0; i < c; i++) CHECK(h[i] == val(n - 1, i), "large allreduce in place %zu", i);
  up(a, mine);
  CHECK_NCCL(ncclBroadcast(a, b, c, ncclFloat, root, comm, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  h = down(b, c);
  for (size_t i = 0; i < c; i++) CHECK(h[i] == val(root, i), "large bcast %zu", i);
  up(b, std::vector<float>(c, -1));
  CHECK_NCCL(ncclReduce(a, b, c, ncclFloat, ncclMin, root, comm, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  if (me == root) {
    h = down(b, c);
    for (size_t i = 0; i < c; i++) CHECK(h[i] == val(0, i), "large reduce %zu", i);
  }
  CHECK_CUDA(cudaFree(a));
  CHECK_CUDA(cudaFree(b));
  test_pass("large allreduce (apart, in place), broadcast and reduce");
}

static void test_collectives(ncclComm_t comm, cudaStream_t s) {
  step("collectives");
  const int n = g_size, me = g_rank, root = n > 1 ? 1 : 0;
  const size_t c = 1031;
  float *a, *b;
  CHECK_CUDA(cudaMalloc(&a, c * n * 4));
  CHECK_CUDA(cudaMalloc(&b, c * n * 4));
  std::vector<float> mine(c * n);
  for (size_t i = 0; i < c * n; i++) mine[i] = val(me, i);

  up(a, mine);
  CHECK_NCCL(ncclBroadcast(a, b, c, ncclFloat, root, comm, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  { auto h = down(b, c); for (size_t i = 0; i < c; i++) CHECK(h[i] == val(root, i), "bcast %zu", i); }
  CHECK_NCCL(ncclBcast(a, c, ncclFloat, root, comm, s)); /* in place */
  CHECK_CUDA(cudaStreamSynchronize(s));
  { auto h = down(a, c); for (size_t i = 0; i < c; i++) CHECK(h[i] == val(root, i), "bcast in place %zu", i); }

  up(a, mine);
  CHECK_NCCL(ncclReduce(a, b, c, ncclFloat, ncclMax, root, comm, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  if (me == root) { auto h = down(b, c); for (size_t i = 0; i < c; i++) CHECK(h[i] == val(n - 1, i), "reduce %zu", i); }

  up(a, mine);
  CHECK_NCCL(ncclAllGather(a, b, c, ncclFloat, comm, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  { auto h = down(b, c * n); for (int r = 0; r < n; r++) for (size_t i = 0; i < c; i++) CHECK(h[r * c + i] == val(r, i), "allgather %d %zu", r, i); }
  up(b, std::vector<float>(c * n, -1));
  { std::vector<float> blk(mine.begin(), mine.begin() + c); CHECK_CUDA(cudaMemcpy(b + me * c, blk.data(), c * 4, cudaMemcpyHostToDevice)); }
  CHECK_NCCL(ncclAllGather(b + me * c, b, c, ncclFloat, comm, s)); /* in place */
  CHECK_CUDA(cudaStreamSynchronize(s));
  { auto h = down(b, c * n); for (int r = 0; r < n; r++) for (size_t i = 0; i < c; i++) CHECK(h[r * c + i] == val(r, i), "allgather in place %d %zu", r, i); }

  up(a, mine);
  CHECK_NCCL(ncclReduceScatter(a, b, c, ncclFloat, ncclSum, comm, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  {
    auto h = down(b, c);
    for (size_t i = 0; i < c; i++) {
      float w = 0;
      for (int r = 0; r < n; r++) w += val(r, me * c + i);
      CHECK(h[i] == w, "reducescatter %zu: %g want %g", i, h[i], w);
    }
  }
  up(a, mine);
  CHECK_NCCL(ncclReduceScatter(a, a + me * c, c, ncclFloat, ncclSum, comm, s)); /* in place */
  CHECK_CUDA(cudaStreamSynchronize(s));
  {
    auto h = down(a + me * c, c);
    for (size_t i = 0; i < c; i++) {
      float w = 0;
      for (int r = 0; r < n; r++) w += val(r, me * c + i);
      CHECK(h[i] == w, "reducescatter in place %zu", i);
    }
  }

  up(a, mine);
  CHECK_NCCL(ncclAlltoAll(a, b, c, ncclFloat, comm, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  { auto h = down(b, c * n); for (int r = 0; r < n; r++) for (size_t i = 0; i < c; i++) CHECK(h[r * c + i] == val(r, me * c + i), "alltoall"); }

  up(a, mine);
  CHECK_NCCL(ncclGather(a, b, c, ncclFloat, root, comm, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  if (me == root) { auto h = down(b, c * n); for (int r = 0; r < n; r++) for (size_t i = 0; i < c; i++) CHECK(h[r * c + i] == val(r, i), "gather"); }

  up(a, mine);
  CHECK_NCCL(ncclScatter(a, b, c, ncclFloat, root, comm, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  { auto h = down(b, c); for (size_t i = 0; i < c; i++) CHECK(h[i] == val(root, me * c + i), "scatter"); }

  /* a ring of Send/Recv in a group */
  up(a, mine);
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclSend(a, c, ncclFloat, (me + 1) % n, comm, s));
  CHECK_NCCL(ncclRecv(b, c, ncclFloat, (me + n - 1) % n, comm, s));
  CHECK_NCCL(ncclGroupEnd());
  CHECK_CUDA(cudaStreamSynchronize(s));
  { auto h = down(b, c); for (size_t i = 0; i < c; i++) CHECK(h[i] == val((me + n - 1) % n, i), "send/recv"); }

  CHECK_CUDA(cudaFree(a));
  CHECK_CUDA(cudaFree(b));
  test_pass("broadcast, reduce, allgather, reducescatter, alltoall, gather, scatter, send/recv (device)");
}

/* ---- PreMulSum, ncclMemAlloc, refusals ----------------------------------- */
/* A device scalar that outlives the ops made on it. */
static float *ds_keep(void) {
  static float *p = NULL;
  if (!p) CHECK_CUDA(cudaMalloc(&p, 4));
  return p;
}

static void test_premul_and_memalloc(ncclComm_t comm, cudaStream_t s) {
  step("premul, memalloc, refusals");
  const size_t c = 517;
  void *in = NULL, *out = NULL;
  CHECK_NCCL(ncclMemAlloc(&in, c * 4));
  CHECK_NCCL(ncclMemAlloc(&out, c * 4));
  cudaPointerAttributes at;
  CHECK_CUDA(cudaPointerGetAttributes(&at, in));
  CHECK(at.type == cudaMemoryTypeDevice, "ncclMemAlloc gave memory of type %d", (int)at.type);
  std::vector<double> scal(g_size);
  for (int r = 0; r < g_size; r++) scal[r] = 0.5 * (r + 1);
  float mys = (float)scal[g_rank];
  /* host scalar, read at once */
  ncclRedOp_t op;
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&op, &mys, ncclFloat, ncclScalarHostImmediate, comm));
  fill(ncclFloat, ncclSum, c, g_rank, in);
  CHECK_NCCL(ncclAllReduce(in, out, c, ncclFloat, op, comm, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  check_result("premulsum host scalar", ncclFloat, ncclSum, out, c, g_size, scal.data());
  CHECK_NCCL(ncclRedOpDestroy(op, comm));
  /* device scalar, read when the stream reaches the call */
  float *ds;
  CHECK_CUDA(cudaMalloc(&ds, 4));
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&op, ds, ncclFloat, ncclScalarDevice, comm));
  CHECK_CUDA(cudaMemcpyAsync(ds, &mys, 4, cudaMemcpyHostToDevice, s));
  CHECK_NCCL(ncclAllReduce(in, out, c, ncclFloat, op, comm, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  check_result("premulsum device scalar", ncclFloat, ncclSum, out, c, g_size, scal.data());
  CHECK_NCCL(ncclRedOpDestroy(op, comm));
  CHECK_CUDA(cudaFree(ds));

  /* host and device buffers mixed */
  std::vector<float> host(c);
  CHECK_NCCL_ERR(ncclAllReduce(in, host.data(), c, ncclFloat, ncclSum, comm, s), ncclInvalidUsage);
  CHECK(strstr(ncclGetLastError(comm), "device memory") != NULL, "message: %s", ncclGetLastError(comm));
  /* graph capture of what is read on the host: a device scalar */
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&op, ds_keep(), ncclFloat, ncclScalarDevice, comm));
  cudaStream_t cs;
  CHECK_CUDA(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
  ncclResult_t r = ncclAllReduce(in, out, c, ncclFloat, op, comm, cs);
  cudaGraph_t g;
  CHECK_CUDA(cudaStreamEndCapture(cs, &g));
  CHECK(r == ncclInvalidUsage, "capture of a device scalar: got %d", (int)r);
  CHECK(strstr(ncclGetLastError(comm), "graph") != NULL && strstr(ncclGetLastError(comm), "ncclScalarDevice") != NULL,
        "message: %s", ncclGetLastError(comm));
  CHECK_CUDA(cudaGraphDestroy(g));
  CHECK_CUDA(cudaStreamDestroy(cs));
  CHECK_NCCL(ncclRedOpDestroy(op, comm));
  /* still usable */
  fill(ncclFloat, ncclSum, c, g_rank, in);
  CHECK_NCCL(ncclAllReduce(in, out, c, ncclFloat, ncclSum, comm, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  check_result("after refusals", ncclFloat, ncclSum, out, c, g_size, NULL);
  CHECK_NCCL(ncclMemFree(in));
  CHECK_NCCL(ncclMemFree(out));
  test_pass("PreMulSum (host and device scalars), ncclMemAlloc; mixed buffers and a captured device scalar refused");
}

/* ---- CUDA graphs ---------------------------------------------------------- */
static void test_graph(ncclComm_t comm, cudaStream_t s) {
  step("graph capture");
  const char *algo = getenv("FERROCOLL_ALGO");
  const size_t n = 1 << 20, q = n / 4;
  float *in, *out, *dbl, *ag, *ag2;
  CHECK_CUDA(cudaMalloc(&in, n * 4));
  CHECK_CUDA(cudaMalloc(&out, n * 4));
  CHECK_CUDA(cudaMalloc(&dbl, n * 4));
  CHECK_CUDA(cudaMalloc(&ag, g_size * q * 4));
  CHECK_CUDA(cudaMalloc(&ag2, g_size * q * 4));
  cudaStream_t cs;
  CHECK_CUDA(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  cudaGraph_t g;
  /* the strictest mode: our own set-up calls must not spoil it */
  CHECK_CUDA(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
  ncclResult_t r = ncclAllReduce(in, out, n, ncclFloat, ncclSum, comm, cs);
  if (algo && strstr(algo, "gpu=staged")) {
    CHECK_CUDA(cudaStreamEndCapture(cs, &g));
    CHECK(r == ncclInvalidUsage, "staged capture: got %d", (int)r);
    CHECK(strstr(ncclGetLastError(comm), "graph") != NULL, "message: %s", ncclGetLastError(comm));
    CHECK_CUDA(cudaGraphDestroy(g));
    CHECK_CUDA(cudaStreamDestroy(cs));
    for (float *p : {in, out, dbl, ag, ag2}) CHECK_CUDA(cudaFree(p));
    test_pass("graph capture refused on the staged path");
    return;
  }
  CHECK(r == ncclSuccess, "captured AllReduce: %d (%s)", (int)r, ncclGetLastError(comm));
  twice<<<64, 256, 0, cs>>>(out, dbl, n);
  CHECK_NCCL(ncclAllGather(dbl, ag, q, ncclFloat, comm, cs));
  twice<<<64, 256, 0, cs>>>(ag, ag2, g_size * q);
  CHECK_CUDA(cudaStreamEndCapture(cs, &g));
  cudaGraphExec_t ge;
  CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
  std::vector<float> h(g_size * q), o(n);
  for (int rep = 0; rep < 4; rep++) {
    /* new inputs, late (10 ms) so that peers' replays must wait for them */
    slow_fill<<<64, 256, 0, cs>>>(in, n, (float)(g_rank + 1 + 10 * rep), 10000000ull);
    CHECK_CUDA(cudaGraphLaunch(ge, cs));
    if (rep == 3) {
      /* twice back to back, new inputs between: the second one counts */
      slow_fill<<<64, 256, 0, cs>>>(in, n, (float)(g_rank + 2 + 10 * rep), 1000000ull);
      CHECK_CUDA(cudaGraphLaunch(ge, cs));
    }
    CHECK_CUDA(cudaStreamSynchronize(cs));
    float want = 0;
    for (int k = 0; k < g_size; k++) want += (float)(k + 1 + 10 * rep + (rep == 3));
    CHECK_CUDA(cudaMemcpy(o.data(), out, n * 4, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(h.data(), ag2, g_size * q * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i += 1021)
      CHECK(o[i] == want, "replay %d: sum[%zu] = %g, want %g", rep, i, o[i], want);
    for (size_t i = 0; i < g_size * q; i += 509)
      CHECK(h[i] == 4 * want, "replay %d: gathered[%zu] = %g, want %g", rep, i, h[i], 4 * want);
  }
  /* the communicator still takes calls outside the graph, on another stream */
  fill(ncclFloat, ncclSum, n, g_rank, in);
  CHECK_NCCL(ncclAllReduce(in, out, n, ncclFloat, ncclSum, comm, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  check_result("after the graph", ncclFloat, ncclSum, out, n, g_size, NULL);
  /* and the graph once more after them */
  slow_fill<<<64, 256, 0, cs>>>(in, n, 1.0f, 0ull);
  CHECK_CUDA(cudaGraphLaunch(ge, cs));
  CHECK_CUDA(cudaStreamSynchronize(cs));
  CHECK_CUDA(cudaMemcpy(o.data(), out, n * 4, cudaMemcpyDeviceToHost));
  CHECK(o[n - 1] == (float)g_size, "last replay: %g, want %d", o[n - 1], g_size);
  ncclResult_t async;
  CHECK_NCCL(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess, "async error after the graph: %d", (int)async);
  CHECK_CUDA(cudaGraphExecDestroy(ge));
  CHECK_CUDA(cudaGraphDestroy(g));
  CHECK_CUDA(cudaStreamDestroy(cs));
  for (float *p : {in, out, dbl, ag, ag2}) CHECK_CUDA(cudaFree(p));
  test_pass("graph capture: AllReduce and AllGather between kernels, captured in global mode, "
            "replayed 6 times with new inputs (twice back to back), calls outside the graph between");
}

/* ---- one process, two ranks on one device -------------------------------- */
static void test_init_all(void) {
  step("init all");
  ncclComm_t comms[2];
  int devs[2] = {0, 0};
  CHECK_NCCL(ncclCommInitAll(comms, 2, devs));
  const size_t c = 1 << 16;
  float *in[2], *out[2];
  cudaStream_t st[2];
  for (int r = 0; r < 2; r++) {
    CHECK_CUDA(cudaMalloc(&in[r], c * 4));
    CHECK_CUDA(cudaMalloc(&out[r], c * 4));
    CHECK_CUDA(cudaStreamCreate(&st[r]));
    fill(ncclFloat, ncclSum, c, r, in[r]);
  }
  for (int rep = 0; rep < 3; rep++) {
    CHECK_NCCL(ncclGroupStart());
    for (int r = 0; r < 2; r++) CHECK_NCCL(ncclAllReduce(in[r], out[r], c, ncclFloat, ncclSum, comms[r], st[r]));
    CHECK_NCCL(ncclGroupEnd());
    /* a second op on each communicator, in a group too (one thread holding
     * two ranks must group their calls, as with NCCL) */
    CHECK_NCCL(ncclGroupStart());
    for (int r = 0; r < 2; r++) CHECK_NCCL(ncclAllReduce(in[r], in[r], c, ncclFloat, ncclMax, comms[r], st[r]));
    CHECK_NCCL(ncclGroupEnd());
    for (int r = 0; r < 2; r++) CHECK_CUDA(cudaStreamSynchronize(st[r]));
    for (int r = 0; r < 2; r++) check_result("initall", ncclFloat, ncclSum, out[r], c, 2, NULL);
    for (int r = 0; r < 2; r++) fill(ncclFloat, ncclSum, c, r, in[r]);
  }
  /* Capture is refused where ranks share a process (the driver may run
   * their host functions one at a time). */
  cudaStream_t cs[2];
  cudaGraph_t g[2];
  for (int r = 0; r < 2; r++) CHECK_CUDA(cudaStreamCreateWithFlags(&cs[r], cudaStreamNonBlocking));
  for (int r = 0; r < 2; r++) CHECK_CUDA(cudaStreamBeginCapture(cs[r], cudaStreamCaptureModeRelaxed));
  CHECK_NCCL(ncclGroupStart());
  for (int r = 0; r < 2; r++) CHECK_NCCL(ncclAllReduce(in[r], out[r], c, ncclFloat, ncclSum, comms[r], cs[r]));
  ncclResult_t ge = ncclGroupEnd();
  for (int r = 0; r < 2; r++) CHECK_CUDA(cudaStreamEndCapture(cs[r], &g[r]));
  CHECK(ge == ncclInvalidUsage, "capture by ranks of one process: %d", (int)ge);
  const char *algo = getenv("FERROCOLL_ALGO");
  const char *why = algo && strstr(algo, "gpu=staged") ? "gpu=staged" : "one process";
  CHECK(strstr(ncclGetLastError(NULL), why) != NULL, "message: %s", ncclGetLastError(NULL));
  for (int r = 0; r < 2; r++) {
    CHECK_CUDA(cudaGraphDestroy(g[r]));
    CHECK_CUDA(cudaStreamDestroy(cs[r]));
  }
  for (int r = 0; r < 2; r++) {
    CHECK_NCCL(ncclCommDestroy(comms[r]));
    CHECK_CUDA(cudaFree(in[r]));
    CHECK_CUDA(cudaFree(out[r]));
    CHECK_CUDA(cudaStreamDestroy(st[r]));
  }
  test_pass("ncclCommInitAll: two ranks of one process on one device, grouped and not; their capture refused");
}

int main(int argc, char **argv) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("SKIP: no CUDA device\n");
    return 0;
  }
  CHECK_MPI(MPI_Init(&argc, &argv));
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &g_size));
  CHECK_CUDA(cudaSetDevice(g_rank % ndev));
  ncclUniqueId id = nt_bcast_id(MPI_COMM_WORLD);
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, g_size, id, g_rank));
  int dev = -1;
  CHECK_NCCL(ncclCommCuDevice(comm, &dev));
  CHECK(dev == g_rank % ndev, "ncclCommCuDevice says %d", dev);
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreate(&s));
  test_stream_order(comm, s);
  test_types(comm, s);
  test_collectives(comm, s);
  test_premul_and_memalloc(comm, s);
  test_large(comm, s);
  test_graph(comm, s);
  ncclResult_t async;
  CHECK_NCCL(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess, "async error %d", (int)async);
  CHECK_NCCL(ncclCommDestroy(comm));
  CHECK_CUDA(cudaStreamDestroy(s));
  if (g_size == 1) test_init_all();
  CHECK_MPI(MPI_Finalize());
  return 0;
}
