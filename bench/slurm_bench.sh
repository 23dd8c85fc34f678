#!/usr/bin/env bash
# Overhead of a trivial job through Yonder on a Slurm provider,
# side by side with sbatch directly on the same cluster, ratio printed:
#
#   yonder run --on cluster --no-upload -- true    (consumer -> provider
#       yonderd over a loopback link -> sbatch -> wait -> exit code back)
#   sbatch --wait --wrap true                       (the same cluster, directly)
#
# Needs scripts/slurm.sh's cluster running (scripts/services.sh starts it)
# and a build (default build/dev/apps; YONDER_BIN_DIR to change). Starts two
# yonderd in a temporary folder and removes everything on exit. Not part of
# the test suite: timing belongs here.
#
#   bench/slurm_bench.sh [RUNS]      (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin=${YONDER_BIN_DIR:-$root/build/dev/apps}
runs=${1:-10}
export SLURM_CONF=${YONDER_SLURM_CONF:-/run/yonder-slurm/slurm.conf}
sinfo -h >/dev/null || { echo "no Slurm cluster answers (scripts/slurm.sh start)" >&2; exit 1; }

tmp=$(mktemp -d)
work=$(dirname "$SLURM_CONF")/work/bench-$$
mkdir -m 755 "$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp" "$work"
}
trap cleanup EXIT

export YONDER_LINK_LAN_DISCOVERY=false YONDER_LINK_LISTEN=127.0.0.1:0 YONDER_GPU_INVENTORY=fake:1 YONDER_CONFIG=
start_node() {  # name, extra env...
  local name=$1 home=$tmp/$1
  shift
  YONDER_HOME=$home "$bin/yonder" init --name "$name" >/dev/null
  printf '[jobs]\nmax_concurrent = 8\nmax_per_peer = 8\ndefault_memory_mib = 64\n' >>"$home/config.toml"
  mkfifo "$tmp/$name.ready"
  env YONDER_HOME="$home" "$@" "$bin/yonderd" --ready-fd 3 3>"$tmp/$name.ready" 2>"$tmp/$name.log" &
  pids+=($!)
  read -r -t 30 _ <"$tmp/$name.ready"
}
start_node cluster YONDER_EXECUTOR=slurm YONDER_SLURM_CONF="$SLURM_CONF" YONDER_SLURM_WORKDIR_ROOT="$work"
start_node laptop
P() { YONDER_HOME=$tmp/cluster "$bin/yonder" "$@"; }
C() { YONDER_HOME=$tmp/laptop "$bin/yonder" "$@"; }
link=$(P share --scope run --max-jobs 8 --uses 1 --no-qr --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["link"])')
C pair "$link" >/dev/null

time_runs() {  # command...: mean seconds per run
  local start end
  start=$(date +%s.%N)
  for _ in $(seq "$runs"); do "$@" >/dev/null; done
  end=$(date +%s.%N)
  python3 -c "print(f'{($end - $start) / $runs:.3f}')"
}
C run --on cluster --image yonder-test/busybox:1 --no-upload -- true >/dev/null  # warm both paths once
sbatch --wait --quiet --mem=64M -o /dev/null --wrap true
direct=$(time_runs sbatch --wait --quiet --mem=64M -o /dev/null --wrap true)
yonder=$(time_runs C run --on cluster --image yonder-test/busybox:1 --no-upload -- true)
echo "Slurm job overhead ($runs runs each, $(nproc) cores); lower is better"
printf '%-44s %8s s\n' "sbatch --wait --wrap true" "$direct" "yonder run --on cluster -- true" "$yonder"
python3 -c "print(f'ratio yonder / sbatch: {$yonder / $direct:.2f}x')"
