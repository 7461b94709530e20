#!/usr/bin/env bash
# Compares our mpi.h with MPICH's, name by name, as a compiler sees them.
#
# From OUR header it extracts every object-like `#define MPI_*`/`MPIX_*`
# constant, every MPI typedef and every MPI_/PMPI_/MPIX_ function prototype
# (function-like macros are skipped). It generates one probe program that
# prints, for each name, its value (cast to long long; pointers through
# intptr_t), sizeof and signedness of typedefs, offsets of struct fields and,
# when built as C++, the exact type (typeid) of typedefs and functions. The
# probe is built as C and as C++ once against our header and once against
# MPICH's (found through `mpicc.mpich -show`); nothing is linked to any MPI
# library and no MPI function is called. It fails when a name is missing from
# MPICH's headers, when any printed line differs, or when MPI_Status is not
# 20 bytes with MPI_SOURCE at offset 8.
#
# Usage: check_abi.sh [--work DIR] [--selftest] HEADER
#   --selftest  mutate a copy of HEADER (made for abi/sample_mpi.h) in known
#               ways and pass only if exactly the mutated names are reported.
# Environment: MPICC_MPICH (default mpicc.mpich). When it is missing the test
# prints "SKIP: mpicc.mpich not found" and exits 0, except under CI=true,
# where it installs libmpich-dev with apt-get (as root) or fails.
set -u

work=""
selftest=0
while [ $# -gt 0 ]; do
  case "$1" in
    --work) work="$2"; shift 2 ;;
    --selftest) selftest=1; shift ;;
    -*) echo "check_abi.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: check_abi.sh [--work DIR] [--selftest] HEADER" >&2; exit 2; }
header=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
[ -f "$header" ] || { echo "check_abi.sh: no such header: $1" >&2; exit 2; }
if [ -z "$work" ]; then
  work=$(mktemp -d) || exit 2
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work" || exit 2

# --- Find MPICH -------------------------------------------------------------
MPICC_MPICH=${MPICC_MPICH:-mpicc.mpich}
. "$(dirname "${BASH_SOURCE[0]}")/../need_tool.sh"
need_tool check_abi.sh "$MPICC_MPICH" libmpich-dev
show=$("$MPICC_MPICH" -show) || { echo "check_abi.sh: $MPICC_MPICH -show failed" >&2; exit 1; }
cc=$(printf '%s\n' "$show" | awk '{print $1}')
mpich_inc=""
for tok in $show; do
  case "$tok" in -I*) mpich_inc=${tok#-I}; break ;; esac
done
[ -n "$mpich_inc" ] && [ -f "$mpich_inc/mpi.h" ] ||
  { echo "check_abi.sh: no mpi.h found from: $show" >&2; exit 1; }
cxx=""
if command -v "${MPICC_MPICH/mpicc/mpicxx}" >/dev/null 2>&1; then
  cxx=$("${MPICC_MPICH/mpicc/mpicxx}" -show | awk '{print $1}')
fi
if [ -z "$cxx" ]; then
  case "$cc" in *gcc*) cxx=${cc/gcc/g++} ;; *clang*) cxx=${cc/clang/clang++} ;; *) cxx=c++ ;; esac
fi
command -v "$cxx" >/dev/null 2>&1 || { echo "check_abi.sh: no C++ compiler ($cxx)" >&2; exit 1; }

