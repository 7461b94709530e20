#!/usr/bin/env bash
# netpipe.sh: someone else's benchmark, unchanged. Debian's NetPIPE builds
# ping-pong two ranks through every size from 1 byte up (with sizes 3 bytes
# either side of each step), and this script runs them side by side:
#   ferrocoll: NPmpich2 (built against MPICH) with libferrocoll.so substituted
#              as libmpich.so.12, launched by ferrorun;
#   mpich:     the same NPmpich2 on MPICH, launched by mpiexec.mpich;
#   openmpi:   NPopenmpi (the same source built against Open MPI), shared
#              memory only (btl self,vader).
# Libraries alternate within each round; each cell is the median of the
# rounds of NetPIPE's own figure (the best of its trials at that size).
# Usage: bench/netpipe.sh [--rounds R] [--max BYTES] [--bidir] [--out DIR]
# --bidir: NetPIPE's -2, both ranks sending at once.
# Installs netpipe-mpich2 and netpipe-openmpi with apt-get where missing
# (as root), and builds ferrocoll's release library.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
LIBDIR=${FERROCOLL_LIBDIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}

ROUNDS=3
MAX=$((8 << 20))
MODE=""
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --max) MAX="$2"; shift 2 ;;
    --bidir) MODE="-2"; shift ;;
    --out) OUT="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "netpipe.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
log() { printf 'netpipe: %s\n' "$*" >&2; }

missing=()
command -v NPmpich2 >/dev/null 2>&1 || missing+=(netpipe-mpich2)
command -v NPopenmpi >/dev/null 2>&1 || missing+=(netpipe-openmpi)
command -v mpiexec.mpich >/dev/null 2>&1 || missing+=(mpich)
command -v mpirun.openmpi >/dev/null 2>&1 || missing+=(openmpi-bin)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null ||
      { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null; }
  else
    echo "netpipe.sh: missing ${missing[*]}; install them (Debian packages)" >&2
    exit 1
  fi
fi

log "building ferrocoll (cargo build --release)"
(cd "$ROOT" && nice -n 10 cargo build --release --quiet)
OUT=${OUT:-$HERE/results/netpipe-$(date -u +%Y-%m-%d-%H%M%S)}
mkdir -p "$OUT/raw" "$OUT/dropin"
# A copy, so a rebuild during the run changes nothing measured.
cp "$LIBDIR/libferrocoll.so" "$OUT/dropin/libmpich.so.12"
cp "$LIBDIR/ferrorun" "$OUT/dropin/ferrorun"
resolved=$(LD_LIBRARY_PATH="$OUT/dropin" ldd "$(command -v NPmpich2)" | awk '/libmpich\.so\.12/ {print $3}')
[ "$resolved" = "$OUT/dropin/libmpich.so.12" ] ||
  { echo "netpipe.sh: NPmpich2 loads $resolved, not ferrocoll" >&2; exit 1; }

{
  echo "# date: $(date -u +%Y-%m-%dT%H:%M:%S+00:00)"
  echo "# host: $(uname -srm), $(nproc) cores, load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# commit: $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "# NetPIPE: $(dpkg-query -W -f '${Package} ${Version}, ' netpipe-mpich2 netpipe-openmpi 2>/dev/null)args: -u $MAX $MODE"
  echo "# rounds: $ROUNDS (libraries alternate within a round)"
} >"$OUT/meta.txt"

run() {
  local lib=$1 round=$2 out="$OUT/raw/$1-r$2.out"
  case $lib in
    ferrocoll)
      LD_LIBRARY_PATH="$OUT/dropin" timeout 600 "$OUT/dropin/ferrorun" -n 2 \
        NPmpich2 -u "$MAX" $MODE -o "$out" ;;
    mpich) timeout 600 mpiexec.mpich -n 2 NPmpich2 -u "$MAX" $MODE -o "$out" ;;
    openmpi)
      OMPI_MCA_btl=self,vader timeout 600 mpirun.openmpi --allow-run-as-root \
        --oversubscribe -np 2 NPopenmpi -u "$MAX" $MODE -o "$out" ;;
  esac >"$OUT/raw/$lib-r$round.log" 2>&1 || log "$lib round $round failed (see $OUT/raw/$lib-r$round.log)"
}

libs=(ferrocoll mpich openmpi)
for round in $(seq 1 "$ROUNDS"); do
  for i in 0 1 2; do
    lib=${libs[$(((i + round - 1) % 3))]}
    log "round $round/$ROUNDS: $lib"
    run "$lib" "$round"
  done
done

python3 - "$OUT" "$ROUNDS" <<'PY' | tee "$OUT/table.txt"
import collections, statistics as st, sys
out, rounds = sys.argv[1], int(sys.argv[2])
libs = ["ferrocoll", "mpich", "openmpi"]
# NetPIPE's output file: bytes, Mbit/s, seconds (one way) per line.
t = collections.defaultdict(lambda: collections.defaultdict(list))
for lib in libs:
    for r in range(1, rounds + 1):
        try:
            for line in open(f"{out}/raw/{lib}-r{r}.out"):
                f = line.split()
                if len(f) >= 3:
                    t[int(f[0])][lib].append(float(f[2]) * 1e6)
        except FileNotFoundError:
            pass
print(open(f"{out}/meta.txt").read().rstrip())
print("# us: one-way time (half a round trip), median of the rounds; GB/s = bytes / that time")
print("# ratio = ferrocoll / the faster peer (<1: ferrocoll faster)")
print(f"{'bytes':>9} {'ferrocoll':>10} {'mpich':>10} {'openmpi':>10} {'fc GB/s':>8} {'peer GB/s':>9} {'ratio':>6}")
slower, n, worst = [], 0, (0.0, 0)
for b in sorted(t):
    row = t[b]
    if any(not row[l] for l in libs):
        continue
    m = {l: st.median(row[l]) for l in libs}
    peer = min(m["mpich"], m["openmpi"])
    ratio = m["ferrocoll"] / peer
    n += 1
    if ratio > 1:
        slower.append(b)
    worst = max(worst, (ratio, b))
    if b & (b - 1) == 0:
        print(f"{b:>9} {m['ferrocoll']:>10.3f} {m['mpich']:>10.3f} {m['openmpi']:>10.3f} "
              f"{b / m['ferrocoll'] / 1e3:>8.3f} {b / peer / 1e3:>9.3f} {ratio:>6.2f}")
print(f"# sizes measured by all three: {n} (the table shows the powers of two); "
      f"ferrocoll slower than the faster peer at {len(slower)}"
      + (f": {', '.join(map(str, slower[:12]))}{' ...' if len(slower) > 12 else ''}" if slower else "")
      + f"; worst ratio {worst[0]:.2f} at {worst[1]} bytes")
PY
log "results in $OUT"
