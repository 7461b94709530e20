/* ncclperf: nccl-tests-style benchmark of ferrocoll's NCCL face in host mode,
 * side by side with the same operation through its MPI face (the two should
 * be equal: one core under both). Every rank is a process started by
 * ferrorun; the unique id travels by MPI_Bcast, as nccl-tests does with MPI=1.
 *
 * Usage: ferrorun -n N ncclperf [-t allreduce|allgather|reducescatter|broadcast|
 *          reduce|alltoall] [-b minbytes] [-e maxbytes] [-f factor]
 *          [-n iters] [-w warmup] [-d float|double|int|half|bfloat16]
 *          [-o sum|prod|max|min|avg] [-c 0|1 (check results)]
 * Sizes are total buffer bytes, as in nccl-tests; times are medians of
 * per-iteration maxima over ranks; algbw and busbw as nccl-tests defines them. */
#include <mpi.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                 \
  do {                                                                        \
    ncclResult_t r_ = (x);                                                    \
    if (r_ != ncclSuccess) {                                                  \
      fprintf(stderr, "%s: %s (%s)\n", #x, ncclGetErrorString(r_),            \
              ncclGetLastError(NULL));                                        \
      MPI_Abort(MPI_COMM_WORLD, 1);                                           \
    }                                                                         \
  } while (0)

