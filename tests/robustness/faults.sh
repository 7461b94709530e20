#!/usr/bin/env bash
# Fault injection: RUNS times, start a job of 2-8 ranks (shared memory or
# TCP) looping over one collective (random op and size), kill -9 a random
# rank at a random moment, and check that
#   - without a launcher (ranks started from torchrun-style variables, so
#     nothing else takes the job down), every survivor's call fails with an
#     error naming the dead rank ("peer rank V died during MPI_X"), and how
#     long that took;
#   - under ferrorun, the launcher exits non-zero within 2 s of the death
#     (FAULT_LAUNCHER_LIMIT);
#   - no rank process and none of the run's /dev/shm/ferrocoll-* files (read
#     from its ranks' mappings) is left behind.
# Prints a table and exits non-zero if any run failed a check.
#
# Usage: tests/robustness/faults.sh [RUNS]   (default 50)
#   FAULT_SEED     random seed (printed; rerun with it to repeat a sequence)
#   FAULT_LAUNCHER_LIMIT  seconds ferrorun may take to exit after the death (2)
#   FAULT_DETECT_LIMIT    seconds a survivor may take to fail without a launcher (5)
#   FAULT_MODE     env or ferrorun: only runs of that kind (default: alternate)
#   FAULT_OPS      the collectives to draw from (default: all of them)
#   FAULT_LOAD     busy processes to run beside the jobs (default 0)
#   FAULT_CASE     "TRANSPORT N OP BYTES VICTIM" for every run instead of a
#                  random draw (the delay stays random); with FAULT_LOAD=2,
#                  "shm 3 scan 8 2" once found the survivors calling on for
#                  60 s and more: rank 1 buffered rank 0's messages for ever
#                  while its link to the dead rank 2 stayed full
#   FAULT_KEEP     where the files of failed runs are kept (default: deleted)
#   FERROCOLL_LIB_DIR  where libferrocoll.so and ferrorun are (target/release)
set -u
cd "$(dirname "$0")/../.."
runs=${1:-50}
libdir=$(realpath "${FERROCOLL_LIB_DIR:-target/release}")
ferrorun=$libdir/ferrorun
seed=${FAULT_SEED:-$$}
limit=${FAULT_LAUNCHER_LIMIT:-2}
detect_limit=${FAULT_DETECT_LIMIT:-5}
keep=${FAULT_KEEP:-}
RANDOM=$seed
[ -x "$ferrorun" ] && [ -e "$libdir/libferrocoll.so" ] || {
  echo "faults.sh: build first (cargo build --release): no $libdir/{ferrorun,libferrocoll.so}" >&2
  exit 2
}

