#!/usr/bin/env bash
# ctest nccl.abi: ferrocoll's NCCL face against NVIDIA's own nccl.h and
# libnccl.so.2 (from PyPI wheels: NCCL, plus the CUDA headers NVIDIA's
# nccl.h includes; no GPU or CUDA toolkit needed).
#
#  a) constants and layouts: abi_constants.c (sizes, offsets, initializers,
#     every enumerator/macro both headers define) and abi_protos.cpp (the
#     C++ type of every function both declare), each built against NVIDIA's
#     header and ours: the outputs must be identical. Every function of
#     NVIDIA's header must be declared in ours, and every nccl* name NVIDIA's
#     library exports must be exported by ours.
#  b) t_nccl_coll.c (quick), t_nccl_group.c and t_nccl_init.c built against
#     NVIDIA's nccl.h (group also as C++) and linked to OUR library, run with
#     ferrorun -n 3 (-n 2 for the C++ one).
#  c) abi_dropin.c built against NVIDIA's header and linked to NVIDIA's real
#     libnccl.so.2, run at 2 ranks (i) with LD_LIBRARY_PATH=<our drop-in
#     dir> and (ii) with LD_PRELOAD=<drop-in>/libnccl.so.2 and
#     LD_LIBRARY_PATH=<the real library's dir> (the preload wins; the real
#     library is never mapped). A control run shows that without either,
#     the program does load NVIDIA's library.
#  d) (--part behaviour, ctest nccl.abi_behaviour) the same program's
#     answers to calls that need no GPU (bad arguments, groups, error
#     strings) on NVIDIA's library and on ours: they must be the same.
#
# Exit 77 (ctest SKIP_RETURN_CODE) when the wheels cannot be had: no pip,
# or no network. Downloads are cached in --cache and reused.
#
# Usage: run_abi.sh [--part abi|behaviour] [--cc CC] [--cxx CXX] --launcher FERRORUN
#                   --dropin-dir DIR --include-dir DIR --lib LIBFERROCOLL
#                   --src-dir c_tests/nccl --work DIR --cache DIR
# (--part abi, the default, is a) to c).)
set -euo pipefail

launcher="" dropin="" incdir="" lib="" srcdir="" work="" cache="" part=abi
CC=${CC:-cc}
CXX=${CXX:-c++}
while [ $# -gt 0 ]; do
  case "$1" in
    --part) part=$2; shift 2 ;;
    --cc) CC=$2; shift 2 ;;
    --cxx) CXX=$2; shift 2 ;;
    --launcher) launcher=$2; shift 2 ;;
    --dropin-dir) dropin=$2; shift 2 ;;
    --include-dir) incdir=$2; shift 2 ;;
    --lib) lib=$2; shift 2 ;;
    --src-dir) srcdir=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    *) echo "run_abi.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for v in launcher dropin incdir lib srcdir work cache; do
  [ -n "${!v}" ] || { echo "run_abi.sh: --${v} is required" >&2; exit 2; }
done
case "$part" in abi | behaviour) ;; *) echo "run_abi.sh: --part abi|behaviour" >&2; exit 2 ;; esac

mkdir -p "$work" "$cache"
abs() { (cd "$(dirname "$1")" && printf '%s/%s\n' "$(pwd -P)" "$(basename "$1")"); }
for v in launcher dropin incdir lib srcdir work cache; do
  printf -v "$v" '%s' "$(abs "${!v}")"
done

name=nccl.abi; [ "$part" = abi ] || name=nccl.abi_$part
log() { printf "%s: %s\n" "$name" "$*"; }
skip() { printf "SKIP: %s: %s\n" "$name" "$*"; exit 77; }
fail() { printf "FAIL: %s: %s\n" "$name" "$*"; exit 1; }

tmp=$(mktemp -d "$work/tmp.XXXXXX")
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'printf "FAIL: %s: line %s: %s\n" "$name" "$LINENO" "$BASH_COMMAND"' ERR

