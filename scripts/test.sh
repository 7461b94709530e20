#!/usr/bin/env bash
# Everything CI checks, in order, stopping at the first failure: formatting, clippy,
# clippy and the unit tests for aarch64 (under qemu-user), the Rust tests, bounded
# fuzzing, the CMake build, ctest (C tests, examples, consumer tests), then the
# sanitizers (ASan over the C tests, Miri).
# Prints one summary line at the end. BUILD_DIR overrides build/; CTEST_JOBS the
# ctest parallelism (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."

build=${BUILD_DIR:-build}
start=$SECONDS
step_name="deps"
done_steps=()
ctest_count=""

summary() {
  local rc=$?
  local took=$((SECONDS - start))
  if [ "$rc" -eq 0 ]; then
    echo "test.sh: PASS (${done_steps[*]}; ${ctest_count:-?} ctest tests) in ${took}s"
  else
    echo "test.sh: FAIL at step '${step_name}' (exit ${rc}) after ${took}s; passed: ${done_steps[*]:-none}"
  fi
}
trap summary EXIT

step() {
  step_name=$1
  shift
  echo
  echo "=== ${step_name}: $*"
  local t0=$SECONDS
  "$@"
  echo "=== ${step_name}: ok ($((SECONDS - t0))s)"
  done_steps+=("${step_name}")
}

run_ctest() {
  local log="$build/ctest.log"
  ctest --test-dir "$build" --output-on-failure -j "${CTEST_JOBS:-2}" 2>&1 | tee "$log"
  ctest_count=$(sed -n 's/.*tests passed, 0 tests failed out of \([0-9][0-9]*\).*/\1/p' "$log")
}

step deps scripts/deps.sh
step fmt cargo fmt --all --check
step clippy cargo clippy --all-targets --features fuzzing -- -D warnings
# The same for aarch64 Linux, and the library's unit tests there (qemu-user).
step aarch64 scripts/aarch64.sh
step cargo-test cargo test --release
# Every fuzz target (src/fuzz.rs): its corpus, then mutations for a bounded time.
step fuzz env FERROCOLL_FUZZ_SECS="${FERROCOLL_FUZZ_SECS:-10}" \
  cargo test --release --features fuzzing --test fuzz -- --nocapture
# The collective matrix again with every pair of ranks on loop-back TCP.
step cargo-test-tcp env FERROCOLL_TRANSPORT=tcp FERROCOLL_NSOCKS=3 cargo test --release --test coll_matrix
step configure cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
step build cmake --build "$build" -j "$(nproc)"
step ctest run_ctest
# The GPU tests of the NCCL face: they print SKIP with the reason where there
# is no nvcc or no GPU (as on CI), and run on the device machine.
step gpu env LIBDIR="$PWD/target/release" BUILD="$build/gpu" c_tests/gpu/run.sh tests
# The C tests again, built with AddressSanitizer (leaks included), and the
# pure-Rust unit tests under Miri where a nightly toolchain has it.
step sanitizers env BUILD_DIR="${build}-asan" tests/robustness/sanitizers.sh
