#!/usr/bin/env bash
# Multi-host test on one machine: three "hosts" are network namespaces,
# each with its own hostname (UTS namespace), joined by veth pairs to a
# bridge in a fourth namespace (10.77.0.1-3/24, inside the namespaces this
# script creates; the machine's own interfaces are untouched). Two ranks
# per host: shared memory inside a host, TCP across.
#
#  1. ferrorun --hosts h0:2,h1:2,h2:2 --rsh 'rsh.sh NS', started in h0.
#  2. The same job from torchrun-style variables (RANK, WORLD_SIZE,
#     LOCAL_RANK, MASTER_ADDR, MASTER_PORT): rank 0 serves the store.
# Each rank must report "1 shm + 4 tcp" peers and the program must pass.
# Without namespaces (no root, no CAP_NET_ADMIN) it says so and runs the
# torchrun-style job on loop-back TCP instead.
#
# Usage: run.sh FERRORUN PROGRAM [ARGS...]
set -u
ferrorun=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
tag="fc$$"
port=$((12000 + $$ % 20000))
out=$(mktemp -d)
pids=()
made=()

cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  for ns in "${made[@]}"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail=0
check() { # name log expected-peers
  if grep -q FAIL "$2" || ! grep -q PASS "$2"; then
    echo "FAILED: $1 (output below)"; cat "$2"; fail=1; return
  fi
  local n; n=$(grep -c "peers: $3" "$2")
  if [ "$n" -ne 6 ]; then
    echo "FAILED: $1: $n of 6 ranks report peers '$3'"; grep initialised "$2"; fail=1; return
  fi
  echo "ok: $1 (6 ranks, each with $3)"
}

# torchrun-style job: $1 = how to start rank r on host h (a function name).
torch_job() {
  local start=$1 addr=$2 secret r
  shift 2
  secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
  pids=()
  for r in 0 1 2 3 4 5; do
    "$start" $((r / 2)) env RANK=$r WORLD_SIZE=6 LOCAL_RANK=$((r % 2)) LOCAL_WORLD_SIZE=2 \
      MASTER_ADDR="$addr" MASTER_PORT="$port" FERROCOLL_SECRET="$secret" \
      FERROCOLL_DEBUG=info "$@" > "$out/torch.$r" 2>&1 &
    pids+=($!)
  done
  local rc=0 p
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  pids=()
  cat "$out"/torch.* > "$out/torch.log"
  [ $rc -eq 0 ] || { echo "FAILED: a torchrun-style rank exited non-zero"; fail=1; }
}

in_host() { local h=$1; shift; ip netns exec "$tag-h$h" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$tag-h$h" timeout 120 "$@"; }
on_loopback() { shift; FERROCOLL_TRANSPORT=tcp timeout 120 "$@"; }

if ! ip netns add "$tag-br" 2>/dev/null; then
  echo "network namespaces unavailable here (need root / CAP_NET_ADMIN): falling back to FERROCOLL_TRANSPORT=tcp on loop-back"
  torch_job on_loopback 127.0.0.1 "$@"
  grep -q FAIL "$out/torch.log" && fail=1
  [ "$(grep -c 'peers: 0 shm + 5 tcp' "$out/torch.log")" -eq 6 ] || { echo "FAILED: loop-back links"; cat "$out/torch.log"; fail=1; }
  [ $fail -eq 0 ] && echo "ok: torchrun-style job over loop-back TCP"
  exit $fail
fi
made+=("$tag-br")
set -e
ip -n "$tag-br" link add br0 type bridge
ip -n "$tag-br" link set br0 up
for h in 0 1 2; do
  ns="$tag-h$h"
  ip netns add "$ns"; made+=("$ns")
  ip link add veth0 netns "$ns" type veth peer name "p$h" netns "$tag-br"
  ip -n "$ns" addr add "10.77.0.$((h + 1))/24" dev veth0
  ip -n "$ns" link set veth0 up
  ip -n "$ns" link set lo up
  ip -n "$tag-br" link set "p$h" master br0 up
done
set +e
export FERROCOLL_SOCKET_IFNAME=veth

# 1. ferrorun --hosts, launched from host 0.
FERROCOLL_DEBUG=info ip netns exec "$tag-h0" timeout 120 "$ferrorun" \
  --hosts "$tag-h0:2,$tag-h1:2,$tag-h2:2" --rsh "sh $here/rsh.sh {host}" "$@" \
  > "$out/ferrorun.log" 2>&1
rc=$?
[ $rc -eq 0 ] || { echo "FAILED: ferrorun --hosts exited $rc"; fail=1; }
check "ferrorun --hosts, 3 hosts x 2 ranks" "$out/ferrorun.log" "1 shm + 4 tcp"

# 2. torchrun-style variables; the store is at rank 0's address.
torch_job in_host 10.77.0.1 "$@"
check "torchrun-style env, 3 hosts x 2 ranks" "$out/torch.log" "1 shm + 4 tcp"
exit $fail
