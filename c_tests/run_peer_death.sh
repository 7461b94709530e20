#!/usr/bin/env bash
# A rank killed with SIGKILL in the middle of a run of allreduces, with no
# launcher to take the job down (ranks started from torchrun-style
# variables): every survivor must get an error naming the dead rank, within
# 10 s, over shared memory (pid liveness) and over TCP (EOF). The error
# code's string is its class; the message naming the rank is the one
# FERROCOLL_DEBUG=warn logs for errors returned under MPI_ERRORS_RETURN.
# Usage: run_peer_death.sh NRANKS T_FATAL_BINARY
set -u
n=$1 prog=$2
# shellcheck source=ranks.sh
. "$(dirname "$0")/ranks.sh"
fail=0
last=$((n - 1))
for transport in shm tcp; do
  port=$((12000 + ($$ + ${#transport}) % 20000))
  t0=$(date +%s.%N)
  pids=()
  for ((r = 0; r < n; r++)); do
    env RANK=$r WORLD_SIZE="$n" MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      FERROCOLL_SECRET=$(printf '%064d' 7) FERROCOLL_DEBUG=warn \
      $( [ $transport = tcp ] && echo FERROCOLL_TRANSPORT=tcp ) \
      timeout 60 "$prog" kill-last > "$out/$transport.$r" 2>&1 &
    # (the shell reports the SIGKILL of the last rank; that is the test)
    pids+=($!)
  done
  for ((r = 0; r < n; r++)); do
    wait "${pids[$r]}"; rc=$?
    if [ $r -eq $last ]; then
      [ $rc -eq 137 ] || { echo "FAILED: $transport: the killed rank exited $rc"; fail=1; }
    elif [ $rc -ne 3 ] || ! grep -q "DETECTED: rank $r" "$out/$transport.$r" ||
         ! grep -q "peer rank $last died during MPI_Allreduce" "$out/$transport.$r"; then
      echo "FAILED: $transport: rank $r exited $rc without naming rank $last:"
      cat "$out/$transport.$r"; fail=1
    fi
  done
  pids=()
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}')
  if awk -v s="$secs" 'BEGIN{exit !(s > 10)}'; then
    echo "FAILED: $transport: survivors took ${secs}s (limit 10)"; fail=1
  fi
  [ $fail -eq 0 ] && echo "ok: $transport: $((n - 1)) survivors named rank $last in ${secs}s:" &&
    grep -h "peer rank" "$out/$transport".* | head -1
done
exit $fail
