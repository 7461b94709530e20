#!/usr/bin/env bash
# The GPU tests of the NCCL face (c_tests/gpu/t_nccl_gpu.cu) and the GPU
# allreduce benchmark (bench/ncclperf_gpu.cu): built with nvcc against the
# ferrocoll library in LIBDIR, run at 1, 2 and 4 ranks on the machine's GPU,
# once on the IPC path (the default) and once forced through host staging.
# Skips, saying why, where there is no nvcc or no GPU (CI).
# Usage: c_tests/gpu/run.sh [tests|bench|all]   (LIBDIR: default target/release;
#   RUNS, e.g. "test:2:auto bench:2:staged", picks runs; STEP_TIMEOUT, seconds)
# Paths: auto (the default choice), staged (FERROCOLL_ALGO=gpu=staged), ordered
# (FERROCOLL_ALGO=gpu=ordered: stream-ordered even where processes share the
# GPU, which tests the events between processes on a machine with one GPU),
# graph (FERROCOLL_ALGO=gpu=graph: every IPC call ordered by barriers on the
# streams, as captured calls are), capture (bench only: the calls replayed
# from a CUDA graph).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LIBDIR=${LIBDIR:-$ROOT/target/release}
what=${1:-all}
NVCC=${NVCC:-$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)}
if [ -z "$NVCC" ]; then
  echo "SKIP gpu tests: no nvcc (CUDA toolkit) on this machine"
  exit 0
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP gpu tests: no NVIDIA GPU visible (nvidia-smi -L failed)"
  exit 0
fi
# NVRTC compiles the reduction kernel at run time: make sure it is found.
if ! ldconfig -p | grep -q 'libnvrtc\.so'; then
  d=$(dirname "$(find / -name 'libnvrtc.so*' -not -path '*/proc/*' 2>/dev/null | head -1)" 2>/dev/null)
  [ -n "$d" ] && export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export LD_LIBRARY_PATH=$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The device path is on by default: test it so.
unset FERROCOLL_GPU
B=${BUILD:-$ROOT/build-gpu}
mkdir -p "$B"
flags=(-O2 -std=c++17 -I"$ROOT/include" -I"$ROOT/c_tests" -I"$ROOT/c_tests/nccl"
  -L"$LIBDIR" -lferrocoll -Xlinker -rpath -Xlinker "$LIBDIR")
"$NVCC" "${flags[@]}" "$ROOT/c_tests/gpu/t_nccl_gpu.cu" -o "$B/t_nccl_gpu" || exit 1
"$NVCC" "${flags[@]}" "$ROOT/bench/ncclperf_gpu.cu" -o "$B/ncclperf_gpu" || exit 1
# What to run: "kind:ranks:path" items (kind test or bench, path auto or
# staged), in order; each run is stopped after STEP_TIMEOUT seconds.
default="test:1:auto test:2:auto test:4:auto test:1:staged test:2:staged test:4:staged"
default="$default test:2:ordered test:4:ordered test:1:graph test:2:graph test:4:graph"
default="$default bench:2:auto bench:2:staged bench:2:graph bench:2:capture"
case $what in
  tests) RUNS=${RUNS:-$(echo $default | tr ' ' '\n' | grep '^test' | tr '\n' ' ')} ;;
  bench) RUNS=${RUNS:-$(echo $default | tr ' ' '\n' | grep '^bench' | tr '\n' ' ')} ;;
  *) RUNS=${RUNS:-$default} ;;
esac
fail=0
for item in $RUNS; do
  IFS=: read -r kind n path <<<"$item"
  env=()
  [ "$path" = auto ] || [ "$path" = capture ] || env=(FERROCOLL_ALGO=gpu=$path)
  echo "== $kind, $n ranks, path $path"
  if [ "$kind" = test ]; then
    cmd=("$B/t_nccl_gpu")
  else
    cmd=("$B/ncclperf_gpu" -b 4 -e 256M -f 4)
    [ "$path" = staged ] && cmd+=(-n 5 -w 2)
    [ "$path" = capture ] && cmd+=(-g 1)
  fi
  env "${env[@]}" timeout "${STEP_TIMEOUT:-300}" "$LIBDIR/ferrorun" -n "$n" "${cmd[@]}" ||
    { echo "FAIL $kind np$n $path (exit $?)"; fail=1; }
done
exit $fail
