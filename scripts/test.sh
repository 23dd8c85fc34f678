#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this):
#   1. installs the Debian packages (scripts/setup.sh) and starts the services
#      the tests need (scripts/services.sh);
#   2. builds the `dev` preset (warnings as errors): the binaries, and the
#      tests labelled `plain` (the load and array tests at full size, and the
#      .deb install, which the sanitizer builds do not run) and `bench`
#      (each benchmark briefly), and runs those;
#   3. builds the `asan` preset (ASan+UBSan) and runs every test;
#      each stage after the first compiles behind the previous stage's
#      tests, at low priority (see bg_start);
#   4. builds the `tsan` preset (ThreadSanitizer) and runs the concurrent
#      parts listed in tests/tsan-tests.txt (the daemon included).
# Usage: scripts/test.sh [ctest -L label regex]   e.g. scripts/test.sh unit
set -euo pipefail
cd "$(dirname "$0")/.."
label=${1:-}
jobs=$(nproc)

start=$(date +%s)
scripts/setup.sh
scripts/services.sh
scripts/build-test-image.sh  # the executor tests' image (docker import; no registry)
echo "=== set up (packages, services, test image) after $(( $(date +%s) - start ))s"
export YONDER_REQUIRE_DOCKER=1
export YONDER_REQUIRE_PODMAN=1  # setup.sh installed podman: the Podman executor tests must run (they start their own service)
export YONDER_REQUIRE_SLURM=1  # services.sh started scripts/slurm.sh's cluster: the Slurm tests must run
export YONDER_REQUIRE_NETNS=1  # CI runs as root: the NAT-lab and other network-namespace tests must run, not skip

# --- building a stage behind the previous stage's tests
# The tests spend much of their time waiting on dockerd, Slurm and sockets,
# so on CI's 2 cores the next stage compiles behind them at nice 19 (the
# tests keep the CPU whenever they want it). Its output goes to a log, shown
# if it fails.
bg_pid=""
bg_log=""
bg_began=0
bg_start() {  # bg_start PRESET LOG [cmake --build args...]
  local preset=$1 log=$2
  shift 2
  cmake --preset "$preset" >/dev/null
  bg_log=$log
  echo "=== $preset: building behind the tests (log: $log)"
  bg_began=$(date +%s)
  rm -f "$log.end"
  # The build writes when it ended, so bg_wait can say whether the tests
  # or the build held the stage up.
  setsid -w nice -n 19 sh -c 'cmake --build "$@"; rc=$?; date +%s >"$0"; exit $rc' "$log.end" \
    --preset "$preset" -j "$jobs" "$@" >"$log" 2>&1 &
  bg_pid=$!
}
bg_wait() {  # bg_wait PRESET: the background build's result
  local preset=$1 rc=0
  [ -n "$bg_pid" ] || return 0
  renice -n 0 -g "$bg_pid" >/dev/null 2>&1 || true  # the tests are done: full speed
  local tests_done
  tests_done=$(date +%s)
  wait "$bg_pid" || rc=$?
  bg_pid=""
  if [ "$rc" -ne 0 ]; then
    tail -n 80 "$bg_log"
    echo "=== $preset: build FAILED (whole log: $bg_log)" >&2
    exit "$rc"
  fi
  local ended
  ended=$(cat "$bg_log.end" 2>/dev/null || date +%s)
  local held="the tests it ran behind ended $((tests_done - ended))s later"
  [ "$ended" -le "$tests_done" ] || held="it ended $((ended - tests_done))s after the tests it ran behind"
  echo "=== $preset: built ($(grep -c '^\[' "$bg_log" || true) steps) in $((ended - bg_began))s; $held"
}
bg_stop() {
  if [ -n "$bg_pid" ]; then kill -- -"$bg_pid" 2>/dev/null || true; fi
}
trap bg_stop EXIT

tsan_tests=()
mapfile -t tsan_tests < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' tests/tsan-tests.txt)
tsan_regex="^($(IFS='|'; echo "${tsan_tests[*]}"))\$"

# The dev stage builds the programs and the tests labelled `plain` (the
# load and array tests at full size, the .deb install) or `bench`: every
# other test runs in the ASan stage, which builds them all.
dev_targets() {
  local targets=()
  mapfile -t targets < <(ctest --preset dev -N -L '^(plain|bench)$' | sed -n 's/^ *Test *#[0-9]*: *//p')
  targets=("${targets[@]/deb_install_test/yonder_release_files}")
  printf '%s\n' yonder yonderd yonder-relay "${targets[@]}"
}

# After a failed stage, the first assertions of each failed test, last in
# the output: CI may keep only the tail of a long log.
failure_digest() {  # failure_digest PRESET
  local dir=build/$1/Testing/Temporary
  [ -f "$dir/LastTestsFailed.log" ] || return 0
  echo "=== $1: what failed (whole output: $dir/LastTest.log)"
  cut -d: -f2 "$dir/LastTestsFailed.log" | while read -r name; do
    [ -n "$name" ] || continue
    echo "--- $name"
    awk -v t="$name" '
      /^[0-9]+\/[0-9]+ Testing: / { on = ($3 == t) }
      on && /(Failure|FAILED  \]|ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer|never got|Timeout)/ { n = 7 }
      on && n > 0 { print substr($0, 1, 240); n--; if (++shown >= 30) exit }' "$dir/LastTest.log"
  done
}

ctest_stage() {  # ctest_stage PRESET [ctest args...]
  local preset=$1 rc=0
  shift
  echo "=== $preset: test"
  ctest --preset "$preset" -j "$jobs" "$@" || rc=$?
  if [ "$rc" -ne 0 ]; then
    failure_digest "$preset"
    exit "$rc"
  fi
}

if [ -n "$label" ]; then
  # A label: each stage builds everything and runs what carries it.
  for preset in dev asan; do
    echo "=== $preset: configure and build"
    cmake --preset "$preset" >/dev/null
    cmake --build --preset "$preset" -j "$jobs"
    # Every label has tests in dev (a typo fails here); the sanitizer
    # builds have no `bench` tests.
    if [ "$preset" = dev ]; then none=error; else none=ignore; fi
    ctest_stage "$preset" -L "$label" --no-tests="$none"
  done
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan -j "$jobs" --target yonderd yonder yonder-relay "${tsan_tests[@]}"
  ctest_stage tsan -R "$tsan_regex" -L "$label" --no-tests=ignore
  echo "=== all stages passed in $(( $(date +%s) - start ))s (label $label)"
  exit 0
fi

echo "=== dev: configure and build (the programs, and the tests labelled plain or bench)"
cmake --preset dev >/dev/null
mapfile -t targets < <(dev_targets)
cmake --build --preset dev -j "$jobs" --target "${targets[@]}"
echo "=== dev: built after $(( $(date +%s) - start ))s"
bg_start asan build/asan-build.log
ctest_stage dev --no-tests=error -L '^(plain|bench)$'
echo "=== dev passed after $(( $(date +%s) - start ))s"

bg_wait asan
bg_start tsan build/tsan-build.log --target yonderd yonder yonder-relay "${tsan_tests[@]}"
ctest_stage asan --no-tests=error
echo "=== asan passed after $(( $(date +%s) - start ))s"

bg_wait tsan
# Nothing builds behind the TSan tests and they mostly wait (on dockerd and
# sockets; a third of the CPU at -j2): twice as many at once.
ctest_stage tsan --no-tests=error -R "$tsan_regex" -j "$((jobs * 2))"
echo "=== all tests passed in $(( $(date +%s) - start ))s (dev, asan, tsan)"
