#!/usr/bin/env bash
# compare.sh: build bench/mpibench.c against ferrocoll, Open MPI and MPICH, run
# each at several rank counts for R rounds (libraries alternate within a round
# so slow drifts of a shared machine hit all of them), then print one table per
# rank count with the median of the rounds, and the foundation targets' verdicts.
# Usage: bench/compare.sh [--quick] [--tcp] [--ranks "2 4"] [--ops a,b] [--rounds R]
#        [--libs "ferrocoll openmpi mpich"] [--timeout SECS] [--out DIR]
#        [--args "extra mpibench args"] [--settle SECS] [--untouched]
# Every call's send buffer is written first (mpibench -t), as in a program
# that sends what it has just computed; --untouched leaves it as it is, as
# OSU's and IMB's ping-pongs do (a receiver reading it in place then finds it
# in its own cache from the second call on).
# --settle: before each run, wait up to SECS (default 20; 0 = never) for the
#        host to leave its slow state (a cache-line round trip over twice the
#        lower quartile of the probes so far), and run a run that ended in it
#        once more; at most 15 minutes of waiting in all.
# --tcp: every rank pair over loop-back TCP: ferrocoll with FERROCOLL_TRANSPORT=tcp
#        against Open MPI with --mca btl tcp,self (MPICH is left out).
# --veth: two "hosts" (network namespaces this script makes, joined by a veth
#        pair, 10.78.0.1-2/24; removed at exit), half the ranks on each:
#        ferrocoll (shared memory inside a host, TCP across) against Open MPI
#        (btl self,vader,tcp), both started from host 0 with a remote shell
#        that enters the other namespace. Needs root; MPICH is left out.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=${ROOT:-$(cd "$HERE/.." && pwd)}
# cargo puts its output under CARGO_TARGET_DIR when that is set.
LIBDIR=${FERROCOLL_LIBDIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}
BUILD=$HERE/build

QUICK=0
TCP=0
VETH=0
RANKS="2 4"
OPS=all
ROUNDS=3
LIBS="ferrocoll openmpi mpich"
TIMEOUT=""
OUT=""
EXTRA=""
SETTLE=20
UNTOUCHED=0
SETTLE_BUDGET=900

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | grep '^#' | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case $1 in
    --quick) QUICK=1 ;;
    --tcp) TCP=1; LIBS="ferrocoll openmpi" ;;
    --veth) VETH=1; TCP=1; LIBS="ferrocoll openmpi" ;;
    --ranks) RANKS=$2; shift ;;
    --ops) OPS=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --libs) LIBS=$2; shift ;;
    --timeout) TIMEOUT=$2; shift ;;
    --out) OUT=$2; shift ;;
    --args) EXTRA=$2; shift ;;
    --settle) SETTLE=$2; shift ;;
    --untouched) UNTOUCHED=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

if [ "$QUICK" = 1 ]; then
  # Smoke run: 6 sizes that still reach both verdict ranges (<=1 KiB, >=1 MiB).
  BENCH_ARGS="-b 8 -e 8M -f 16 -T 0.05 -r 3 -w 5 -i 200"
  ROUNDS=1
  TIMEOUT=${TIMEOUT:-120}
  MPICH_OVERSUB_ARGS="-r 2 -T 0.03"
else
  BENCH_ARGS="-b 8 -e 64M -f 4 -T 0.2 -r 5"
  TIMEOUT=${TIMEOUT:-300}
  MPICH_OVERSUB_ARGS="-r 3 -T 0.1"
fi
[ "$UNTOUCHED" = 1 ] || BENCH_ARGS="$BENCH_ARGS -t"
# MPICH_OVERSUB_ARGS: MPICH (ch4) spins when ranks outnumber cores, so every
# call costs a scheduler time slice (4-20 ms): fewer batches, smaller budget.
NCORES=$(nproc)

OUT=${OUT:-$HERE/results/$(date +%Y-%m-%d-%H%M%S)}
mkdir -p "$OUT/raw" "$BUILD"
: >"$OUT/skipped.tsv"
printf 'lib\tranks\tround\trc\tseconds\tops\tline_ns\n' >"$OUT/runs.tsv"

log() { echo "compare.sh: $*" >&2; }
skip() { printf '%s\t%s\n' "$1" "$2" >>"$OUT/skipped.tsv"; log "SKIP $1: $2"; }

CFLAGS="-O2 -Wall -Wextra"
declare -A BIN=()