work=$(mktemp -d /tmp/ferrocoll-faults.XXXXXX)
started=()
load=()
cleanup() {
  for p in "${started[@]}" "${load[@]}"; do kill -9 "$p" 2>/dev/null; done
  pkill -9 -f -- "^$work/storm " 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cc -O1 -Wall -Werror -Iinclude tests/robustness/storm.c -o "$work/storm" \
  -L"$libdir" -lferrocoll -Wl,-rpath,"$libdir" || exit 2

read -r -a ops <<<"${FAULT_OPS:-allreduce bcast reduce allgather alltoall gather scatter reduce_scatter barrier sendrecv scan}"
for ((l = 0; l < ${FAULT_LOAD:-0}; l++)); do
  sh -c 'while :; do :; done' &
  load+=($!)
  disown $!
done
sizes=(8 1024 65536 1048576 4194304)
secret=$(printf '%064d' 5)
now() { date +%s.%N; }
# Seconds from $1 to $2, three decimals.
since() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", b-a}'; }

# Waits until DIR holds N files named WHAT.*, at most 30 s.
wait_files() {
  local dir=$1 what=$2 n=$3 t=0
  while [ "$(find "$dir" -name "$what.*" | wc -l)" -lt "$n" ]; do
    sleep 0.02
    t=$((t + 1))
    [ $t -gt 1500 ] && return 1
  done
  return 0
}


results=$work/results
: >"$results"
failures=0
echo "faults.sh: $runs runs, seed $seed${FAULT_LOAD:+, $FAULT_LOAD busy processes beside}"
for ((i = 1; i <= runs; i++)); do
  mode=${FAULT_MODE:-$([ $((i % 2)) -eq 1 ] && echo env || echo ferrorun)}
  transport=$([ $((RANDOM % 2)) -eq 0 ] && echo shm || echo tcp)
  n=$((2 + RANDOM % 7))
  op=${ops[$((RANDOM % ${#ops[@]}))]}
  bytes=${sizes[$((RANDOM % ${#sizes[@]}))]}
  victim=$((RANDOM % n))
  if [ -n "${FAULT_CASE:-}" ]; then
    read -r transport n op bytes victim <<<"$FAULT_CASE"
  fi
  delay_ms=$((RANDOM % 800))
  dir=$work/run$i
  mkdir -p "$dir"
  segs=""
  tenv=(FERROCOLL_DEBUG=warn)
  [ "$transport" = tcp ] && tenv+=(FERROCOLL_TRANSPORT=tcp)
  pids=()
  if [ "$mode" = env ]; then
    # A port the kernel says is free now (a random one could be in use as
    # another socket's ephemeral port, and the job would not start).
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    for ((r = 0; r < n; r++)); do
      env "${tenv[@]}" RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n \
        MASTER_ADDR=127.0.0.1 MASTER_PORT=$port FERROCOLL_SECRET="$secret" \
        timeout -s KILL 60 "$work/storm" "$op" "$bytes" "$dir" \
        >"$dir/out.$r" 2>"$dir/err.$r" &
      pids+=($!)
      started+=($!)
    done
  else
    env "${tenv[@]}" timeout -s KILL 60 "$ferrorun" -n "$n" "$work/storm" "$op" "$bytes" "$dir" \
      >"$dir/out" 2>"$dir/err" &
    fpid=$!
    started+=($fpid)
  fi
  verdict=ok
  detect=""
  if ! wait_files "$dir" ready "$n"; then
    verdict="FAILED: the job did not start"
  else
    # The run's own segment files, read from its ranks' mappings: other
    # tests running beside this one (ctest -j) create and remove theirs.
    segs=$(for ((r = 0; r < n; r++)); do
      grep -ho '/dev/shm/ferrocoll-[^ ]*' "/proc/$(cat "$dir/pid.$r")/maps" 2>/dev/null
    done | sort -u)
    sleep "$(awk -v d=$delay_ms 'BEGIN{printf "%.3f", d/1000}')"
    t_kill=$(now)
    kill -9 "$(cat "$dir/pid.$victim")"
    if [ "$mode" = env ]; then
      for ((r = 0; r < n; r++)); do
        wait "${pids[$r]}" 2>/dev/null
        rc=$?
        [ $r -eq $victim ] && continue
        line=$(grep '^DETECTED' "$dir/out.$r")
        if [ $rc -ne 3 ] || [ -z "$line" ]; then
          verdict="FAILED: rank $r exited $rc without an error"
        elif ! grep -q "peer rank $victim died during MPI_" "$dir/err.$r"; then
          verdict="FAILED: rank $r did not name rank $victim: $(tail -c 300 "$dir/err.$r")"
        else
          d=$(since "$t_kill" "$(echo "$line" | cut -d' ' -f3)")
          detect=$(printf '%s\n%s\n' "$detect" "$d" | sort -g | tail -1)
          if awk -v d="$d" -v l="$detect_limit" 'BEGIN{exit !(d > l)}'; then
            verdict="FAILED: rank $r took ${d}s to fail"
          fi
        fi
      done
    else
      wait "$fpid" 2>/dev/null
      rc=$?
      detect=$(since "$t_kill" "$(now)")
      if [ $rc -eq 0 ]; then
        verdict="FAILED: ferrorun exited 0"
      elif awk -v d="$detect" -v l="$limit" 'BEGIN{exit !(d > l)}'; then
        verdict="FAILED: ferrorun took ${detect}s to exit"
      elif ! grep -q "rank $victim" "$dir/err"; then
        verdict="FAILED: ferrorun did not name rank $victim: $(tail -c 300 "$dir/err")"
      fi
    fi
  fi
  # Leftovers: processes of this run still alive, new segment files.
  # Ranks are found by their command line (the run's directory), so that
  # one that never wrote its pid file is counted and killed too.
  sleep 0.1
  left=0
  for p in $(pgrep -f -- "^$work/storm .* $dir\$"); do
    kill -9 "$p" 2>/dev/null && left=$((left + 1))
  done
  new_shm=0
  for f in $segs; do [ -e "$f" ] && new_shm=$((new_shm + 1)); done
  left=$((left + new_shm))
  [ $left -gt 0 ] && [ "$verdict" = ok ] && verdict="FAILED: $left leftovers"
  # Reap anything still running from this run.
  for p in "${pids[@]}" ${fpid:+$fpid}; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  started=()
  fpid=""
  printf '%3d %-8s %-3s n=%d %-14s %8d B victim %d after %3d ms: %s%s\n' \
    "$i" "$mode" "$transport" "$n" "$op" "$bytes" "$victim" "$delay_ms" \
    "${detect:+${detect}s }" "$verdict"
  if [ "$verdict" != ok ]; then
    failures=$((failures + 1))
    [ -n "$keep" ] && mkdir -p "$keep" && cp -r "$dir" "$keep/" && echo "    kept in $keep/run$i"
  fi
  echo "$mode $transport $([ "$verdict" = ok ] && echo 1 || echo 0) ${detect:-nan} $left" >>"$results"
done

echo
echo "| launch | transport | runs | detected | time to detect, median | max | leftovers |"
echo "|---|---|---|---|---|---|---|"
for mode in env ferrorun; do
  for transport in shm tcp all; do
    sel() { awk -v m=$mode -v t=$transport '$1 == m && (t == "all" || $2 == t)' "$results"; }
    nruns=$(sel | wc -l)
    [ "$nruns" -eq 0 ] && continue
    ok=$(sel | awk '{s += $3} END {print s + 0}')
    left=$(sel | awk '{s += $5} END {print s + 0}')
    sel | awk '$4 != "nan" {print $4}' | sort -g >"$work/sorted"
    k=$(wc -l <"$work/sorted")
    med=$(awk -v k="$k" 'NR == int((k + 1) / 2) {a = $1} NR == int(k / 2) + 1 {b = $1}
                         END {printf "%.3f", k ? (a + b) / 2 : 0}' "$work/sorted")
    max=$(tail -1 "$work/sorted")
    who=$([ "$mode" = env ] && echo "none (survivors detect)" || echo ferrorun)
    echo "| $who | $transport | $nruns | $ok | ${med} s | ${max:-0} s | $left |"
  done
done
echo
if [ $failures -gt 0 ]; then
  echo "faults.sh: FAIL: $failures of $runs runs failed a check (seed $seed)"
  exit 1
fi
echo "faults.sh: PASS: $runs of $runs runs detected, nothing left behind (seed $seed)"
