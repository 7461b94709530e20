#!/usr/bin/env bash
# contend.sh: ranks that outnumber cores beside busy processes outside the
# job, with and without ferrocoll's slice watch, against Open MPI in the
# same minutes.
# Each round starts --busy busy loops (plain shell loops that never yield,
# as a spinning OpenMP thread or a build would hold a core), then runs
# ferrocoll with FERROCOLL_SLICE=off (the kernel's default slices, as
# before the watch), ferrocoll as it is (FERROCOLL_SLICE=auto) and Open MPI
# (btl self,vader, --oversubscribe), one after the other, and stops the
# loops. The table gives each library's median over the rounds, us a call
# (mpibench -t), and the ratios auto/off and auto/Open MPI.
# Usage: bench/contend.sh [--ranks N] [--busy N] [--ops a,b] [--min BYTES]
#        [--max BYTES] [--factor F] [--rounds R]
# Defaults: 4 ranks, 1 busy loop, allreduce,barrier,sendrecv,alltoall,bcast,
# 8 B to 2 MiB by 512, 2 rounds.
# Needs bench/build from bench/compare.sh (mpibench.ferrocoll,
# mpibench.openmpi) and ferrocoll's release build.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=${ROOT:-$(cd "$HERE/.." && pwd)}
LIBDIR=${FERROCOLL_LIBDIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}
BUILD=$HERE/build

RANKS=4
BUSY=1
OPS=allreduce,barrier,sendrecv,alltoall,bcast
MIN=8
MAX=2M
FACTOR=512
ROUNDS=2

usage() { sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case $1 in
    --ranks) RANKS=$2; shift ;;
    --busy) BUSY=$2; shift ;;
    --ops) OPS=$2; shift ;;
    --min) MIN=$2; shift ;;
    --max) MAX=$2; shift ;;
    --factor) FACTOR=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "contend.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

for f in mpibench.ferrocoll mpibench.openmpi; do
  [ -x "$BUILD/$f" ] || { echo "contend.sh: $BUILD/$f missing: run bench/compare.sh first" >&2; exit 2; }
done
FERRORUN=$LIBDIR/ferrorun
[ -x "$FERRORUN" ] || { echo "contend.sh: $FERRORUN missing: cargo build --release" >&2; exit 2; }

OUT=$(mktemp -d)
LOOPS=()
stop_loops() {
  if [ ${#LOOPS[@]} -gt 0 ]; then
    kill "${LOOPS[@]}" 2>/dev/null || true
    wait "${LOOPS[@]}" 2>/dev/null || true
  fi
  LOOPS=()
}
cleanup() {
  stop_loops
  rm -rf "$OUT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

args=(-o "$OPS" -b "$MIN" -e "$MAX" -f "$FACTOR" -t)
echo "# contend.sh: $RANKS ranks on $(nproc) CPUs beside $BUSY busy loop(s), $ROUNDS round(s), $(date -u +%FT%TZ)"
for r in $(seq "$ROUNDS"); do
  for _ in $(seq "$BUSY"); do
    (while :; do :; done) &
    LOOPS+=($!)
  done
  for lib in off auto ompi; do
    if [ "$lib" = ompi ]; then
      OMPI_MCA_btl=self,vader timeout 900 mpirun.openmpi --oversubscribe --allow-run-as-root \
        -np "$RANKS" "$BUILD/mpibench.openmpi" "${args[@]}" 2>/dev/null || true
    else
      FERROCOLL_SLICE=$lib LD_LIBRARY_PATH=$LIBDIR timeout 900 "$FERRORUN" -n "$RANKS" \
        "$BUILD/mpibench.ferrocoll" "${args[@]}" 2>/dev/null || true
    fi | grep -v '^#' >"$OUT/$lib.$r" || true
  done
  stop_loops
done

python3 - "$OUT" <<'PY'
import collections, glob, statistics, sys
out = sys.argv[1]
libs = ["off", "auto", "ompi"]
runs = {l: collections.defaultdict(list) for l in libs}
for l in libs:
    for f in glob.glob(f"{out}/{l}.*"):
        for line in open(f):
            p = line.split()
            if len(p) > 2:
                runs[l][(p[0], int(p[1]))].append(float(p[2]))
def med(l, k):
    v = runs[l].get(k)
    return statistics.median(v) if v else float("nan")
print(f"{'op':14s} {'bytes':>9s} {'slice off':>11s} {'auto':>11s} {'Open MPI':>11s} {'auto/off':>9s} {'auto/ompi':>10s}")
for k in sorted(set(runs["off"]) | set(runs["auto"])):
    off, auto, om = med("off", k), med("auto", k), med("ompi", k)
    print(f"{k[0]:14s} {k[1]:9d} {off:11.2f} {auto:11.2f} {om:11.2f} {auto / off:9.3f} {auto / om:10.3f}")
PY