build_peer() { # lib compiler
  if ! command -v "$2" >/dev/null; then skip "$1" "$2 not found"; return; fi
  if nice -n 10 "$2" $CFLAGS -o "$BUILD/mpibench.$1" "$HERE/mpibench.c" \
      >"$OUT/build-$1.log" 2>&1; then
    BIN[$1]=$BUILD/mpibench.$1
  else
    skip "$1" "compile failed, see $OUT/build-$1.log"
  fi
}

build_ferrocoll() {
  local blog=$OUT/build-ferrocoll.log
  : >"$blog"
  if [ ! -f "$LIBDIR/libferrocoll.so" ] || [ ! -x "$LIBDIR/ferrorun" ] \
      || [ ! -f "$ROOT/include/mpi.h" ]; then
    if [ ! -f "$ROOT/Cargo.toml" ]; then
      skip ferrocoll "library not built and no $ROOT/Cargo.toml to build it from"
      return
    fi
    log "building ferrocoll (cargo build --release, log in $blog)"
    if ! (cd "$ROOT" && nice -n 10 cargo build --release) >>"$blog" 2>&1; then
      skip ferrocoll "cargo build --release failed, see $blog"
      return
    fi
  fi
  local f
  for f in "$LIBDIR/libferrocoll.so" "$LIBDIR/ferrorun" "$ROOT/include/mpi.h"; do
    if [ ! -e "$f" ]; then skip ferrocoll "$f missing after cargo build"; return; fi
  done
  if nice -n 10 cc $CFLAGS -I"$ROOT/include" -o "$BUILD/mpibench.ferrocoll" \
      "$HERE/mpibench.c" -L"$LIBDIR" -lferrocoll -Wl,-rpath,"$LIBDIR" >>"$blog" 2>&1; then
    BIN[ferrocoll]=$BUILD/mpibench.ferrocoll
  else
    skip ferrocoll "compiling mpibench.c against $ROOT/include failed, see $blog"
  fi
}

for lib in $LIBS; do
  case $lib in
    openmpi) build_peer openmpi mpicc.openmpi ;;
    mpich) build_peer mpich mpicc.mpich ;;
    ferrocoll) build_ferrocoll ;;
    *) echo "compare.sh: unknown library $lib" >&2; exit 2 ;;
  esac
done
ACTIVE=""
for lib in $LIBS; do [ -n "${BIN[$lib]:-}" ] && ACTIVE="$ACTIVE $lib"; done
ACTIVE=${ACTIVE# }
[ -n "$ACTIVE" ] || { log "nothing to run"; exit 1; }

# A timed-out launcher can leave ranks spinning, which would skew every later
# run: kill the processes running our own binary, one pid at a time.
reap_strays() { # binary path
  local p exe
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    if [ "$exe" = "$1" ]; then kill -9 "${p#/proc/}" 2>/dev/null || true; fi
  done
}

# Every cache-line round trip probed so far (ns), the last one, and the
# seconds spent waiting for the slow state to pass (--settle).
PROBES=()
LINE_NS=-
SETTLED=0
REPEATS=0

# Probes the cache-line round trip into LINE_NS ("-" when it fails).
probe() {
  LINE_NS=$(timeout 10 "$FLOOR" --line 2>/dev/null) || LINE_NS=-
  case $LINE_NS in
    '' | *[!0-9]*) LINE_NS=- ;;
    *) PROBES+=("$LINE_NS") ;;
  esac
}

# Whether a probe reads over twice the lower quartile of all probes so far
# (compare.py's test, which sees all of them).
is_slow() {
  case $1 in
    '' | *[!0-9]*) return 1 ;;
  esac
  [ "${#PROBES[@]}" -ge 4 ] || return 1
  local q
  q=$(printf '%s\n' "${PROBES[@]}" | sort -n | sed -n "$((${#PROBES[@]} / 4 + 1))p")
  [ "$1" -gt $((2 * q)) ]
}

settle_left() { [ -n "$FLOOR" ] && [ "$SETTLE" -gt 0 ] && [ "$SETTLED" -lt "$SETTLE_BUDGET" ]; }

# Waits, up to --settle seconds, until the host is out of its slow state.
settle() {
  local waited=0
  while settle_left && [ "$waited" -lt "$SETTLE" ]; do
    probe
    is_slow "$LINE_NS" || return 0
    sleep 1
    waited=$((waited + 1))
    SETTLED=$((SETTLED + 1))
  done
}

