#!/usr/bin/env bash
# Builds ferrocoll (Release) into build/ and runs the allreduce demo on 4 ranks.
# Usage: scripts/demo.sh [ranks]   (BUILD_DIR overrides build/)
set -euo pipefail
cd "$(dirname "$0")/.."

ranks=${1:-4}
build=${BUILD_DIR:-build}

scripts/deps.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" --target allreduce_demo -j "$(nproc)"
echo "+ $build/bin/ferrorun -n $ranks $build/examples/allreduce_demo"
exec "$build/bin/ferrorun" -n "$ranks" "$build/examples/allreduce_demo"
