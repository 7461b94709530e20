#!/usr/bin/env bash
# The crate for 64-bit Arm Linux (aarch64), from an x86-64 host: clippy with
# warnings as errors, then the library's unit tests (reduce kernels, rings,
# slots, engine, bootstrap) cross-built and run under qemu-user. There C `char`
# is unsigned, the x86 kernels are left out and the portable loops run (they
# compile to NEON), and the code behind `cfg(target_arch)` is other code.
# What it needs comes from scripts/deps.sh: the cross C compiler and qemu-user
# (Debian packages), and the aarch64 standard library (rustup). Without them it
# prints SKIP and the reason, and exits 0; under CI=true a missing Debian tool
# is installed, or fails it (c_tests/need_tool.sh). qemu-user cannot show a missing memory barrier (it runs Arm code
# with this host's stronger ordering), and cross-memory attach may be refused
# there: the engine then falls back to its rings, as on kernels that refuse it.
set -euo pipefail
cd "$(dirname "$0")/.."

target=aarch64-unknown-linux-gnu
skip() {
  echo "SKIP: aarch64: $*"
  exit 0
}

. c_tests/need_tool.sh
need_tool aarch64.sh aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu
need_tool aarch64.sh qemu-aarch64 qemu-user
sysroot=/usr/aarch64-linux-gnu
[ -e "$sysroot/lib/ld-linux-aarch64.so.1" ] && [ -e "$sysroot/lib/Scrt1.o" ] ||
  skip "no aarch64 C library under $sysroot (apt-get install libc6-dev-arm64-cross)"
[ -d "$(rustc --print sysroot)/lib/rustlib/$target" ] ||
  skip "no Rust standard library for $target (rustup target add $target)"

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L $sysroot"
cargo clippy --target "$target" --all-targets --features fuzzing -- -D warnings
cargo test --target "$target" --lib