# --- NVIDIA's wheels ----------------------------------------------------------
# NCCL is pinned to the release our nccl.h follows (NCCL_ABI_NCCL_VERSION
# overrides it): a newer one differs in NCCL_MINOR at least. The CUDA
# wheels only provide headers that NVIDIA's nccl.h includes.
nccl_version=${NCCL_ABI_NCCL_VERSION:-2.32.3}
wheels=("nvidia-nccl-cu12==$nccl_version" nvidia-cuda-runtime-cu12 nvidia-cuda-cccl-cu12
        nvidia-cuda-nvcc-cu12)
patterns=("nvidia_nccl_cu12-$nccl_version-*.whl" "nvidia_cuda_runtime_cu12-*.whl"
          "nvidia_cuda_cccl_cu12-*.whl" "nvidia_cuda_nvcc_cu12-*.whl")
have_all() {
  local p
  for p in "${patterns[@]}"; do
    compgen -G "$cache/$p" >/dev/null || return 1
  done
}
x="$cache/x"
extracted() { [ "$(cat "$x/.extracted" 2>/dev/null)" = "$nccl_version" ]; }
# One download and extraction at a time (ctest runs the two parts apart too).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$cache/.lock"
  flock 9
fi
if ! extracted && ! have_all; then
  python3 -m pip --version >/dev/null 2>&1 ||
    skip "python3 -m pip is not available (install it, e.g. apt-get install -y python3-pip) to download NVIDIA's wheels"
  log "downloading ${wheels[*]} into $cache (about 400 MB, once)"
  if ! timeout 400 python3 -m pip download --no-deps --disable-pip-version-check \
      -d "$cache" "${wheels[@]}" >"$tmp/pip.log" 2>&1; then
    tail -n 5 "$tmp/pip.log" | sed 's/^/  pip| /'
    skip "could not download NVIDIA's wheels (no network or no package index?)"
  fi
  have_all || skip "pip did not leave every wheel in $cache"
fi
if ! extracted; then
  log "extracting headers and libnccl.so.2"
  rm -rf "$x"
  python3 - "$cache" "$x" "${patterns[@]}" <<'EOF'
import glob, os, sys, zipfile
cache, out, patterns = sys.argv[1], sys.argv[2], sys.argv[3:]
want = ("nvidia/nccl/include/", "nvidia/nccl/lib/libnccl.so.2", "nvidia/cuda_runtime/include/",
        "nvidia/cuda_cccl/include/", "nvidia/cuda_nvcc/include/")
for pattern in patterns:
    whl = sorted(glob.glob(os.path.join(cache, pattern)))[-1]
    with zipfile.ZipFile(whl) as z:
        for n in z.namelist():
            if n.startswith(want) and not n.endswith("/"):
                z.extract(n, out)
EOF
  echo "$nccl_version" >"$x/.extracted"
fi
nv="$x/nvidia"
nv_h="$nv/nccl/include/nccl.h"
nv_libdir="$nv/nccl/lib"
for p in "$nv_h" "$nv_libdir/libnccl.so.2" "$nv/cuda_runtime/include/cuda_runtime.h" \
         "$nv/cuda_cccl/include/nv/target" "$nv/cuda_nvcc/include/crt"; do
  [ -e "$p" ] || fail "missing after extraction: $p (delete $cache to download again)"
done
nv_ver=$(sed -n 's/^#define NCCL_VERSION_CODE \([0-9]*\).*/\1/p' "$nv_h")
log "NVIDIA's nccl.h: NCCL_VERSION_CODE $nv_ver"
# NVIDIA's header and the CUDA headers it includes, as system headers (their
# own warnings are not ours to fix); -I dirs are searched first, so nothing
# of ours may be on -I when <nccl.h> must be NVIDIA's.
NV_INC=(-isystem "$nv/nccl/include" -isystem "$nv/cuda_runtime/include"
        -isystem "$nv/cuda_cccl/include" -isystem "$nv/cuda_nvcc/include")
WARN=(-Wall -Wextra -Werror)
libdir=$(dirname "$lib")
real_dir=$(cd "$nv_libdir" && pwd -P)
# The program of c) and d): NVIDIA's header, NVIDIA's library.
prog="$tmp/abi_dropin"
"$CC" "${WARN[@]}" "${NV_INC[@]}" "$srcdir/abi_dropin.c" -o "$prog" \
  -L"$nv_libdir" -l:libnccl.so.2 -ldl