run_one() { # lib ranks round ops
  local lib=$1 n=$2 round=$3 ops=$4 rc=0 t0 secs args=$BENCH_ARGS
  local out=$OUT/raw/$lib-np$n-r$round.txt
  local -a cmd
  [ "$lib" = mpich ] && [ "$n" -gt "$NCORES" ] && args="$args $MPICH_OVERSUB_ARGS"
  case $lib in
    openmpi) cmd=(env OMPI_MCA_btl=self,vader mpirun.openmpi --oversubscribe
                  --allow-run-as-root -np "$n") ;;
    mpich) cmd=(mpiexec.mpich -n "$n") ;;
    ferrocoll) cmd=("$LIBDIR/ferrorun" -n "$n") ;;
  esac
  if [ "$VETH" = 1 ]; then
    local half=$((n / 2)) hosts
    hosts="$NS-0:$((n - half)),$NS-1:$half"
    # Ranks of the two namespaces share this machine's cores: Open MPI must
    # yield when idle, as it does when it sees ranks outnumber cores.
    case $lib in
      openmpi) cmd=(env OMPI_MCA_plm_rsh_agent="$HERE/netns_rsh.sh" OMPI_MCA_btl=self,vader,tcp
                    OMPI_MCA_btl_tcp_if_include=veth0 OMPI_MCA_oob_tcp_if_include=veth0
                    OMPI_MCA_mpi_yield_when_idle=1
                    mpirun.openmpi --oversubscribe --allow-run-as-root --host "$hosts" -np "$n") ;;
      ferrocoll) cmd=(env FERROCOLL_SOCKET_IFNAME=veth "$LIBDIR/ferrorun" --hosts "$hosts"
                      --rsh "sh $HERE/netns_rsh.sh {host}") ;;
    esac
    cmd=(ip netns exec "$NS-0" unshare --uts "$HERE/netns_rsh.sh" --here "$NS-0" "${cmd[@]}")
  elif [ "$TCP" = 1 ]; then
    case $lib in
      openmpi) cmd=(env OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo
                    mpirun.openmpi --oversubscribe --allow-run-as-root -np "$n") ;;
      ferrocoll) cmd=(env FERROCOLL_TRANSPORT=tcp "${cmd[@]}") ;;
    esac
  fi
  # The host's state around the run (see FLOOR below): before/after. A
  # run that starts or ends in the slow state is worth little: wait for
  # the host to leave it first, and run once more one that ended in it.
  local line=- tries=0
  while :; do
    settle
    # shellcheck disable=SC2086 # args and EXTRA are word lists on purpose
    echo "# command: ${cmd[*]} ${BIN[$lib]} $args $EXTRA -o $ops" >"$out.run"
    if [ -n "$FLOOR" ]; then probe; line=$LINE_NS; fi
    t0=$(date +%s.%N)
    rc=0
    # shellcheck disable=SC2086
    timeout -k 10 "$TIMEOUT" nice -n 10 "${cmd[@]}" "${BIN[$lib]}" $args $EXTRA -o "$ops" \
      >>"$out.run" 2>>"$OUT/raw/$lib-np$n-r$round.err" || rc=$?
    if [ -n "$FLOOR" ]; then probe; line="$line/$LINE_NS"; fi
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    tries=$((tries + 1))
    if [ "$tries" -ge 2 ] || [ "$rc" != 0 ] || ! is_slow "${line#*/}" || ! settle_left; then
      break
    fi
    REPEATS=$((REPEATS + 1))
    log "$lib np=$n round $round $ops: ended in the slow state (${line#*/} ns), once more"
  done
  cat "$out.run" >>"$out"
  rm -f "$out.run"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "# TIMEOUT after ${TIMEOUT}s" >>"$out"
    reap_strays "${BIN[$lib]}"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$lib" "$n" "$round" "$rc" "$secs" "$ops" "$line" \
    >>"$OUT/runs.tsv"
  log "$lib np=$n round $round $ops: rc=$rc, ${secs}s"
}

