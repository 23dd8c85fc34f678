#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this):
#   1. installs the Debian packages (scripts/setup.sh) and starts the services
#      the tests need (scripts/services.sh);
#   2. builds the `dev` preset (warnings as errors) and runs every test;
#   3. builds the `asan` preset (ASan+UBSan) and runs every test again.
# Usage: scripts/test.sh [ctest -L label regex]   e.g. scripts/test.sh unit
set -euo pipefail
cd "$(dirname "$0")/.."
label=${1:-}
jobs=$(nproc)

scripts/setup.sh
scripts/services.sh
scripts/build-test-image.sh  # the executor tests' image (docker import; no registry)
export YONDER_REQUIRE_DOCKER=1
export YONDER_REQUIRE_SLURM=1  # services.sh started scripts/slurm.sh's cluster: the Slurm tests must run

run_preset() {
  local preset=$1
  echo "=== $preset: configure and build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  echo "=== $preset: test"
  local args=(--preset "$preset" -j "$jobs" --no-tests=error)
  [ -n "$label" ] && args+=(-L "$label")
  ctest "${args[@]}"
}

start=$(date +%s)
run_preset dev
run_preset asan
echo "=== all tests passed in $(( $(date +%s) - start ))s (dev and asan)"