# --- Self-test: mutate a copy in known ways ---------------------------------
expected=""
if [ "$selftest" = 1 ]; then
  mutated="$work/mutated_mpi.h"
  perl -0pe '
    s/(#define MPI_COMM_WORLD \(\(MPI_Comm\))0x44000000/${1}0x44000002/ or die "COMM_WORLD\n";
    s/(#define MPI_SUCCESS 0\n)/$1#define MPI_FERROCOLL_NOT_IN_MPICH 7\n/ or die "SUCCESS\n";
    s/typedef void \(MPI_User_function\)/typedef void (*MPI_User_function)/ or die "User_function\n";
    s/typedef long MPI_Aint;/typedef int MPI_Aint;/ or die "Aint\n";
    s/int MPI_Send\(const void \*buf/int MPI_Send(void *buf/ or die "Send\n";
    s/(int MPI_SOURCE;\n)(\s*)(int MPI_TAG;\n)/$2$3$1/ or die "Status\n";
  ' "$header" >"$mutated" || { echo "check_abi.sh: self-test mutation failed" >&2; exit 1; }
  # Every mutated name, and the prototypes whose parameter types changed.
  expected="MPI_Aint MPI_COMM_WORLD MPI_FERROCOLL_NOT_IN_MPICH MPI_Op_create MPI_Send MPI_Status MPI_Type_get_extent MPI_User_function"
  header="$mutated"
fi

# --- Extract names from our header ------------------------------------------
# Lines: "C name num|str", "T name int|other|fn|struct|enum [fields...]",
# "F name".
perl -e '
  local $/; my $s = <>;
  $s =~ s{/\*.*?\*/}{ }gs; $s =~ s{//[^\n]*}{}g; $s =~ s/\\\n/ /g;
  while ($s =~ /^[ \t]*#[ \t]*define[ \t]+((?:MPIX?)_\w+)(\(?)[ \t]*(.*?)[ \t]*$/mg) {
    next if $2 eq "(" or $3 eq "";
    print "C $1 ", ($3 =~ /^"/ ? "str" : "num"), "\n";
  }
  $s =~ s/^[ \t]*#.*$//mg;                 # preprocessor lines are done
  while ($s =~ s/\btypedef\s+(struct|union|enum)\s*\w*\s*\{([^{}]*)\}\s*(\w+)\s*;/ /s) {
    my ($kw, $body, $name) = ($1, $2, $3);
    next unless $name =~ /^MPIX?_/;
    if ($kw eq "enum") { print "T $name enum\n"; next; }
    my @f = map { /(\w+)\s*(?:\[[^\]]*\])?\s*(?::\s*\d+)?\s*$/ ? $1 : () } split /;/, $body;
    print "T $name struct @f\n";
  }
  while ($s =~ s/\btypedef\b([^;{}]*);/ /s) {
    my $t = $1;
    if ($t =~ /\(\s*\*?\s*((?:MPIX?)_\w+)\s*\)\s*\(/) { print "T $1 fn\n"; next; }
    next unless $t =~ /^\s*(.*?)\b((?:MPIX?)_\w+)\s*$/s;
    my ($base, $name) = ($1, $2);
    $base =~ s/\s+/ /g; $base =~ s/^ | $//g;
    my $int = $base =~ /^((signed|unsigned|short|long|int|char) ?)+$/ ||
              $base =~ /^u?int(8|16|32|64|ptr)_t$/ || $base =~ /^(size_t|ptrdiff_t)$/;
    print "T $name ", ($int ? "int" : "other"), "\n";
  }
  my %seen;
  while ($s =~ /(?:^|(?<=[;{}]))\s*(?:extern\s+)?[A-Za-z_][\w \t\n\*]*?\b((?:P?MPIX?)_\w+)\s*\([^;{}]*\)[^;{}]*;/sg) {
    print "F $1\n" unless $seen{$1}++;
  }
' "$header" | sort -u >"$work/names" || exit 1

# --- Which names MPICH has, and which of them are macros there --------------
{
  echo '#define MPICH_SKIP_MPICXX 1'
  echo '#include <mpi.h>'
  awk '{print "#ifdef " $2 "\nMACRO " $2 "\n#endif"}' "$work/names"
} >"$work/presence.c"
"$cc" -E -P -I"$mpich_inc" "$work/presence.c" 2>"$work/presence.err" |
  awk '$1 == "MACRO" {print $2}' | sort -u >"$work/mpich_macros" ||
  { cat "$work/presence.err"; exit 1; }
cat "$mpich_inc"/*.h | perl -ne 'print "$_\n" for /\b((?:P?MPIX?)_\w+)\b/g' |
  sort -u >"$work/mpich_idents"
missing=""
: >"$work/checked"
while read -r kind name rest; do
  if ! grep -qx "$name" "$work/mpich_macros" && ! grep -qx "$name" "$work/mpich_idents"; then
    missing="$missing $name"
    continue
  fi
  # A function MPICH implements as a macro (e.g. MPI_Comm_c2f) is called
  # inline by MPICH-built programs: nothing to compare.
  if [ "$kind" = F ] && grep -qx "$name" "$work/mpich_macros"; then
    echo "note: $name is a macro in MPICH's header; not compared"
    continue
  fi
  echo "$kind $name $rest" >>"$work/checked"
done <"$work/names"

# --- Generate the probe -----------------------------------------------------
{
  cat <<'EOF'
#define MPICH_SKIP_MPICXX 1
#define OMPI_SKIP_MPICXX 1
#include ABI_HEADER
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#ifdef __cplusplus
#include <typeinfo>
#define TYPE_OF(x) typeid(x).name()
#endif
/* Constants that are link-time addresses (MPI_DUP_FN is the function
 * MPIR_Dup_fn in MPICH) cannot be compared by value, and must not need a
 * library to link: the folded ternary drops the reference. */
#define VALUE(x) (__builtin_constant_p(x) ? (long long)(intptr_t)(x) : 0LL)
#define IS_CONST(x) (__builtin_constant_p(x) ? "" : " (link-time address)")
int main(void) {
  /* The fixed ABI facts a drop-in depends on. */
  printf("fixed MPI_Status.sizeof %d\n", (int)sizeof(MPI_Status));
  printf("fixed MPI_Status.MPI_SOURCE %d\n", (int)offsetof(MPI_Status, MPI_SOURCE));
  printf("fixed MPI_Status.MPI_TAG %d\n", (int)offsetof(MPI_Status, MPI_TAG));
  printf("fixed MPI_Status.MPI_ERROR %d\n", (int)offsetof(MPI_Status, MPI_ERROR));
  printf("fixed MPI_Aint.sizeof %d\n", (int)sizeof(MPI_Aint));
  printf("fixed MPI_Count.sizeof %d\n", (int)sizeof(MPI_Count));
  printf("fixed MPI_Offset.sizeof %d\n", (int)sizeof(MPI_Offset));
EOF
  while read -r kind name sub rest; do
    case "$kind:$sub" in
      C:num) echo "  printf(\"const $name %lld%s\\n\", VALUE($name), IS_CONST($name));" ;;
      C:str) echo "  printf(\"const $name %s\\n\", $name);" ;;
      T:int)
        echo "  printf(\"sizeof $name %d\\n\", (int)sizeof($name));"
        echo "  printf(\"signed $name %d\\n\", (int)(($name)-1 < ($name)0));"
        echo "#ifdef __cplusplus"
        echo "  printf(\"type $name %s\\n\", TYPE_OF($name));"
        echo "#endif" ;;
      T:other)
        echo "  printf(\"sizeof $name %d\\n\", (int)sizeof($name));"
        echo "#ifdef __cplusplus"
        echo "  printf(\"type $name %s\\n\", TYPE_OF($name));"
        echo "#endif" ;;
      T:fn)
        echo "#ifdef __cplusplus"
        echo "  printf(\"type $name %s\\n\", TYPE_OF($name));"
        echo "#endif" ;;
      T:enum) echo "  printf(\"sizeof $name %d\\n\", (int)sizeof($name));" ;;
      T:struct)
        echo "  printf(\"sizeof $name %d\\n\", (int)sizeof($name));"
        for f in $rest; do
          echo "  printf(\"offsetof $name.$f %d\\n\", (int)offsetof($name, $f));"
        done ;;
      F:*)
        echo "#ifdef __cplusplus"
        echo "  printf(\"func $name %s\\n\", TYPE_OF($name));"
        echo "#endif" ;;
    esac
  done <"$work/checked"
  echo "  return 0;"
  echo "}"
} >"$work/probe.c"

