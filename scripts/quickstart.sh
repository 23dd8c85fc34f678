#!/usr/bin/env bash
# From a fresh Debian 12 machine to a job that ran on a peer: installs the
# packages (scripts/setup.sh, Docker's docker.io among them), builds yonder
# and yonderd (release preset), starts a demo provider (.demo/provider) and a
# demo consumer (.demo/consumer) on this machine (two YONDER_HOMEs, loopback
# links), shows `yonder status` and `yonder gpu` on the provider, shares a
# link and pairs the consumer with it over a TLS peer link, pings it, and --
# starting a Docker engine when none runs and building the small local test
# image -- runs a real job on the provider with `yonder run` from a demo
# folder that is uploaded into the job's workspace. It ends with
# `yonder ps --all` on the consumer and the provider's audit entries for the
# job (`yonder audit` on the provider's home).
#
# The two daemons keep running afterwards so you can try more commands; their
# PIDs are recorded in .demo/*.pid. Safe to run again: running demo daemons
# are reused (dead ones restarted), and the consumer pairs again (the
# provider's port may have changed).
#
# Usage: scripts/quickstart.sh          set up (or reuse) the demo and run a job
#        scripts/quickstart.sh --down   stop the demo daemons (by their recorded
#                                       PIDs), remove the demo jobs' containers
#                                       and the .demo folder
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
demo=$root/.demo
bin=$root/build/release/apps
image=yonder-test/busybox:1

# running_pid NAME: prints the recorded PID of the demo yonderd NAME if that
# process is still running and is the yonderd of .demo/NAME (not a recycled PID).
running_pid() {
  local f=$demo/$1.pid pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' '\n' <"/proc/$pid/cmdline" | head -n 1 | grep -q 'yonderd$' || return 1
  tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "YONDER_HOME=$demo/$1" || return 1
  echo "$pid"
}

down() {
  # The provider's node id labels its jobs' containers (asked of the daemon
  # when an older run did not record it).
  if [ ! -s "$demo/provider.node_id" ] && [ -x "$bin/yonder" ] && running_pid provider >/dev/null; then
    YONDER_HOME=$demo/provider "$bin/yonder" status --json 2>/dev/null |
      sed -n 's/.*"node_id": "\([^"]*\)".*/\1/p' >"$demo/provider.node_id" || true
  fi
  for name in consumer provider; do
    local pid
    if pid=$(running_pid "$name"); then
      echo "quickstart: stopping the demo $name's yonderd (pid $pid)"
      kill -TERM "$pid"
      for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      if kill -0 "$pid" 2>/dev/null; then
        echo "quickstart: pid $pid did not stop in 10 s; killing it"
        kill -KILL "$pid" || true
      fi
    fi
  done
  # The provider keeps finished jobs' containers (for logs and recovery);
  # they carry its node id as owner label.
  if [ -s "$demo/provider.node_id" ] && docker version >/dev/null 2>&1; then
    local ids
    ids=$(docker ps -aq --filter "label=yonder.owner=$(cat "$demo/provider.node_id")")
    if [ -n "$ids" ]; then
      echo "quickstart: removing the demo jobs' containers"
      # shellcheck disable=SC2086
      docker rm -f $ids >/dev/null
    fi
  fi
  # Job workspaces still mounted below .demo (a daemon killed mid-job).
  if [ -d "$demo" ]; then
    awk -v d="$demo/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
      umount -l "$m" || true
    done
    rm -rf "$demo"
    echo "quickstart: removed $demo"
  fi
  echo "quickstart: the demo is down (dockerd, if it was started, keeps running)"
}

case "${1:-}" in
  --down) down; exit 0 ;;
  "") ;;
  *) echo "usage: $0 [--down]" >&2; exit 2 ;;
esac

scripts/setup.sh
echo "=== building yonder and yonderd (release preset, build/release)"
[ -f build/release/build.ninja ] || cmake --preset release >/dev/null
cmake --build --preset release --target yonder yonderd
export PATH=$bin:$PATH
mkdir -p "$demo"
# Demo nodes listen on loopback, on ports the system picks.
export YONDER_LINK_LISTEN=127.0.0.1:0
# The demo provider runs the small local test image (scripts/build-test-image.sh),
# never pulling: nothing here needs a registry.
export YONDER_IMAGE_ALLOWLIST='yonder-test/*' YONDER_PULL_POLICY=never

