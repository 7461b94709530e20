/* ncclperf_gpu: nccl-tests-style allreduce benchmark of ferrocoll's NCCL face
 * on device buffers (every rank a process started by ferrorun; all ranks on
 * the GPU rank % devices). Prints the device's own copy bandwidth first
 * (cudaMemcpyAsync device to device, bytes copied per second), then
 * size, time, algbw, busbw and busbw as a share of that copy bandwidth.
 * Times are medians over ranks' maxima of `-n` calls between two barriers,
 * measured with events on the calling stream.
 *
 * Usage: ferrorun -n N ncclperf_gpu [-b minbytes] [-e maxbytes] [-f factor]
 *          [-n iters] [-w warmup] [-g 1]
 * -g 1 captures each size's `iters` calls into a CUDA graph (global mode)
 * and times its launches instead of the calls.
 * FERROCOLL_ALGO=gpu=staged forces the host-staged path. */
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#define CK(x)                                                                  \
  do {                                                                         \
    ncclResult_t r_ = (x);                                                     \
    if (r_ != ncclSuccess) {                                                   \
      fprintf(stderr, "%s: %s (%s)\n", #x, ncclGetErrorString(r_),             \
              ncclGetLastError(NULL));                                         \
      MPI_Abort(MPI_COMM_WORLD, 1);                                            \
    }                                                                          \
  } while (0)
#define CC(x)                                                                  \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                 \
      MPI_Abort(MPI_COMM_WORLD, 1);                                            \
    }                                                                          \
  } while (0)

static long parse_size(const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return (long)v;
}

int main(int argc, char **argv) {
  int rank, n, ndev = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  long minb = 8, maxb = 256L << 20;
  double factor = 4;
  int iters = 20, warm = 5, graph = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b")) minb = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-e")) maxb = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-f")) factor = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-w")) warm = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-g")) graph = atoi(argv[i + 1]);
  }
  CC(cudaGetDeviceCount(&ndev));
  CC(cudaSetDevice(rank % ndev));
  ncclUniqueId id;
  if (rank == 0) CK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  CK(ncclCommInitRank(&comm, n, id, rank));
  cudaStream_t s;
  CC(cudaStreamCreate(&s));
  char *send, *recv;
  CC(cudaMalloc(&send, maxb));
  CC(cudaMalloc(&recv, maxb));
  CC(cudaMemset(send, 0, maxb));
  cudaEvent_t e0, e1;
  CC(cudaEventCreate(&e0));
  CC(cudaEventCreate(&e1));

  /* The device's copy bandwidth at the largest size, rank 0 alone. */
  double copy_gbs = 0;
  if (rank == 0) {
    for (int i = 0; i < 3; i++) CC(cudaMemcpyAsync(recv, send, maxb, cudaMemcpyDeviceToDevice, s));
    CC(cudaEventRecord(e0, s));
    for (int i = 0; i < 10; i++) CC(cudaMemcpyAsync(recv, send, maxb, cudaMemcpyDeviceToDevice, s));
    CC(cudaEventRecord(e1, s));
    CC(cudaEventSynchronize(e1));
    float ms = 0;
    CC(cudaEventElapsedTime(&ms, e0, e1));
    copy_gbs = (double)maxb * 10 / (ms * 1e-3) / 1e9;
  }
  MPI_Bcast(&copy_gbs, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  const char *algo = getenv("FERROCOLL_ALGO");
  if (rank == 0) {
    printf("# ncclperf_gpu: allreduce float sum, %d ranks, device buffers%s%s%s\n", n,
           algo ? ", FERROCOLL_ALGO=" : "", algo ? algo : "",
           graph ? ", calls replayed from a CUDA graph" : "");
    printf("# device copy bandwidth (cudaMemcpyAsync D2D, %ld bytes): %.1f GB/s\n", maxb, copy_gbs);
    printf("%12s %12s %10s %10s %10s\n", "bytes", "time_us", "algbw", "busbw", "busbw/copy");
  }
  for (long b = minb; b <= maxb; b = (long)(b * factor) > b ? (long)(b * factor) : b + 1) {
    size_t count = b / 4;
    if (count == 0) continue;
    for (int i = 0; i < warm; i++) CK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, s));
    CC(cudaStreamSynchronize(s));
    cudaGraphExec_t ge = NULL;
    if (graph) {
      cudaGraph_t g;
      CC(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
      for (int i = 0; i < iters; i++) CK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, s));
      CC(cudaStreamEndCapture(s, &g));
      CC(cudaGraphInstantiate(&ge, g, 0));
      CC(cudaGraphDestroy(g));
      CC(cudaGraphLaunch(ge, s));
      CC(cudaStreamSynchronize(s));
    }
    std::vector<double> t;
    for (int rep = 0; rep < 5; rep++) {
      MPI_Barrier(MPI_COMM_WORLD);
      CC(cudaEventRecord(e0, s));
      if (ge)
        CC(cudaGraphLaunch(ge, s));
      else
        for (int i = 0; i < iters; i++) CK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, s));
      CC(cudaEventRecord(e1, s));
      CC(cudaEventSynchronize(e1));
      float ms = 0;
      CC(cudaEventElapsedTime(&ms, e0, e1));
      double us = ms * 1e3 / iters, mx = 0;
      MPI_Allreduce(&us, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      t.push_back(mx);
    }
    if (ge) CC(cudaGraphExecDestroy(ge));
    std::sort(t.begin(), t.end());
    double us = t[t.size() / 2];
    double algbw = (double)count * 4 / (us * 1e-6) / 1e9;
    double busbw = algbw * 2.0 * (n - 1) / n;
    if (rank == 0)
      printf("%12zu %12.2f %10.2f %10.2f %9.1f%%\n", count * 4, us, algbw, busbw,
             100.0 * busbw / copy_gbs);
  }
  ncclResult_t async;
  CK(ncclCommGetAsyncError(comm, &async));
  if (async != ncclSuccess) {
    fprintf(stderr, "asynchronous error %d: %s\n", (int)async, ncclGetLastError(comm));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  CK(ncclCommDestroy(comm));
  MPI_Finalize();
  return 0;
}
