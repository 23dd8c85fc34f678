#!/usr/bin/env bash
# From a fresh Debian 12 machine to a running node: installs the packages,
# builds the release preset, creates a demo provider in .demo/provider,
# starts its daemon, and shows `yonder status` and `yonder gpu`.
# Leaves nothing running: the demo daemon is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

scripts/setup.sh
echo "=== building (release preset)"
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
bin=$root/build/release/apps
export PATH=$bin:$PATH

export YONDER_HOME=$root/.demo/provider
mkdir -p "$root/.demo"
if [ ! -f "$YONDER_HOME/identity.key" ]; then
  echo "=== yonder init --name demo-provider"
  yonder init --name demo-provider
fi

echo "=== starting yonderd (log: .demo/provider.log)"
ready=$(mktemp -u /tmp/yonder-ready.XXXXXX)
mkfifo "$ready"
yonderd --ready-fd 3 3>"$ready" 2>"$root/.demo/provider.log" &
daemon=$!
trap 'kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; rm -f "$ready"' EXIT
if ! read -r -t 30 line <"$ready" || [ "$line" != ready ]; then
  echo "yonderd did not start; its log:" >&2
  cat "$root/.demo/provider.log" >&2
  exit 1
fi

echo "=== yonder status"
yonder status
echo
echo "=== yonder gpu"
set +e
yonder gpu
code=$?
set -e
echo "(yonder gpu exit code: $code; 0 = GPUs found, 10-14 = why none, see docs/cli.md)"
echo
echo "=== yonder doctor"
yonder doctor || true
echo
yonder shutdown
wait "$daemon" || true
trap - EXIT
rm -f "$ready"
echo "=== done. Try it yourself: export PATH=$bin:\$PATH YONDER_HOME=$YONDER_HOME; yonderd & yonder status"
