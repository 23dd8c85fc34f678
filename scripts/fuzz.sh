#!/usr/bin/env bash
# Long fuzzing runs of every fuzz target (at least a million
# executions each), with a one-line result per target at the end.
#
# Each target runs coverage-guided under clang's libFuzzer (the `fuzz`
# preset, ASan+UBSan), starting from its seed corpus (fuzz/corpus/<name>,
# copied into fuzz/out/<name> so the repository's corpus stays small), for
# RUNS executions (default 1,000,000) or MAX_SECONDS (default 600).
#
# A target that does not build under clang runs instead from the `asan`
# preset with fuzz/standalone_main.cpp: the corpus plus RUNS seeded
# mutations, not coverage-guided. The summary says which way each ran.
# (Clang 14 builds the Boost.Asio coroutine code with BOOST_ASIO_HAS_CO_AWAIT
# defined, which CMakeLists.txt does, and without -fsanitize=function.)
#
# FALLBACK_BUILD (default build/asan) is the build those come from; it is
# configured and built only where the target is missing there.
# FUZZ_ENGINE=standalone runs every target that way (no clang build at all).
# Usage: scripts/fuzz.sh [target ...]      RUNS=5000000 scripts/fuzz.sh config_fuzz
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-1000000}
max_seconds=${MAX_SECONDS:-600}
scripts/setup.sh >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(sed -n 's/^yonder_fuzz(\([a-z_]*\) .*/\1/p' fuzz/CMakeLists.txt)
fi
libfuzzer_dir=build/fuzz/fuzz
if [ "${FUZZ_ENGINE:-libfuzzer}" = standalone ]; then
  libfuzzer_dir=/nonexistent
else
  cmake --preset fuzz >/dev/null
  # -k 0: build every target that clang can; the rest fall back below.
  cmake --build --preset fuzz -j "$(nproc)" --target "${targets[@]}" -- -k 0 >/tmp/yonder-fuzz-build.log 2>&1 || true
fi
fallback_build=${FALLBACK_BUILD:-build/asan}
missing=()
for t in "${targets[@]}"; do
  [ -x "$libfuzzer_dir/$t" ] || [ -x "$fallback_build/fuzz/$t" ] || missing+=("$t")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ -f "$fallback_build/CMakeCache.txt" ] || cmake --preset asan >/dev/null
  cmake --build "$fallback_build" -j "$(nproc)" --target "${missing[@]}"
fi

summary=()
for t in "${targets[@]}"; do
  corpus=$(sed -n "s/^yonder_fuzz($t CORPUS \([a-z_]*\) .*/\1/p" fuzz/CMakeLists.txt)
  if [ -x "$libfuzzer_dir/$t" ]; then
    out=fuzz/out/$t
    mkdir -p "$out"
    cp -n fuzz/corpus/"$corpus"/* "$out"/ 2>/dev/null || true
    echo "=== $t: libFuzzer, $runs runs (max ${max_seconds}s)"
    start=$(date +%s)
    log=$("$libfuzzer_dir/$t" -runs="$runs" -max_total_time="$max_seconds" -max_len=8192 -print_final_stats=1 \
          -rss_limit_mb=4096 "$out" 2>&1) && rc=0 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' <<<"$log")
    cov=$(grep -o 'cov: [0-9]*' <<<"$log" | tail -1 | cut -d' ' -f2)
    grep -E 'ERROR|SUMMARY|Done' <<<"$log" || true
    result=$([ "$rc" -eq 0 ] && echo "no crash" || echo "FAILED (exit $rc)")
    summary+=("$(printf '%-26s libFuzzer   %10s execs  %5ss  cov %-6s corpus %-5s %s' "$t" "${execs:-?}" \
      "$(( $(date +%s) - start ))" "${cov:-?}" "$(ls "$out" | wc -l)" "$result")")
  else
    echo "=== $t: GCC standalone ($fallback_build), $runs seeded mutations"
    start=$(date +%s)
    log=$("$fallback_build/fuzz/$t" -runs="$runs" fuzz/corpus/"$corpus" 2>&1) && rc=0 || rc=$?
    tail -2 <<<"$log"
    result=$([ "$rc" -eq 0 ] && echo "no crash" || echo "FAILED (exit $rc)")
    summary+=("$(printf '%-26s standalone  %10s execs  %5ss  %-17s %s' "$t" "$runs" "$(( $(date +%s) - start ))" "" "$result")")
  fi
done
echo "=== summary ($(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD))"
printf '%s\n' "${summary[@]}"
! printf '%s\n' "${summary[@]}" | grep -q FAILED
