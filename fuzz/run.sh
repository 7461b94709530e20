#!/usr/bin/env bash
# Coverage-guided fuzzing of every target with cargo fuzz (libFuzzer and
# AddressSanitizer), by hand: each target runs SECONDS (default 600) from
# its committed corpus, then the inputs that found new coverage are merged
# into fuzz/corpus/<target>/ (what is kept). Prints one table line per target
# and appends it to fuzz/log.tsv (the figures README.md quotes).
#
# Usage: fuzz/run.sh [SECONDS] [TARGET...]
# Needs a nightly toolchain with cargo-fuzz (`cargo install cargo-fuzz`).
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(tcp_stream handshake store_server store_replies pmi handles)
cargo +nightly fuzz --version >/dev/null 2>&1 || {
  echo "fuzz/run.sh: needs 'cargo +nightly fuzz' (rustup toolchain install nightly; cargo install cargo-fuzz)" >&2
  exit 2
}
cargo +nightly fuzz build -O >/dev/null
printf '%-14s %8s %12s %8s %6s %8s %s\n' target seconds execs exec/s cov corpus result
for t in "${targets[@]}"; do
  work=artifacts/work-$t
  rm -rf "$work" && mkdir -p "$work" "artifacts/$t"
  log=artifacts/$t.log
  # -malloc_limit_mb: any single allocation over 64 MiB is a finding.
  rc=0
  cargo +nightly fuzz run -O "$t" "$work" "corpus/$t" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=64 -timeout=10 \
    -print_final_stats=1 >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^Done \([0-9]*\) runs in.*/\1/p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  # Keep what found new coverage (the seeds and earlier finds stay).
  cargo +nightly fuzz run -O "$t" "corpus/$t" "$work" -- -merge=1 >/dev/null 2>&1 || true
  n=$(find "corpus/$t" -type f | wc -l)
  result=$([ $rc -eq 0 ] && echo ok || echo "FINDING (see $log, artifacts/$t)")
  line=$(printf '%-14s %8s %12s %8s %6s %8s %s' "$t" "$secs" "${execs:-?}" \
    "$(( ${execs:-0} / (secs > 0 ? secs : 1) ))" "${cov:-?}" "$n" "$result")
  echo "$line"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%F)" "$t" "$secs" "${execs:-?}" "${cov:-?}" "$n" \
    "$([ $rc -eq 0 ] && echo ok || echo finding)" >>log.tsv
done
