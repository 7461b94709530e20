#!/usr/bin/env bash
# nccl.sh: the NCCL mode of the benchmarks. Builds bench/ncclperf.c against
# ferrocoll and runs it (host mode) at each rank count for each collective,
# printing nccl-tests-style tables with the same operation through ferrocoll's
# MPI face beside it (ratio = nccl time / MPI time; expect about 1.0).
# Usage: bench/nccl.sh [--ranks "2 4"] [--colls "allreduce allgather ..."] [-- ncclperf args]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
LIBDIR=${FERROCOLL_LIBDIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}
RANKS="2 4"
COLLS="allreduce allgather reducescatter broadcast reduce alltoall"
while [ $# -gt 0 ]; do
  case $1 in
    --ranks) RANKS=$2; shift ;;
    --colls) COLLS=$2; shift ;;
    --) shift; break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
(cd "$ROOT" && cargo build --release --quiet)
mkdir -p "$HERE/build"
cc -O2 -Wall -Wextra -I"$ROOT/include" "$HERE/ncclperf.c" -o "$HERE/build/ncclperf" \
  -L"$LIBDIR" -lferrocoll -Wl,-rpath,"$LIBDIR"
for n in $RANKS; do
  for c in $COLLS; do
    "$LIBDIR/ferrorun" -n "$n" "$HERE/build/ncclperf" -t "$c" "$@"
  done
done