# --- Build and run four probes ----------------------------------------------
flags="-w -O0"
build() { # lang tag include-dir header
  local lang=$1 tag=$2 inc=$3 hdr=$4 comp
  if [ "$lang" = c ]; then comp=$cc; else comp=$cxx; fi
  if ! "$comp" -x "$lang" $flags -I"$inc" -DABI_HEADER="\"$hdr\"" "$work/probe.c" \
      -o "$work/probe_$tag" 2>"$work/build_$tag.err"; then
    echo "check_abi.sh: probe does not compile against the $tag header:"
    head -40 "$work/build_$tag.err"
    return 1
  fi
  "$work/probe_$tag" >"$work/out_$tag" || { echo "check_abi.sh: probe_$tag failed"; return 1; }
}
ourdir=$(dirname "$header")
status=0
build c ours_c "$ourdir" "$header" || status=1
build c mpich_c "$mpich_inc" "$mpich_inc/mpi.h" || status=1
build c++ ours_cxx "$ourdir" "$header" || status=1
build c++ mpich_cxx "$mpich_inc" "$mpich_inc/mpi.h" || status=1
[ "$status" = 0 ] || exit 1

# --- Compare ----------------------------------------------------------------
bad=""
for lang in c cxx; do
  # Lines are "what name value": compare values per (what, name).
  awk -v lang="$lang" '
    NR == FNR { k = $1 " " $2; $1 = $2 = ""; ref[k] = $0; next }
    { k = $1 " " $2; n = $2; $1 = $2 = "";
      if (!(k in ref)) print "DIFF " lang " " k ": missing in MPICH probe";
      else if (ref[k] != $0) print "DIFF " lang " " k ": ours" $0 " | MPICH" ref[k] }
  ' "$work/out_mpich_$lang" "$work/out_ours_$lang" >>"$work/diffs"
