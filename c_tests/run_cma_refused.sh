#!/bin/sh
# Runs a test program with cross-memory attach refused (LIB, a shared
# library that LD_PRELOAD puts before libc's): passes when the program exits
# 0, prints no FAIL, and its ranks said they met the refusal (FERROCOLL_DEBUG
# warnings matching REGEX), so the fallbacks ran.
# Usage: run_cma_refused.sh LIB REGEX command [args...]
set -u
[ $# -ge 3 ] || { echo "run_cma_refused.sh: LIB REGEX command..." >&2; exit 2; }
lib=$1 regex=$2
shift 2
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
LD_PRELOAD=$lib FERROCOLL_DEBUG=warn "$@" >"$tmp/out" 2>"$tmp/err"
rc=$?
sed 's/^/  stdout| /' "$tmp/out"
sed 's/^/  stderr| /' "$tmp/err"
if [ "$rc" -ne 0 ]; then
  echo "cma-refused: the program exited $rc"
  exit 1
fi
if grep -q 'FAIL' "$tmp/out" "$tmp/err"; then
  echo "cma-refused: a check failed"
  exit 1
fi
if ! grep -Eq "$regex" "$tmp/err"; then
  echo "cma-refused: no rank reported the refusal (/$regex/)"
  exit 1
fi
echo "cma-refused: ok"