readelf -d "$prog" | grep -q 'NEEDED.*\[libnccl\.so\.2\]' || fail "$prog does not need libnccl.so.2"
if readelf -d "$prog" | grep -q 'NEEDED.*ferrocoll'; then fail "$prog needs ferrocoll directly"; fi
[ -e "$dropin/libnccl.so.2" ] || fail "no drop-in $dropin/libnccl.so.2"

# --- d) the same answers as NVIDIA's library, where no GPU is needed ---------
if [ "$part" = behaviour ]; then
  LD_LIBRARY_PATH="$real_dir" "$prog" probe >"$tmp/probe_nv.txt" 2>"$tmp/probe_nv.err" ||
    { cat "$tmp/probe_nv.err"; fail "d) the probe failed on NVIDIA's library"; }
  LD_LIBRARY_PATH="$dropin" "$prog" probe >"$tmp/probe_ours.txt" 2>"$tmp/probe_ours.err" ||
    { cat "$tmp/probe_ours.err"; fail "d) the probe failed on ours"; }
  if ! diff -u "$tmp/probe_nv.txt" "$tmp/probe_ours.txt" >"$tmp/probe.diff"; then
    sed 's/^/  /' "$tmp/probe.diff"
    fail "d) answers differ from NVIDIA's libnccl.so.2 $nccl_version (- NVIDIA's, + ours)"
  fi
  log "d) $(wc -l <"$tmp/probe_nv.txt") answers identical to NVIDIA's library"
  log "PASS"
  exit 0
fi

# --- a) constants, layouts, prototypes, exported names ------------------------
log "a) headers: NVIDIA's $nv_h vs ours $incdir/nccl.h"
python3 "$srcdir/abi_gen.py" "$nv_h" "$incdir/nccl.h" "$tmp/gen" ||
  fail "the headers' names differ (see above)"
# NCCL_OS_LINUX: NVIDIA declares ncclResetDebugInit only then.
"$CC" -std=gnu11 "${WARN[@]}" -DNCCL_OS_LINUX "${NV_INC[@]}" -I"$tmp/gen" \
  "$srcdir/abi_constants.c" -o "$tmp/constants_nv"
"$CC" -std=gnu11 "${WARN[@]}" -DNCCL_OS_LINUX -I"$incdir" -I"$tmp/gen" \
  "$srcdir/abi_constants.c" -o "$tmp/constants_ours"
"$tmp/constants_nv" >"$tmp/constants_nv.txt"
"$tmp/constants_ours" >"$tmp/constants_ours.txt"
if ! diff -u "$tmp/constants_nv.txt" "$tmp/constants_ours.txt" >"$tmp/constants.diff"; then
  sed 's/^/  /' "$tmp/constants.diff"
  fail "constants/layouts differ (- NVIDIA's, + ours)"
fi
log "a) $(wc -l <"$tmp/constants_nv.txt") sizes, offsets, initializer fields and values identical"

for side in nv ours; do
  if [ $side = nv ]; then inc=("${NV_INC[@]}"); else inc=(-I"$incdir"); fi
  "$CXX" "${WARN[@]}" -Wno-deprecated-declarations -DNCCL_OS_LINUX "${inc[@]}" -I"$tmp/gen" \
    "$srcdir/abi_protos.cpp" -o "$tmp/protos_$side"
  # Versioned struct tags (ncclConfig_v23100) are NVIDIA's spelling of the
  # typedef names ours uses as tags: same type, different C++ name.
  "$tmp/protos_$side" | python3 -c '
import re, sys
for l in sys.stdin:
    sys.stdout.write(re.sub(r"(\d+)(nccl[A-Za-z]+)_v\d+",
                            lambda m: str(len(m.group(2)) + 2) + m.group(2) + "_t", l))
' >"$tmp/protos_$side.txt"
done
if ! diff -u "$tmp/protos_nv.txt" "$tmp/protos_ours.txt" >"$tmp/protos.diff"; then
  sed 's/^/  /' "$tmp/protos.diff"
  fail "function types differ (- NVIDIA's, + ours)"
fi
log "a) $(wc -l <"$tmp/protos_nv.txt") function types identical"

