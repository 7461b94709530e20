#!/usr/bin/env bash
# Installs what ferrocoll's build and tests need and is missing, on Debian/Ubuntu:
# a C/C++ toolchain, cmake, MPICH and Open MPI (the C tests compare against both),
# pip (for NVIDIA's NCCL wheel, the NCCL ABI reference), and the clippy/rustfmt components. Installs nothing that is already present.
set -euo pipefail

log() { printf 'deps: %s\n' "$*"; }

# Root needs no sudo (CI runs as root); elsewhere use sudo if there is one.
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  fi
fi

# Debian packages, each with the command or file that shows it is present.
declare -A probe=(
  [build-essential]="cmd:cc cmd:c++ cmd:make"
  [cmake]="cmd:cmake"
  [mpich]="cmd:mpiexec.mpich"
  [libmpich-dev]="cmd:mpicc.mpich"
  [openmpi-bin]="cmd:mpirun.openmpi"
  [libopenmpi-dev]="cmd:mpicc.openmpi"
  [python3-pip]="cmd:pip3"
  [procps]="cmd:pgrep"
  [netpipe-mpich2]="cmd:NPmpich2"
  [gcc-aarch64-linux-gnu]="cmd:aarch64-linux-gnu-gcc"
  [libc6-dev-arm64-cross]=""
  [qemu-user]="cmd:qemu-aarch64"
)
# procps: pgrep/pkill find and clean up the fault-injection ranks (tests/robustness/faults.sh).
# pip downloads NVIDIA's NCCL wheel for the NCCL ABI test (c_tests/nccl/run_abi.sh).
# netpipe-mpich2: NetPIPE built against MPICH, run unchanged on ferrocoll
# (c_tests/run_netpipe.sh).
# gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user: the library built and
# unit-tested for aarch64 Linux from this host (scripts/aarch64.sh).
order=(build-essential cmake mpich libmpich-dev openmpi-bin libopenmpi-dev python3-pip procps
  netpipe-mpich2 gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)

have_dpkg=false
command -v dpkg >/dev/null 2>&1 && have_dpkg=true

present() {
  local pkg=$1 check
  if $have_dpkg && dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed'; then
    return 0
  fi
  # No command to look for (a library): dpkg alone tells, and it said no.
  if [ -z "${probe[$pkg]}" ]; then
    ! $have_dpkg
    return
  fi
  for check in ${probe[$pkg]}; do
    command -v "${check#cmd:}" >/dev/null 2>&1 || return 1
  done
  return 0
}

missing=()
for pkg in "${order[@]}"; do
  present "$pkg" || missing+=("$pkg")
done

if [ "${#missing[@]}" -eq 0 ]; then
  log "system packages present"
elif command -v apt-get >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; then
    log "missing ${missing[*]} and not root without sudo: install them yourself" >&2
    exit 1
  fi
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  log "missing ${missing[*]} and no apt-get: install the equivalents yourself" >&2
  exit 1
fi

# Rust: cargo must exist already (installing a toolchain is the user's choice);
# clippy and rustfmt are added through rustup when that manages the toolchain.
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  log "cargo not found: install Rust from https://rustup.rs" >&2
  exit 1
fi
components=()
cargo clippy --version >/dev/null 2>&1 || components+=(clippy)
cargo fmt --version >/dev/null 2>&1 || components+=(rustfmt)
if [ "${#components[@]}" -gt 0 ]; then
  if command -v rustup >/dev/null 2>&1; then
    log "adding rust components ${components[*]}"
    rustup component add "${components[@]}"
  else
    log "missing rust components ${components[*]} and no rustup" >&2
    exit 1
  fi
else
  log "rust toolchain present ($(cargo --version))"
fi

# The aarch64 standard library for scripts/aarch64.sh, where rustup manages
# the toolchain. Optional: without it that step says SKIP.
arm=aarch64-unknown-linux-gnu
if [ ! -d "$(rustc --print sysroot)/lib/rustlib/$arm" ] && command -v rustup >/dev/null 2>&1; then
  log "adding the $arm standard library (optional)"
  timeout 300 rustup target add "$arm" >/dev/null 2>&1 ||
    log "could not add $arm: the aarch64 step will be skipped"
fi

# Miri (tests/robustness/sanitizers.sh) runs where a nightly toolchain is
# installed: add its miri and rust-src components if they are missing. This
# is optional: without them the Miri part says SKIP.
if command -v rustup >/dev/null 2>&1 && rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  if ! cargo +nightly miri --version >/dev/null 2>&1; then
    log "adding miri to the nightly toolchain (optional)"
    timeout 300 rustup component add --toolchain nightly miri rust-src >/dev/null 2>&1 ||
      log "could not add miri: the Miri tests will be skipped"
  fi
fi