static long parse_size(const char *s) {
  char *end;
  double v = strtod(s, &end);
  switch (*end) {
  case 'K': case 'k': v *= 1024; break;
  case 'M': case 'm': v *= 1024 * 1024; break;
  case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
  default: break;
  }
  return (long)v;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

enum { AR, AG, RS, BC, RD, A2A };

int main(int argc, char **argv) {
  int rank, n;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const char *coll = "allreduce", *dname = "float", *oname = "sum";
  long minb = 8, maxb = 32L << 20;
  double factor = 2;
  int iters = 20, warm = 10, check = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    if (!strcmp(k, "-t")) coll = v;
    else if (!strcmp(k, "-b")) minb = parse_size(v);
    else if (!strcmp(k, "-e")) maxb = parse_size(v);
    else if (!strcmp(k, "-f")) factor = atof(v);
    else if (!strcmp(k, "-n")) iters = atoi(v);
    else if (!strcmp(k, "-w")) warm = atoi(v);
    else if (!strcmp(k, "-d")) dname = v;
    else if (!strcmp(k, "-o")) oname = v;
    else if (!strcmp(k, "-c")) check = atoi(v);
  }
  int which = !strcmp(coll, "allgather") ? AG : !strcmp(coll, "reducescatter") ? RS
            : !strcmp(coll, "broadcast") ? BC : !strcmp(coll, "reduce") ? RD
            : !strcmp(coll, "alltoall") ? A2A : AR;
  ncclDataType_t dt = ncclFloat;
  MPI_Datatype mdt = MPI_FLOAT;
  int esz = 4;
  if (!strcmp(dname, "double")) { dt = ncclDouble; mdt = MPI_DOUBLE; esz = 8; }
  if (!strcmp(dname, "int")) { dt = ncclInt; mdt = MPI_INT; esz = 4; }
  if (!strcmp(dname, "half")) { dt = ncclHalf; mdt = MPI_DATATYPE_NULL; esz = 2; }
  if (!strcmp(dname, "bfloat16")) { dt = ncclBfloat16; mdt = MPI_DATATYPE_NULL; esz = 2; }
  ncclRedOp_t op = ncclSum;
  MPI_Op mop = MPI_SUM;
  if (!strcmp(oname, "prod")) { op = ncclProd; mop = MPI_PROD; }
  if (!strcmp(oname, "max")) { op = ncclMax; mop = MPI_MAX; }
  if (!strcmp(oname, "min")) { op = ncclMin; mop = MPI_MIN; }
  if (!strcmp(oname, "avg")) { op = ncclAvg; mop = MPI_OP_NULL; }

  ncclUniqueId id;
  if (rank == 0) CK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  CK(ncclCommInitRank(&comm, n, id, rank));

  char *send = malloc(maxb + 64), *recv = malloc(maxb + 64);
  double *t = malloc(sizeof(double) * (iters > 0 ? iters : 1));
  if (!send || !recv || !t) MPI_Abort(MPI_COMM_WORLD, 2);
  /* Fault every page in now, so neither library pays for first touches. */
  memset(send, 0, maxb + 64);
  memset(recv, 0, maxb + 64);
  if (rank == 0)
    printf("# ncclperf %s %s %s, %d ranks, %d iters (median), host mode\n"
           "# %12s %12s %10s %10s %10s %10s %10s %7s %s\n",
           coll, dname, oname, n, iters, "size(B)", "count", "nccl_us", "algbw",
           "busbw", "mpi_us", "mpi_busbw", "ratio", "check");
  for (long bytes = minb; bytes <= maxb; bytes = (long)(bytes * factor) > bytes ? (long)(bytes * factor) : bytes + 1) {
    /* Per-rank counts as nccl-tests derives them from the total size. */
    long total = bytes / (esz * n) * (esz * n);
    if (total == 0) total = esz * n;
    size_t count = (which == AR || which == BC || which == RD) ? (size_t)(total / esz)
                                                             : (size_t)(total / esz / n);
    size_t sbytes = (which == RS || which == A2A) ? count * n * esz : count * esz;
    for (size_t i = 0; i < sbytes / 4; i++) ((int32_t *)send)[i] = (int32_t)(rank + (i % 5));
    if (dt == ncclFloat)
      for (size_t i = 0; i < sbytes / 4; i++) ((float *)send)[i] = (float)(rank + (i % 5));
    double med[2];
    for (int lib = 0; lib < 2; lib++) {
      if (lib == 1 && mdt == MPI_DATATYPE_NULL) { med[1] = 0; continue; }
      if (lib == 1 && mop == MPI_OP_NULL && (which == AR || which == RS || which == RD)) { med[1] = 0; continue; }
      for (int it = -warm; it < iters; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (lib == 0) {
          switch (which) {
          case AR: CK(ncclAllReduce(send, recv, count, dt, op, comm, NULL)); break;
          case AG: CK(ncclAllGather(send, recv, count, dt, comm, NULL)); break;
          case RS: CK(ncclReduceScatter(send, recv, count, dt, op, comm, NULL)); break;
          case BC: CK(ncclBroadcast(send, recv, count, dt, 0, comm, NULL)); break;
          case RD: CK(ncclReduce(send, recv, count, dt, op, 0, comm, NULL)); break;
          case A2A: CK(ncclAlltoAll(send, recv, count, dt, comm, NULL)); break;
          }
        } else {
          switch (which) {
          case AR: MPI_Allreduce(send, recv, (int)count, mdt, mop, MPI_COMM_WORLD); break;
          case AG: MPI_Allgather(send, (int)count, mdt, recv, (int)count, mdt, MPI_COMM_WORLD); break;
          case RS: MPI_Reduce_scatter_block(send, recv, (int)count, mdt, mop, MPI_COMM_WORLD); break;
          case BC:
            if (rank == 0) memcpy(recv, send, count * esz);
            MPI_Bcast(recv, (int)count, mdt, 0, MPI_COMM_WORLD);
            break;
          case RD: MPI_Reduce(send, recv, (int)count, mdt, mop, 0, MPI_COMM_WORLD); break;
          case A2A: MPI_Alltoall(send, (int)count, mdt, recv, (int)count, mdt, MPI_COMM_WORLD); break;
          }
        }
        double dt_ = MPI_Wtime() - t0, mx;
        MPI_Allreduce(&dt_, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (it >= 0) t[it] = mx;
      }
      qsort(t, iters, sizeof(double), cmp);
      med[lib] = iters > 0 ? t[iters / 2] : 0;
    }
    const char *ok = "-";
    if (check && dt == ncclFloat && op == ncclSum && which == AR) {
      int bad = 0;
      CK(ncclAllReduce(send, recv, count, dt, op, comm, NULL));
      for (size_t i = 0; i < count; i++)
        if (((float *)recv)[i] != (float)(n * (n - 1) / 2 + n * (int)(i % 5))) bad++;
      int all;
      MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      ok = all ? "WRONG" : "ok";
    }
    /* nccl-tests: algbw = bytes/time; busbw factor per op. */
    double data = (which == AG || which == RS || which == A2A) ? (double)count * esz * n : (double)count * esz;
    double f = which == AR ? 2.0 * (n - 1) / n : (which == BC || which == RD) ? 1.0 : (double)(n - 1) / n;
    double algbw = med[0] > 0 ? data / med[0] / 1e9 : 0;
    double mbus = med[1] > 0 ? data / med[1] / 1e9 * f : 0;
    if (rank == 0)
      printf("  %12zu %12zu %10.2f %10.3f %10.3f %10.2f %10.3f %7.2f %s\n", (size_t)data, count,
             med[0] * 1e6, algbw, algbw * f, med[1] * 1e6, mbus,
             med[1] > 0 ? med[0] / med[1] : 0.0, ok);
    if (bytes >= maxb) break;
  }
  CK(ncclCommDestroy(comm));
  free(send); free(recv); free(t);
  MPI_Finalize();
  return 0;
}
