#!/usr/bin/env bash
# From a fresh Debian 12 machine to two paired nodes: installs the packages,
# builds the release preset, creates a demo provider (.demo/provider) and a
# demo consumer (.demo/consumer), starts both daemons, shows `yonder status`
# and `yonder gpu` on the provider, shares a link and pairs the consumer with
# it over a TLS peer link, pings it, and -- when a Docker engine is (or can
# be) running -- runs a real job on the provider with `yonder run`, from a
# small demo folder that is uploaded into the job's workspace, then shows
# `yonder ps --all`. Leaves nothing running but dockerd.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

scripts/setup.sh
echo "=== building (release preset)"
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
bin=$root/build/release/apps
export PATH=$bin:$PATH
mkdir -p "$root/.demo"
# Demo nodes listen on loopback, on ports the system picks.
export YONDER_LINK_LISTEN=127.0.0.1:0
# The demo provider runs the small local test image (scripts/build-test-image.sh),
# never pulling: nothing here needs a registry.
export YONDER_IMAGE_ALLOWLIST='yonder-test/*' YONDER_PULL_POLICY=never

pids=()
fifos=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -f "${fifos[@]}"
}
trap cleanup EXIT

# start_node NAME: init (once) and start yonderd for .demo/NAME; waits for readiness.
start_node() {
  local name=$1 home=$root/.demo/$1
  if [ ! -f "$home/identity.key" ]; then
    YONDER_HOME=$home yonder init --name "demo-$name" >/dev/null
  fi
  local ready
  ready=$(mktemp -u /tmp/yonder-ready.XXXXXX)
  mkfifo "$ready"
  fifos+=("$ready")
  YONDER_HOME=$home yonderd --ready-fd 3 3>"$ready" 2>"$root/.demo/$name.log" &
  pids+=($!)
  local line=""
  if ! read -r -t 30 line <"$ready" || [ "$line" != ready ]; then
    echo "yonderd for $name did not start; its log:" >&2
    cat "$root/.demo/$name.log" >&2
    exit 1
  fi
}

echo "=== starting the provider and the consumer (logs: .demo/*.log)"
start_node provider
start_node consumer
P() { YONDER_HOME=$root/.demo/provider yonder "$@"; }
C() { YONDER_HOME=$root/.demo/consumer yonder "$@"; }

echo "=== yonder status (provider)"
P status
echo
echo "=== yonder gpu (provider)"
set +e
P gpu
code=$?
set -e
echo "(yonder gpu exit code: $code; 0 = GPUs found, 10-14 = why none, see docs/cli.md)"
echo
echo "=== yonder share --scope run,exec (provider)"
link=$(P share --scope run,exec --expires 10m --no-qr --json | sed -n 's/.*"link": "\(yonder:[^"]*\)".*/\1/p')
echo "$link"
echo
echo "=== yonder pair LINK (consumer)"
C pair "$link"
echo
echo "=== yonder peers (provider)"
P peers
echo
echo "=== yonder ping demo-provider (consumer)"
C ping demo-provider -c 3
echo
echo "=== a real job: yonder run --on demo-provider (consumer)"
if { docker version >/dev/null 2>&1 || scripts/services.sh; } && scripts/build-test-image.sh; then
  mkdir -p "$root/.demo/work"
  echo "hello from the consumer's folder" >"$root/.demo/work/greeting.txt"
  (cd "$root/.demo/work" && C run --on demo-provider --image yonder-test/busybox:1 -- \
    sh -c 'cat greeting.txt; echo "ran on the provider as uid $(id -u) in $(pwd)"; ls /dev/nvidia0 >/dev/null 2>&1 && echo "GPU visible" || echo "no GPU visible (CPU job)"')
  echo
  echo "=== yonder ps --all (consumer)"
  C ps --all
else
  echo "(skipped: no Docker engine; scripts/services.sh starts one)"
fi
echo
echo "=== done. Try it yourself:"
echo "    export PATH=$bin:\$PATH YONDER_HOME=$root/.demo/provider; yonderd & yonder status"
