#!/usr/bin/env bash
# From a fresh Debian 12 machine to two paired nodes: installs the packages,
# builds the release preset, creates a demo provider (.demo/provider) and a
# demo consumer (.demo/consumer), starts both daemons, shows `yonder status`
# and `yonder gpu` on the provider, shares a link and pairs the consumer with
# it over a TLS peer link, then pings it. Leaves nothing running.
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
echo "=== done. Try it yourself:"
echo "    export PATH=$bin:\$PATH YONDER_HOME=$root/.demo/provider; yonderd & yonder status"