done
awk '
  $1 == "fixed" && $2 == "MPI_Status.sizeof" && $3 != 20 { print "DIFF fixed MPI_Status: sizeof " $3 ", want 20" }
  $1 == "fixed" && $2 == "MPI_Status.MPI_SOURCE" && $3 != 8 { print "DIFF fixed MPI_Status: MPI_SOURCE at " $3 ", want 8" }
' "$work/out_ours_c" >>"$work/diffs"
for m in $missing; do echo "DIFF missing $m: not in MPICH's headers" >>"$work/diffs"; done
sort -u "$work/diffs" >"$work/diffs.sorted"
cat "$work/diffs.sorted"

nconst=$(grep -c '^C ' "$work/checked")
ntype=$(grep -c '^T ' "$work/checked")
nfunc=$(grep -c '^F ' "$work/checked")
echo "constants compared: $nconst, typedefs: $ntype, functions: $nfunc (header: $1)"

# The names behind the differences: "DIFF c const MPI_X: ..." -> MPI_X;
# "DIFF c offsetof MPI_Status.MPI_TAG: ..." -> MPI_Status.
reported=$(sed -n 's/^DIFF \(c\|cxx\) [^ ]* \([A-Za-z0-9_]*\).*/\2/p; s/^DIFF missing \([A-Za-z0-9_]*\):.*/\1/p; s/^DIFF fixed \([A-Za-z0-9_]*\):.*/\1/p' \
  "$work/diffs.sorted" | sed 's/(.*//' | sort -u | tr '\n' ' ' | sed 's/ $//')
if [ "$selftest" = 1 ]; then
  if [ "$reported" = "$expected" ]; then
    echo "self-test: exactly the mutated names were reported: $reported"
    exit 0
  fi
  echo "self-test: reported [$reported], expected [$expected]"
  exit 1
fi
if [ -s "$work/diffs.sorted" ]; then
  echo "ABI mismatch with MPICH in: $reported"
  exit 1
fi
echo "ABI matches MPICH"
exit 0
