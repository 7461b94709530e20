#!/usr/bin/env bash
# Jobs started without any launcher of ours, from the variables Slurm and
# torchrun set, on this host (shared memory between all ranks):
#  1. Slurm: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_ID,
#     SLURM_STEP_ID, SLURM_STEP_NODELIST=localhost (the store address is
#     derived from the node list and the ids);
#  2. torchrun: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT and
#     no FERROCOLL_SECRET (the derived-secret warning must be printed once).
# Usage: run_env_launch.sh NRANKS PROGRAM [ARGS...]
set -u
n=$1; shift
# shellcheck source=ranks.sh
. "$(dirname "$0")/ranks.sh"
fail=0

job() { # name, then per-rank variables are built by the caller's function $2
  local name=$1 vars=$2 r rc=0 p; shift 2
  pids=()
  for ((r = 0; r < n; r++)); do
    # shellcheck disable=SC2046
    env $("$vars" "$r") FERROCOLL_DEBUG=info timeout 120 "$@" > "$out/$name.$r" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  pids=()
  cat "$out/$name".* > "$out/$name.log"
  local peers="$((n - 1)) shm + 0 tcp"
  if [ $rc -ne 0 ] || grep -q FAIL "$out/$name.log" ||
     [ "$(grep -c "peers: $peers" "$out/$name.log")" -ne "$n" ]; then
    echo "FAILED: $name"; cat "$out/$name.log"; fail=1
  else
    echo "ok: $name ($n ranks, each with $peers)"
  fi
}

port=$((12000 + $$ % 20000))
slurm_vars() {
  echo SLURM_PROCID="$1" SLURM_NTASKS="$n" SLURM_LOCALID="$1" SLURM_JOB_ID=$$ \
       SLURM_STEP_ID=0 SLURM_STEP_NODELIST=localhost
}
torch_vars() {
  echo RANK="$1" WORLD_SIZE="$n" LOCAL_RANK="$1" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port"
}
job slurm slurm_vars "$@"
job torchrun torch_vars "$@"
warned=$(grep -c "FERROCOLL_SECRET is not set" "$out/torchrun.log")
[ "$warned" -eq 1 ] || { echo "FAILED: the derived-secret warning appeared $warned times (want 1)"; fail=1; }
exit $fail
