#!/usr/bin/env bash
# Drop-in test: programs compiled by MPICH's own mpicc against MPICH's mpi.h
# must run unchanged with our library substituted by file name.
#
# For each test source: build it with mpicc.mpich, check with readelf that it
# NEEDs libmpich.so.12 (or libmpi.so.12) and nothing of ours, check that
# LD_LIBRARY_PATH=DROPIN_DIR makes the loader pick the file in DROPIN_DIR, run
# it through the launcher at -n 2 (once lazily bound, once with
# LD_BIND_NOW=1 so any missing symbol fails at load), and compare its PASS
# lines with those of the same test built against our header (REF_BIN_DIR).
#
# Usage: run_dropin.sh --launcher CMD --dropin-dir DIR --src-dir DIR
#                      --ref-bin-dir DIR --work DIR [--np N] test_name...
# Environment: MPICC_MPICH (default mpicc.mpich). Without it the test prints
# "SKIP: mpicc.mpich not found" and exits 0, except under CI=true, where it
# installs libmpich-dev with apt-get (as root) or fails.
set -u

launcher="" dropin="" src="" refbin="" work="" np=2
while [ $# -gt 0 ]; do
  case "$1" in
    --launcher) launcher="$2"; shift 2 ;;
    --dropin-dir) dropin="$2"; shift 2 ;;
    --src-dir) src="$2"; shift 2 ;;
    --ref-bin-dir) refbin="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --np) np="$2"; shift 2 ;;
    -*) echo "run_dropin.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ -z "$launcher" ] || [ -z "$dropin" ] || [ -z "$src" ] || [ -z "$refbin" ] ||
   [ -z "$work" ] || [ $# -eq 0 ]; then
  echo "usage: run_dropin.sh --launcher CMD --dropin-dir DIR --src-dir DIR --ref-bin-dir DIR --work DIR [--np N] test..." >&2
  exit 2
fi

MPICC_MPICH=${MPICC_MPICH:-mpicc.mpich}
. "$(dirname "${BASH_SOURCE[0]}")/need_tool.sh"
need_tool run_dropin.sh "$MPICC_MPICH" libmpich-dev
for tool in readelf ldd; do
  command -v "$tool" >/dev/null 2>&1 || { echo "run_dropin.sh: $tool not found" >&2; exit 1; }
done
mkdir -p "$work" || exit 2
dropin_real=$(cd "$dropin" && pwd -P) || { echo "run_dropin.sh: no dir $dropin" >&2; exit 1; }

fail=0
bad() { echo "dropin: $*"; fail=1; }

for t in "$@"; do
  exe="$work/$t"
  if ! "$MPICC_MPICH" -pthread -I"$src" "$src/$t.c" -o "$exe" 2>"$work/$t.build.err"; then
    bad "$t: mpicc.mpich failed:"; cat "$work/$t.build.err"; continue
  fi
  needed=$(readelf -d "$exe" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p')
  mpilib=$(printf '%s\n' $needed | grep -E '^lib(mpich|mpi)\.so\.12$' | head -1)
  [ -n "$mpilib" ] || { bad "$t: NEEDED has no libmpich.so.12/libmpi.so.12: $needed"; continue; }
  if printf '%s\n' $needed | grep -q ferrocoll; then
    bad "$t: an MPICH-built program NEEDs our library directly: $needed"; continue
  fi
  # The loader must take the library from DROPIN_DIR, not from the system.
  resolved=$(LD_LIBRARY_PATH="$dropin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$exe" |
    awk -v l="$mpilib" '$1 == l {print $3}')
  resolved_dir=$(cd "$(dirname "$resolved")" 2>/dev/null && pwd -P)
  [ "$resolved_dir" = "$dropin_real" ] ||
    { bad "$t: $mpilib resolves to '$resolved', not into $dropin"; continue; }

  "$launcher" -n "$np" "$refbin/$t" >"$work/$t.ref.out" 2>"$work/$t.ref.err"
  rc=$?
  [ $rc -eq 0 ] || { bad "$t: the ferrocoll-built test failed (exit $rc)"; cat "$work/$t.ref.err"; continue; }
  grep '^PASS ' "$work/$t.ref.out" >"$work/$t.ref.pass"
  [ -s "$work/$t.ref.pass" ] || { bad "$t: the ferrocoll-built test printed no PASS line"; continue; }

  for mode in lazy bindnow; do
    if [ "$mode" = bindnow ]; then bindnow=1; else bindnow=""; fi
    env LD_LIBRARY_PATH="$dropin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        ${bindnow:+LD_BIND_NOW=1} \
        "$launcher" -n "$np" "$exe" >"$work/$t.$mode.out" 2>"$work/$t.$mode.err"
    rc=$?
    if [ $rc -ne 0 ] || grep -q FAIL "$work/$t.$mode.out" "$work/$t.$mode.err"; then
      bad "$t ($mode): exit $rc"; sed 's/^/  | /' "$work/$t.$mode.out" "$work/$t.$mode.err" | tail -30
      continue
    fi
    grep '^PASS ' "$work/$t.$mode.out" >"$work/$t.$mode.pass"
    if ! cmp -s "$work/$t.ref.pass" "$work/$t.$mode.pass"; then
      bad "$t ($mode): PASS lines differ from the ferrocoll-built run:"
      diff "$work/$t.ref.pass" "$work/$t.$mode.pass" | sed 's/^/  /'
      continue
    fi
    echo "dropin: $t ($mode): $(wc -l <"$work/$t.$mode.pass") PASS lines match (NEEDED $mpilib from $dropin)"
  done
done
[ $fail -eq 0 ] && echo "dropin: all $# programs ran with the substituted library"
exit $fail