{
  echo "date: $(date -Is)"
  echo "host: $(uname -srm), $NCORES cores, load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "libraries: $ACTIVE"
  if [ "$VETH" = 1 ]; then echo "transport: tcp (veth, 2 hosts; shm inside a host)"
  elif [ "$TCP" = 1 ]; then echo "transport: tcp (loop-back)"; else echo "transport: shm"; fi
  if [ "$TCP" = 1 ]; then
    # ferrocoll picks its sockets' congestion control; Open MPI runs the
    # host's default. Said here because it moves the veth figures by 2x.
    echo "tcp congestion control: host default $(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo unknown) (Open MPI); ferrocoll ${FERROCOLL_SOCKET_CC:-reno} (FERROCOLL_SOCKET_CC)"
  fi
  echo "ranks: $RANKS  rounds: $ROUNDS  ops: $OPS  timeout: ${TIMEOUT}s"
  echo "mpibench args: $BENCH_ARGS $EXTRA (MPICH at ranks > cores adds: $MPICH_OVERSUB_ARGS)"
  if [ -n "${BIN[ferrocoll]:-}" ]; then
    # A stale library is the usual surprise: say when it was built.
    echo "ferrocoll: $LIBDIR/libferrocoll.so built $(date -r "$LIBDIR/libferrocoll.so" -Is)"
  fi
  # The commit, read from the files (no git commands: the lead owns the repo).
  if [ -f "$ROOT/.git/HEAD" ]; then
    head=$(cat "$ROOT/.git/HEAD")
    case $head in
      ref:*) ref=${head#ref: }
             if [ -f "$ROOT/.git/$ref" ]; then head="$ref $(cat "$ROOT/.git/$ref")"
             elif grep -q " $ref\$" "$ROOT/.git/packed-refs" 2>/dev/null; then
               head="$ref $(grep " $ref\$" "$ROOT/.git/packed-refs" | cut -d' ' -f1)"
             else head="$ref (no commit yet)"; fi ;;
    esac
    echo "commit: $head"
  fi
} >"$OUT/meta.txt"
cat "$OUT/meta.txt" >&2

if [ "$VETH" = 1 ]; then
  NS="fcb$$"
  made_ns=()
  drop_ns() { for ns in "${made_ns[@]}"; do ip netns del "$ns" 2>/dev/null; done; }
  trap drop_ns EXIT
  for h in 0 1; do
    ip netns add "$NS-$h" || { log "cannot create network namespaces (need root)"; exit 1; }
    made_ns+=("$NS-$h")
    ip -n "$NS-$h" link set lo up
  done
  ip link add veth0 netns "$NS-0" type veth peer name veth0 netns "$NS-1"
  for h in 0 1; do
    ip -n "$NS-$h" addr add "10.78.0.$((h + 1))/24" dev veth0
    ip -n "$NS-$h" link set veth0 up
  done
fi

read -r -a active_arr <<<"$ACTIVE"
nlib=${#active_arr[@]}
# Each op is a launch of its own, the libraries side by side: this machine's
# speed drifts by up to 2x over minutes (shared caches), and a whole-library
# run of every op put one library's cells in a fast stretch and another's in
# a slow one.
if [ "$OPS" = all ]; then
  # mpibench's `all`, in its order (op_names in mpibench.c).
  op_list=(allreduce bcast reduce allgather reduce_scatter alltoall gather scatter barrier pingpong
           sendrecv halo)
else
  IFS=, read -r -a op_list <<<"$OPS"
fi
# The machine's own speed, before each round (bench/floor.c): shared
# machines change speed for minutes at a time, and every library's figures
# move with them. The cache-line round trip alone is also probed around
# every run: this host at times takes 4-5 times as long for it (and for
# every small call), for seconds to minutes; compare.py leaves such runs out
# of a cell that has runs without it.
FLOOR=""
if nice -n 10 cc $CFLAGS -o "$BUILD/floor" "$HERE/floor.c" >>"$OUT/build-floor.log" 2>&1; then
  FLOOR=$BUILD/floor
else
  log "bench/floor.c did not compile (see $OUT/build-floor.log): no machine probe"
fi
for round in $(seq 1 "$ROUNDS"); do
  if [ -n "$FLOOR" ]; then
    echo "floor before round $round: $(timeout 60 "$FLOOR" 2>&1 || echo failed)" >>"$OUT/meta.txt"
  fi
  for n in $RANKS; do
    for k in "${!op_list[@]}"; do
      # Rotate the order so no library always runs first.
      for i in $(seq 0 $((nlib - 1))); do
        run_one "${active_arr[$(((i + round + k - 1) % nlib))]}" "$n" "$round" "${op_list[$k]}"
      done
    done
  done
done
{
  echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "settle: ${SETTLED}s spent waiting for the slow state to pass (--settle $SETTLE, at most ${SETTLE_BUDGET}s), $REPEATS runs made again"
} >>"$OUT/meta.txt"

# The plot needs matplotlib (PyPI); the tables do not.
python3 -c 'import matplotlib' 2>/dev/null ||
  python3 -m pip install --quiet matplotlib >/dev/null 2>&1 ||
  log "matplotlib not installed and pip failed: tables only, no plot"
python3 "$HERE/compare.py" "$OUT" | tee "$OUT/table.txt"
log "results in $OUT"
