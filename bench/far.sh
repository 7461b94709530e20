#!/usr/bin/env bash
# far.sh: what the host's far state does to large transfers, with and without
# ferrocoll's far watch, against Open MPI in the same minutes.
# On shared virtual machines the host at times runs two vCPUs far apart for
# seconds (a cache line's round trip, `floor --line`, goes from 100-130 ns to
# about 500 ns); compare.sh waits that state out, this script seeks it. Each
# round runs ferrocoll as it is (FERROCOLL_FAR=auto), ferrocoll with
# FERROCOLL_FAR=off (every shared-memory write cached, as before the watch)
# and Open MPI (btl self,vader), one after the other, with a probe before and
# after each run. A run counts as "far" when both probes read over --above ns
# and under --busy ns (over that, something else held a core), as "usual" when
# both read under --below ns, and is dropped otherwise. The
# table gives, per state, each library's median over its runs, and how many.
# Usage: bench/far.sh [--ranks N] [--ops a,b] [--min BYTES] [--max BYTES]
#        [--far-rounds R] [--usual-rounds R] [--above NS] [--below NS]
#        [--busy NS] [--wait SECS]
# --far-rounds R: rounds started in the far state (default 3); before each,
#        wait up to --wait seconds (default 600) for a probe over --above.
# --usual-rounds R: rounds started in the usual state (default 2).
# Needs bench/build from bench/compare.sh (mpibench.ferrocoll,
# mpibench.openmpi, floor) and ferrocoll's release build.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=${ROOT:-$(cd "$HERE/.." && pwd)}
LIBDIR=${FERROCOLL_LIBDIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}
BUILD=$HERE/build

RANKS=2
OPS=pingpong,sendrecv,bcast,allreduce,alltoall
MIN=64K
MAX=16M
FAR_ROUNDS=3
USUAL_ROUNDS=2
ABOVE=300
BELOW=150
BUSY=2000
WAIT=600

usage() { sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case $1 in
    --ranks) RANKS=$2; shift ;;
    --ops) OPS=$2; shift ;;
    --min) MIN=$2; shift ;;
    --max) MAX=$2; shift ;;
    --far-rounds) FAR_ROUNDS=$2; shift ;;
    --usual-rounds) USUAL_ROUNDS=$2; shift ;;
    --above) ABOVE=$2; shift ;;
    --below) BELOW=$2; shift ;;
    --busy) BUSY=$2; shift ;;
    --wait) WAIT=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "far.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

for f in mpibench.ferrocoll mpibench.openmpi floor; do
  if [ ! -x "$BUILD/$f" ]; then
    echo "far.sh: $BUILD/$f is missing: run bench/compare.sh --quick first" >&2
    exit 2
  fi
done
[ -x "$LIBDIR/ferrorun" ] || { echo "far.sh: no $LIBDIR/ferrorun: cargo build --release" >&2; exit 2; }

ARGS=(-o "$OPS" -b "$MIN" -e "$MAX" -f 4 -r 3 -T 0.05)
RUNS=$(mktemp)
trap 'rm -f "$RUNS"' EXIT

line() { timeout 10 "$BUILD/floor" --line 2>/dev/null || echo 0; }
far_ns() { [ "$1" -gt "$ABOVE" ] && [ "$1" -lt "$BUSY" ]; }

run_lib() { # lib
  case $1 in
    auto | off)
      FERROCOLL_FAR=$1 LD_LIBRARY_PATH=$LIBDIR timeout 300 "$LIBDIR/ferrorun" -n "$RANKS" \
        "$BUILD/mpibench.ferrocoll" "${ARGS[@]}" ;;
    openmpi)
      env OMPI_MCA_btl=self,vader timeout 300 mpirun.openmpi --oversubscribe --allow-run-as-root \
        -np "$RANKS" "$BUILD/mpibench.openmpi" "${ARGS[@]}" ;;
  esac
}

round() {
  local lib before after state
  for lib in auto off openmpi; do
    before=$(line)
    out=$(run_lib "$lib" 2>&1) || { echo "far.sh: $lib failed" >&2; continue; }
    after=$(line)
    if far_ns "$before" && far_ns "$after"; then
      state=far
    elif [ "$before" -gt 0 ] && [ "$after" -gt 0 ] && [ "$before" -lt "$BELOW" ] && [ "$after" -lt "$BELOW" ]; then
      state=usual
    else
      state=mixed
    fi
    echo "far.sh: $lib: line $before/$after ns: $state" >&2
    grep -v '^#' <<<"$out" | awk -v s="$state" -v l="$lib" 'NF >= 6 && $6 == "yes" { print s, l, $1, $2, $3 }' >>"$RUNS" || true
    grep -v '^#' <<<"$out" | awk -v l="$lib" 'NF >= 6 && $6 != "yes" { print "far.sh: " l " gave a wrong result: " $0; bad = 1 } END { exit bad }' >&2 || exit 1
  done
}

# Waits up to WAIT seconds for a probe on the right side of the line.
seek() { # far|usual
  local waited=0 ns
  while [ "$waited" -lt "$WAIT" ]; do
    ns=$(line)
    if [ "$1" = far ] && far_ns "$ns"; then return 0; fi
    if [ "$1" = usual ] && [ "$ns" -gt 0 ] && [ "$ns" -lt "$BELOW" ]; then return 0; fi
    sleep 2
    waited=$((waited + 2))
  done
  echo "far.sh: no $1 state within ${WAIT}s" >&2
  return 1
}

for _ in $(seq "$FAR_ROUNDS"); do seek far && round; done
for _ in $(seq "$USUAL_ROUNDS"); do seek usual && round; done

echo "# far.sh: $RANKS ranks, us (median over runs [runs]); far: line round trip over $ABOVE ns (and under $BUSY) before and after the run, usual: under $BELOW"
python3 - "$RUNS" <<'EOF'
import sys, statistics
from collections import defaultdict
runs = defaultdict(list)
order = []
for l in open(sys.argv[1]):
    state, lib, op, size, us = l.split()
    key = (op, int(size))
    if key not in order:
        order.append(key)
    runs[(state, lib, key)].append(float(us))
def cell(state, lib, key):
    v = runs.get((state, lib, key))
    if not v:
        return "-"
    m = statistics.median(v)
    return f"{m:.2f} [{len(v)}]" if m < 10 else f"{m:.1f} [{len(v)}]"
cols = [(s, l) for s in ("far", "usual") for l in ("auto", "off", "openmpi")]
print("| op | bytes | " + " | ".join(f"{s}: {l}" for s, l in cols) + " |")
print("|---|---|" + "---|" * len(cols))
for key in order:
    print(f"| {key[0]} | {key[1]} | " + " | ".join(cell(s, l, key) for s, l in cols) + " |")
EOF
