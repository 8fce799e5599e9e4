#!/usr/bin/env bash
# The fresh-machine check: what a new user (and CI) does, short of a new machine. Clones the committed
# repository into a temporary folder with nothing beside it (no design-input folder, no build trees, no
# out/, no .venv/) and runs the README's two set-up commands in the clone, each on its own, printing the
# time of each. tools/setup.sh makes the clone's own virtual environment with only the pins of
# requirements.txt. Debian packages cannot be taken away here; tools/setup.sh installs any that are
# missing, as it would on a new machine.
#
# Usage: tools/fresh_check.sh [main|test|both]     (default both; the clone is removed afterwards unless
#                                                 FP4SIM_KEEP_CLONE=1)
#   FP4SIM_LOAD=1   keep every core busy meanwhile with stress-ng (Debian package stress-ng), as on a
#                   loaded CI machine
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
which=${1:-both}
case "$which" in main|test|both) ;; *) echo "usage: tools/fresh_check.sh [main|test|both]" >&2; exit 2 ;; esac

scratch=$(mktemp -d)
cleanup() { [ "${FP4SIM_KEEP_CLONE:-0}" = 1 ] && echo "clone kept in $scratch" || rm -rf "$scratch"; }
trap cleanup EXIT

git clone --quiet "$root" "$scratch/fp4sim"
cd "$scratch/fp4sim"
echo "fresh clone of $(git rev-parse --short HEAD) in $scratch/fp4sim"
# The design input that developers keep beside their checkout: a user's clone has none, so nothing in the
# repository may refer to it. (Its name is spelt in two parts so that this check does not find itself.)
design_input="shar""ed"
[ ! -e "$scratch/$design_input" ] || { echo "fresh_check.sh: $scratch/$design_input exists" >&2; exit 1; }
if git grep -n -e "\.\./$design_input" -- . >/dev/null; then
  echo "fresh_check.sh: tracked files refer to ../$design_input:" >&2
  git grep -n -e "\.\./$design_input" -- . >&2
  exit 1
fi

if [ "${FP4SIM_LOAD:-0}" = 1 ]; then
  command -v stress-ng >/dev/null || { echo "fresh_check.sh: FP4SIM_LOAD=1 needs stress-ng (apt-get install stress-ng)" >&2; exit 2; }
  stress-ng --cpu "$(nproc)" --timeout 0 --quiet &
  load=$!
  trap 'kill $load; cleanup' EXIT
  echo "load: stress-ng --cpu $(nproc) (pid $load)"
fi

results=()
run() {
  local name=$1; shift
  local start=$SECONDS status=0
  echo "== $name: $*"
  "$@" || status=$?
  results+=("$(printf '%-18s exit %d  %5d s' "$name" "$status" $((SECONDS - start)))")
  return "$status"
}

status=0
if [ "$which" != test ]; then
  run "tools/run_main.sh" tools/run_main.sh || status=1
fi
if [ "$which" != main ]; then
  # The test command on its own: a build tree of its own, as if run_main.sh had never run.
  run "tools/test.sh" env FP4SIM_BUILD_DIR="$scratch/fp4sim/build-test" tools/test.sh || status=1
fi
echo "== fresh_check.sh summary ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load ${FP4SIM_LOAD:-0})"
printf '  %s\n' "${results[@]}"
exit "$status"
