#!/usr/bin/env bash
# Array jobs: how many trivial tasks per second the consumer
# drives over loopback providers with `yonder run --mesh --array`, side by
# side in one run with the same tasks submitted one `yonder run --on` at a
# time, and with 8 `yonder run --on` at once (xargs -P 8). The scheduler's
# own cost per task (no I/O) is `build/release/bench/mesh_bench`'s "array
# bookkeeping" line.
#
# Needs: the release build (yonder, yonderd), a running Docker engine with
# the test image (scripts/services.sh, scripts/build-test-image.sh).
# Starts two providers (fake GPUs, 4 each) and a consumer in a temporary
# folder; removes everything it started on exit. Not part of the test suite.
#
#   bench/array_bench.sh [TASKS]     (default 64)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin=${YONDER_BIN_DIR:-$root/build/release/apps}
image=yonder-test/busybox:1
tasks=${1:-64}
for need in "$bin/yonder" "$bin/yonderd" docker python3 xargs; do
  command -v "$need" >/dev/null || { echo "array_bench: $need is missing (see the header of $0)" >&2; exit 2; }
done
docker image inspect "$image" >/dev/null 2>&1 || { echo "array_bench: no $image; run scripts/build-test-image.sh" >&2; exit 2; }

tmp=$(mktemp -d /tmp/yab-XXXXXX)
pids=()
owners=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for o in "${owners[@]}"; do
    docker ps -aq --filter "label=yonder.owner=$o" | xargs -r docker rm -f >/dev/null 2>&1 || true
  done
  awk -v t="$tmp/" 'index($2, t) == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
now() { date +%s.%N; }

export YONDER_LINK_LAN_DISCOVERY=false YONDER_LINK_PORT_MAPPING=false YONDER_LINK_LISTEN=127.0.0.1:0
export YONDER_IMAGE_ALLOWLIST='yonder-test/*' YONDER_PULL_POLICY=never YONDER_CONFIG= YONDER_MESH_BENCHMARK_INTERVAL_S=0
start_node() {  # name, gpu inventory
  local home=$tmp/$1
  YONDER_HOME=$home YONDER_GPU_INVENTORY=$2 YONDER_GPU_FAKE_WITHOUT_RUNTIME=true "$bin/yonder" init --name "$1" >/dev/null
  printf '[jobs]\ndefault_memory_mib = 64\ndefault_disk_mib = 16\nmax_concurrent = 8\nmax_per_peer = 8\nstop_grace_s = 1\n' >>"$home/config.toml"
  mkfifo "$tmp/$1.ready"
  YONDER_HOME=$home YONDER_GPU_INVENTORY=$2 YONDER_GPU_FAKE_WITHOUT_RUNTIME=true "$bin/yonderd" --ready-fd 3 3>"$tmp/$1.ready" 2>"$tmp/$1.log" &
  pids+=($!)
  read -r -t 30 _ <"$tmp/$1.ready"
  owners+=("$(YONDER_HOME=$home "$bin/yonder" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["node_id"])')")
}
start_node alpha fake:4
start_node beta fake:4
start_node laptop fake:0
C() { YONDER_HOME=$tmp/laptop "$bin/yonder" "$@"; }
for p in alpha beta; do
  link=$(YONDER_HOME=$tmp/$p "$bin/yonder" share --scope run,mesh --max-jobs 8 --uses 1 --no-qr --json |
         python3 -c 'import json,sys; print(json.load(sys.stdin)["link"])')
  C pair "$link" >/dev/null
done
task='echo $YONDER_ARRAY_INDEX > r.txt'
mkdir -p "$tmp/work" && cd "$tmp/work"
C run --on alpha --image "$image" --no-upload -- true >/dev/null   # warm both paths once
C run --on beta --image "$image" --no-upload -- true >/dev/null

echo "Yonder array benchmark ($(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)): $tasks trivial tasks over 2 loopback providers"
t0=$(now)
C run --mesh --array "0-$((tasks - 1))%8" --image "$image" --no-upload -- sh -c "$task" >/dev/null 2>"$tmp/array.err" || {
  echo "array_bench: the array failed:" >&2; cat "$tmp/array.err" >&2; exit 1; }
t1=$(now)
arr=$(echo "$t1 - $t0" | bc)
got=$(ls "$tmp/work/out" | grep -c '^[0-9]' || true)
t0=$(now)
for i in $(seq 0 $((tasks - 1))); do
  C run --on alpha --image "$image" --no-upload -e "I=$i" -- sh -c 'echo $I > r.txt' >/dev/null
done
t1=$(now)
seq1=$(echo "$t1 - $t0" | bc)
export -f C; export tmp bin image
t0=$(now)
seq 0 $((tasks - 1)) | xargs -P 8 -I{} bash -c 'p=alpha; [ $(({} % 2)) = 1 ] && p=beta; C run --on $p --image "$image" --no-upload -e I={} -- sh -c "echo \$I > r.txt" >/dev/null'
t1=$(now)
par=$(echo "$t1 - $t0" | bc)
rate() { awk -v n="$tasks" -v s="$1" 'BEGIN {printf "%.1f", n / s}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
printf 'yonder run --mesh --array (8 at once)   %6.2f s  %s tasks/s  (%s of %s outputs home)\n' "$arr" "$(rate "$arr")" "$got" "$tasks"
printf 'yonder run --on, one at a time          %6.2f s  %s tasks/s  array is %sx faster\n' "$seq1" "$(rate "$seq1")" "$(ratio "$seq1" "$arr")"
printf 'yonder run --on, 8 at once (xargs -P 8) %6.2f s  %s tasks/s  array is %sx faster\n' "$par" "$(rate "$par")" "$(ratio "$par" "$arr")"
