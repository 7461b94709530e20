#!/usr/bin/env bash
# The test suites under sanitizers:
#   asan  every C test program built with -fsanitize=address (CMake option
#         FERROCOLL_SANITIZE) and run by ctest, leaks included: ASan sees the
#         tests' own accesses and our library's copies to and from their
#         buffers (libc's memcpy family is intercepted); the by-design
#         never-freed handles are suppressed in lsan.supp.
#   miri  the pure-Rust unit tests Miri can run (reduce kernels, the scalar
#         and AVX2 paths, datatype and handle tables, frame and signature
#         codecs, the shared-memory ring and its posts, also across two
#         threads) under Miri, which checks every memory access and every
#         unsafe operation for undefined behaviour.
# Prints one result line per part and exits non-zero if one failed. A part
# whose tools are missing (Miri needs a nightly toolchain with the miri
# component) prints SKIP with the reason.
#
# Usage: tests/robustness/sanitizers.sh [asan] [miri]   (default: both)
#   BUILD_DIR   the ASan build tree (default build-asan)
set -uo pipefail
cd "$(dirname "$0")/../.."
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(asan miri)
build=${BUILD_DIR:-build-asan}
failed=0

asan() {
  local log=$build/ctest-asan.log
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFERROCOLL_SANITIZE=address >/dev/null ||
    return 1
  cmake --build "$build" -j "$(nproc)" >/dev/null || return 1
  # The ABI and drop-in tests run NVIDIA's and MPICH's uninstrumented
  # binaries; the consumer builds test packaging, not memory. The
  # cma_refused runs and bench.mpibench.wrong_sum LD_PRELOAD an interposer,
  # which ASan's runtime (it must load first) does not survive; they test
  # fallbacks and the benchmark's self-check, run outside ASan.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
    LSAN_OPTIONS=suppressions=$PWD/tests/robustness/lsan.supp:print_suppressions=0 \
    ctest --test-dir "$build" -j "${CTEST_JOBS:-2}" -E '^(nccl\.abi|dropin|consumer|cma_refused|bench\.mpibench\.wrong_sum)' \
    --output-on-failure >"$log" 2>&1
  local rc=$?
  local summary
  summary=$(grep -E 'tests passed' "$log" | tail -1)
  local errors
  errors=$(grep -c 'ERROR: \(AddressSanitizer\|LeakSanitizer\)' "$log")
  echo "sanitizers: asan: ${summary:-no summary} ($errors sanitizer reports; log $log)"
  [ $rc -eq 0 ] && [ "$errors" -eq 0 ]
}

miri() {
  if ! cargo +nightly miri --version >/dev/null 2>&1; then
    echo "sanitizers: miri: SKIP: no 'cargo +nightly miri' (rustup toolchain install nightly --component miri)"
    return 0
  fi
  local log=target/miri.log filters=(reduce:: dtype:: datatypes:: transport::frame:: transport::shm::ring:: coll::check::)
  : >"$log"
  local rc=0 line
  # Once as Miri runs it by default (no AVX2 detected: the scalar kernels),
  # once compiled for AVX2 (the vector kernels; Miri has no F16C, so the f16
  # ones stay scalar there).
  for flags in "" "-C target-feature=+avx2,+fma"; do
    CARGO_TARGET_DIR=target/miri RUSTFLAGS="$flags" \
      cargo +nightly miri test --lib -- "${filters[@]}" >>"$log" 2>&1 || rc=1
    line=$(grep -E '^test result' "$log" | tail -1)
    echo "sanitizers: miri${flags:+ ($flags)}: ${line:-no result} (log $log)"
  done
  return $rc
}

for p in "${parts[@]}"; do
  case "$p" in
    asan) asan || failed=1 ;;
    miri) miri || failed=1 ;;
    *) echo "sanitizers.sh: unknown part $p" >&2; exit 2 ;;
  esac
done
exit $failed
