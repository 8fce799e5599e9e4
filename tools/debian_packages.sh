# Sourced by tools/setup.sh and tools/aarch64_check.sh: the one way the project installs Debian packages.
# install_missing_debian_packages WHO PACKAGE...: installs those of PACKAGE that dpkg-query does not report
# installed, as root or through sudo, running `apt-get update` once; apt's output goes to a log that is
# printed, and kept, only when apt fails (then it exits 1). WHO names the caller in its messages.
install_missing_debian_packages() {
  local who=$1
  shift
  local missing=() package
  for package in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed"; then
      missing+=("$package")
    fi
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  local as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "$who: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    as_root=(sudo)
  fi
  local apt_log
  apt_log=$(mktemp "${TMPDIR:-/tmp}/fp4sim-apt.XXXXXX.log")
  echo "$who: installing Debian packages (log: $apt_log): ${missing[*]}"
  if ! { "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q &&
         "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
           "${missing[@]}"; } > "$apt_log" 2>&1; then
    cat "$apt_log" >&2
    echo "$who: apt-get failed (log above, kept in $apt_log)" >&2
    exit 1
  fi
  rm -f "$apt_log"
}
