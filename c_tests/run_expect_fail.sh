#!/bin/sh
# Runs a command that must fail loudly: passes when it exits non-zero, its
# stderr matches --regex (an extended regex; optional), and its output never
# contains "UNEXPECTED-RETURN" (printed by a test whose fatal call returned).
# Usage: run_expect_fail.sh [--regex ERE] -- command [args...]
set -u
regex=""
while [ $# -gt 0 ]; do
  case "$1" in
    --regex) regex="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "run_expect_fail.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "run_expect_fail.sh: no command" >&2; exit 2; }

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
"$@" >"$tmp/out" 2>"$tmp/err"
rc=$?
# Show what happened, indented so it is not mistaken for our verdict.
sed 's/^/  stdout| /' "$tmp/out"
sed 's/^/  stderr| /' "$tmp/err"

bad=0
if [ "$rc" -eq 0 ]; then
  echo "expect-fail: the command exited 0; it must fail"
  bad=1
fi
if grep -q 'UNEXPECTED-RETURN' "$tmp/out" "$tmp/err"; then
  echo "expect-fail: an erroneous call returned instead of aborting"
  bad=1
fi
if [ -n "$regex" ] && ! grep -Eq -e "$regex" "$tmp/err"; then
  echo "expect-fail: no stderr line matches: $regex"
  bad=1
fi
if [ "$bad" -eq 0 ]; then
  echo "expect-fail: ok (exit $rc${regex:+, stderr matches $regex})"
fi
exit "$bad"