fifos=()
trap 'rm -f "${fifos[@]}"' EXIT

# start_node NAME: init (once) and start yonderd for .demo/NAME unless it
# runs already; waits for readiness and records its PID in .demo/NAME.pid.
start_node() {
  local name=$1 home=$demo/$1 pid
  if [ ! -f "$home/identity.key" ]; then
    YONDER_HOME=$home yonder init --name "demo-$name" --json |
      sed -n 's/.*"node_id": "\([^"]*\)".*/\1/p' >"$demo/$name.node_id"
  fi
  if pid=$(running_pid "$name") && YONDER_HOME=$home yonder status >/dev/null 2>&1; then
    echo "    demo $name: yonderd already running (pid $pid), reused"
    record_node_id "$name"
    return
  fi
  rm -f "$demo/$name.pid"
  local ready
  ready=$(mktemp -u /tmp/yonder-ready.XXXXXX)
  mkfifo "$ready"
  fifos+=("$ready")
  # nohup: the daemon outlives this script (and its terminal) until --down.
  YONDER_HOME=$home nohup yonderd --ready-fd 3 3>"$ready" >>"$demo/$name.log" 2>&1 &
  pid=$!
  local line=""
  if ! read -r -t 30 line <"$ready" || [ "$line" != ready ]; then
    echo "yonderd for $name did not start; its log (.demo/$name.log):" >&2
    tail -n 20 "$demo/$name.log" >&2
    kill "$pid" 2>/dev/null || true
    exit 1
  fi
  echo "$pid" >"$demo/$name.pid"
  echo "    demo $name: yonderd started (pid $pid)"
  record_node_id "$name"
}

# record_node_id NAME: .demo/NAME.node_id (the owner label of the provider's
# containers, for --down), from the running daemon when init did not write it.
record_node_id() {
  [ -s "$demo/$1.node_id" ] && return
  YONDER_HOME=$demo/$1 yonder status --json | sed -n 's/.*"node_id": "\([^"]*\)".*/\1/p' >"$demo/$1.node_id"
}

echo "=== starting the provider and the consumer (logs: .demo/*.log)"
start_node provider
start_node consumer
P() { YONDER_HOME=$demo/provider yonder "$@"; }
C() { YONDER_HOME=$demo/consumer yonder "$@"; }

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
echo "=== yonder share --scope run,exec,files,forward (provider)"
link=$(P share --scope run,exec,files,forward --expires 10m --no-qr --json |
  sed -n 's/.*"link": "\(yonder:[^"]*\)".*/\1/p')
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
  mkdir -p "$demo/work"
  echo "hello from the consumer's folder" >"$demo/work/greeting.txt"
  set +e
  # shellcheck disable=SC2016  # expanded inside the job
  (cd "$demo/work" && C run --on demo-provider --image "$image" -- \
    sh -c 'cat greeting.txt; echo "ran on the provider as uid $(id -u) in $(pwd)"; ls /dev/nvidia0 >/dev/null 2>&1 && echo "GPU visible" || echo "no GPU visible (CPU job)"')
  code=$?
  set -e
  echo "(yonder run exit code: $code, the job's own)"
  echo
  echo "=== yonder ps --all (consumer)"
  C ps --all
  job=$(C ps --all --json | sed -n 's/.*"job_id": "\([0-9a-f]*\)".*/\1/p' | tail -n 1)
  if [ -n "$job" ]; then
    echo
    echo "=== yonder audit (provider): the entries for job ${job:0:12}"
    # The job's end is written a moment after the consumer saw it.
    for _ in $(seq 1 50); do
      entries=$(P audit -n 1000)
      grep -q "run.end .*${job:0:12}" <<<"$entries" && break
      sleep 0.1
    done
    grep -E "^SEQ|  ${job:0:12}  " <<<"$entries" || true
    P audit --verify | tail -n 1
  fi
else
  echo "(skipped: no Docker engine; scripts/services.sh starts one)"
fi
echo
echo "=== done. The demo daemons keep running; try more:"
echo "    export PATH=$bin:\$PATH YONDER_HOME=$demo/consumer"
echo "    yonder run --on demo-provider --image $image -- echo hi; yonder ps --all"
echo "    YONDER_HOME=$demo/provider yonder audit"
echo "  stop them and remove .demo: scripts/quickstart.sh --down"
