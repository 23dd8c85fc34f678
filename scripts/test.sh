#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this):
#   1. installs the Debian packages (scripts/setup.sh) and starts the services
#      the tests need (scripts/services.sh);
#   2. builds the `dev` preset (warnings as errors): the binaries, and the
#      tests labelled `plain` (the load and array tests at full size, and the
#      .deb install, which the sanitizer builds do not run) and `bench`
#      (each benchmark briefly), and runs those;
#   3. builds the `asan` preset (ASan+UBSan) and runs every test;
#   4. builds the `tsan` preset (ThreadSanitizer) and runs the concurrent
#      parts listed in tests/tsan-tests.txt (the daemon included).
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

# The dev stage: every other test runs in the ASan stage, which builds them
# all; compiling them twice would cost CI's 2 cores about 8 minutes. With a
# label it builds and runs everything under that label, as the others do.
run_dev() {
  if [ -n "$label" ]; then run_preset dev; return; fi
  echo "=== dev: configure and build (binaries, and the tests labelled plain or bench)"
  cmake --preset dev >/dev/null
  local targets=()
  mapfile -t targets < <(ctest --preset dev -N -L '^(plain|bench)$' | sed -n 's/^ *Test *#[0-9]*: *//p')
  targets=("${targets[@]/deb_install_test/yonder_release_files}")
  cmake --build --preset dev -j "$jobs" --target yonder yonderd yonder-relay "${targets[@]}"
  echo "=== dev: test"
  ctest --preset dev -j "$jobs" --no-tests=error -L '^(plain|bench)$'
}

run_tsan() {
  local tests=()
  mapfile -t tests < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' tests/tsan-tests.txt)
  echo "=== tsan: configure and build (${#tests[@]} tests and the binaries they start)"
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan -j "$jobs" --target yonderd yonder yonder-relay "${tests[@]}"
  echo "=== tsan: test"
  local regex
  regex="^($(IFS='|'; echo "${tests[*]}"))\$"
  local args=(--preset tsan -j "$jobs" -R "$regex")
  # With a label only some of the list may match, or none.
  if [ -n "$label" ]; then args+=(-L "$label" --no-tests=ignore); else args+=(--no-tests=error); fi
  ctest "${args[@]}"
}

start=$(date +%s)
run_dev
echo "=== dev passed after $(( $(date +%s) - start ))s"
run_preset asan
echo "=== asan passed after $(( $(date +%s) - start ))s"
run_tsan
echo "=== all tests passed in $(( $(date +%s) - start ))s (dev, asan, tsan)"
