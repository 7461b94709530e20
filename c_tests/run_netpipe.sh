#!/usr/bin/env bash
# Drop-in test with a program we did not write: Debian's NetPIPE for MPICH
# (`NPmpich2`, package netpipe-mpich2), unchanged, run with our library
# substituted by file name. NetPIPE's integrity mode (-i) sends a known
# pattern back and forth at every size from 1 byte up and checks each byte
# received; each size prints "Integrity check passed" or says what differed.
#
# Cases: the default ping-pong (blocking sends and receives), -a (receives
# posted ahead with MPI_Irecv), -2 (both directions at once), -s (one
# direction, streaming), and the default over TCP (FERROCOLL_TRANSPORT=tcp).
# Each must exit 0 with every size passed.
#
# Usage: run_netpipe.sh --launcher CMD --dropin-dir DIR --work DIR [--max BYTES]
# Environment: NETPIPE (default NPmpich2). Without it the test prints
# "SKIP: NPmpich2 not found" and exits 0, except under CI=true, where it
# installs netpipe-mpich2 with apt-get (as root) or fails.
set -u

launcher="" dropin="" work="" max=4194304
while [ $# -gt 0 ]; do
  case "$1" in
    --launcher) launcher="$2"; shift 2 ;;
    --dropin-dir) dropin="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --max) max="$2"; shift 2 ;;
    *) echo "run_netpipe.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$launcher" ] || [ -z "$dropin" ] || [ -z "$work" ]; then
  echo "usage: run_netpipe.sh --launcher CMD --dropin-dir DIR --work DIR [--max BYTES]" >&2
  exit 2
fi

NETPIPE=${NETPIPE:-NPmpich2}
. "$(dirname "${BASH_SOURCE[0]}")/need_tool.sh"
need_tool run_netpipe.sh "$NETPIPE" netpipe-mpich2
np_bin=$(command -v "$NETPIPE")
mkdir -p "$work" || exit 2
dropin_real=$(cd "$dropin" && pwd -P) || { echo "run_netpipe.sh: no dir $dropin" >&2; exit 1; }

# The loader must take libmpich.so.12 from the drop-in directory, or this
# would test MPICH itself.
resolved=$(LD_LIBRARY_PATH="$dropin_real" ldd "$np_bin" | awk '/libmpich\.so\.12|libmpi\.so\.12/ {print $3; exit}')
case "$resolved" in
  "$dropin_real"/*) ;;
  *) echo "run_netpipe.sh: $np_bin loads '${resolved:-nothing}' for libmpich.so.12, not from $dropin_real" >&2
     exit 1 ;;
esac

fail=0
run_case() {
  local name=$1 env_extra=$2; shift 2
  local log="$work/netpipe-$name.log" rc sizes passed
  # NetPIPE writes its figures to the file -o names (rank 0) and its
  # progress, one line per size, to stdout.
  env LD_LIBRARY_PATH="$dropin_real" $env_extra \
    timeout 240 "$launcher" -n 2 "$np_bin" -i -u "$max" -o "$work/netpipe-$name.out" "$@" \
    >"$log" 2>&1
  rc=$?
  sizes=$(grep -c ' bytes ' "$log")
  passed=$(grep -c 'Integrity check passed' "$log")
  if [ "$rc" -ne 0 ] || [ "$sizes" -lt 30 ] || [ "$passed" -ne "$sizes" ] ||
     grep -qi 'fail' "$log"; then
    echo "FAIL netpipe $name: exit $rc, $passed of $sizes sizes passed"
    tail -n 15 "$log" | sed 's/^/  | /'
    fail=1
  else
    echo "PASS netpipe $name: $passed sizes of 1 byte to $max bytes"
  fi
}

run_case pingpong ""
run_case preposted "" -a
run_case bidirectional "" -2
run_case stream "" -s
run_case tcp "FERROCOLL_TRANSPORT=tcp"
exit $fail
