# Sourced by the C tests' scripts (bash). need_tool SCRIPT CMD PKG returns
# when command CMD is on PATH. Otherwise, under CI=true, it installs Debian
# package PKG with apt-get (as root) and fails the test if CMD is still
# missing; elsewhere it prints "SKIP: CMD not found (...)", which the test's
# SKIP_REGULAR_EXPRESSION matches, and exits 0. SCRIPT names the caller in
# its error messages.
need_tool() {
  local script=$1 cmd=$2 pkg=$3
  command -v "$cmd" >/dev/null 2>&1 && return 0
  if [ "${CI:-}" = "true" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq && apt-get install -y -qq "$pkg" >/dev/null ||
        { echo "$script: installing $pkg failed" >&2; exit 1; }
    fi
    command -v "$cmd" >/dev/null 2>&1 ||
      { echo "$script: $cmd not found and CI=true" >&2; exit 1; }
  else
    echo "SKIP: $cmd not found (apt-get install $pkg)"
    exit 0
  fi
}