nm -D --defined-only "$nv_libdir/libnccl.so.2" | awk '{print $3}' | grep -E '^p?nccl' | sort -u \
  >"$tmp/exports_nv.txt"
nm -D --defined-only "$lib" | awk '{print $3}' | grep -E '^p?nccl' | sort -u >"$tmp/exports_ours.txt"
missing=$(comm -23 "$tmp/exports_nv.txt" "$tmp/exports_ours.txt" | tr '\n' ' ')
[ -z "$missing" ] || fail "exported by NVIDIA's libnccl.so.2 but not by ours: $missing"
log "a) all $(wc -l <"$tmp/exports_nv.txt") nccl*/pnccl* names NVIDIA's library exports are exported by ours"

# --- b) our tests, built against NVIDIA's header, on our library -------------
# testutil.h needs our mpi.h; it comes from a directory of its own.
mkdir -p "$tmp/mpi"
ln -s "$incdir/mpi.h" "$tmp/mpi/mpi.h"
TEST_INC=(-I"$srcdir" -I"$srcdir/.." -I"$tmp/mpi" "${NV_INC[@]}")
LINK_OURS=(-L"$libdir" -Wl,-rpath,"$libdir" -lferrocoll -lpthread -lm -ldl)
for t in t_nccl_coll t_nccl_group t_nccl_init; do
  "$CC" "${WARN[@]}" "${TEST_INC[@]}" "$srcdir/$t.c" -o "$tmp/$t" "${LINK_OURS[@]}"
done
cp "$srcdir/t_nccl_group.c" "$tmp/t_nccl_group_cxx.cpp"
"$CXX" "${WARN[@]}" "${TEST_INC[@]}" "$tmp/t_nccl_group_cxx.cpp" -o "$tmp/t_nccl_group_cxx" \
  "${LINK_OURS[@]}"
grep -q "$nv/nccl/include/nccl.h" < <("$CC" "${TEST_INC[@]}" -M "$srcdir/t_nccl_coll.c") ||
  fail "b) t_nccl_coll.c was not built against NVIDIA's nccl.h"
run_test() { # np prog [args]: fails on a non-zero exit or a FAIL line
  local np=$1; shift
  local out="$tmp/run.out"
  if ! "$launcher" -n "$np" --timeout 120 "$@" >"$out" 2>&1 || grep -q FAIL "$out"; then
    sed 's/^/  | /' "$out"
    fail "b) $(basename "$1") built against NVIDIA's nccl.h failed at $np ranks"
  fi
  grep -E '^t_nccl' "$out" | sed 's/^/  | /' || true
}
run_test 3 "$tmp/t_nccl_coll" quick
run_test 3 "$tmp/t_nccl_group"
run_test 3 "$tmp/t_nccl_init"
run_test 2 "$tmp/t_nccl_group_cxx"
log "b) t_nccl_coll (quick), t_nccl_group (C and C++), t_nccl_init: built with NVIDIA's header, pass on ours"

# --- c) a program linked to NVIDIA's libnccl.so.2, run on ours ---------------

# Control: with only the real library's directory, the real library answers.
which=$(LD_LIBRARY_PATH="$real_dir" "$prog" which)
case "$which" in
  *"$real_dir/libnccl.so.2"*) log "c) control: $which" ;;
  *) fail "c) control run: expected NVIDIA's library, got: $which" ;;
esac

run_dropin() { # label, then env assignments for the ranks
  local label=$1; shift
  local idf="$tmp/id.$label"
  local out="$tmp/dropin.$label.out"
  rm -f "$idf" "$idf.tmp"
  if ! "$launcher" -n 2 --timeout 60 env "$@" "$prog" run "$idf" ferrocoll "$real_dir/" \
      >"$out" 2>&1 || grep -q FAIL "$out"; then
    sed 's/^/  | /' "$out"
    fail "c) $label: the program linked to NVIDIA's libnccl.so.2 failed on our drop-in"
  fi
  sed 's/^/  | /' "$out"
  log "c) $label: correct results at 2 ranks"
}
run_dropin LD_LIBRARY_PATH LD_LIBRARY_PATH="$dropin"
run_dropin LD_PRELOAD LD_PRELOAD="$dropin/libnccl.so.2" LD_LIBRARY_PATH="$real_dir"
log "PASS"
