# Sourced by the scripts that start ranks by hand: a scratch directory
# "$out" and a list "pids" of started ranks, both removed on exit (also on
# failure or interruption).
out=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$out"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
