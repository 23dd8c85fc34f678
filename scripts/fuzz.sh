#!/usr/bin/env bash
# Long coverage-guided fuzzing with clang's libFuzzer (the `fuzz` preset).
# Each target starts from its seed corpus (fuzz/corpus/<name>, copied into
# fuzz/out/<name> so the repository's corpus stays small) and runs
# RUNS executions (default 1,000,000) or until MAX_SECONDS (default 600).
# Usage: scripts/fuzz.sh [target ...]      RUNS=5000000 scripts/fuzz.sh config_fuzz
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-1000000}
max_seconds=${MAX_SECONDS:-600}
scripts/setup.sh
cmake --preset fuzz >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=($(sed -n 's/^yonder_fuzz(\([a-z_]*\) .*/\1/p' fuzz/CMakeLists.txt))
fi
cmake --build --preset fuzz -j "$(nproc)" --target "${targets[@]}"
for t in "${targets[@]}"; do
  corpus=$(sed -n "s/^yonder_fuzz($t CORPUS \([a-z_]*\) .*/\1/p" fuzz/CMakeLists.txt)
  out=fuzz/out/$t
  mkdir -p "$out"
  cp -n fuzz/corpus/"$corpus"/* "$out"/ 2>/dev/null || true
  echo "=== $t: $runs runs (max ${max_seconds}s)"
  build/fuzz/fuzz/$t -runs="$runs" -max_total_time="$max_seconds" -max_len=8192 -print_final_stats=1 "$out" 2>&1 |
    grep -E 'stat::number_of_executed_units|Done|ERROR|SUMMARY' || true
done
