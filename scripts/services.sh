#!/usr/bin/env bash
# Starts the services the test suite needs, if they are not running yet:
#   - dockerd (Debian's docker.io), the engine the executor tests talk to;
#   - a one-node Slurm cluster (scripts/slurm.sh) when Slurm is installed.
# Idempotent. Prints what it started; processes it starts keep running.
set -euo pipefail

docker_up() { docker version --format '{{.Server.APIVersion}}' >/dev/null 2>&1; }

if docker_up; then
  echo "services: dockerd already running"
else
  if ! command -v dockerd >/dev/null; then
    echo "services: dockerd is not installed; run scripts/setup.sh" >&2
    exit 1
  fi
  args=()
  # gVisor as the stronger isolation tier, when runsc is installed and the
  # machine has no Docker configuration of its own. runsc runs with
  # --network=none: jobs in that tier get no network (in nested sandboxes
  # gVisor cannot set up one anyway).
  if command -v runsc >/dev/null && [ ! -f /etc/docker/daemon.json ]; then
    args+=(--config-file "$(cd "$(dirname "$0")" && pwd)/dockerd.json")
  fi
  echo "services: starting dockerd ${args[*]} (log: /var/log/yonder-dockerd.log)"
  nohup dockerd "${args[@]}" >/var/log/yonder-dockerd.log 2>&1 &
  # dockerd has no readiness notification outside systemd: wait for its API.
  for _ in $(seq 1 120); do
    docker_up && break
    sleep 0.5
  done
  if ! docker_up; then
    echo "services: dockerd did not come up; last log lines:" >&2
    tail -n 20 /var/log/yonder-dockerd.log >&2
    exit 1
  fi
fi
echo "services: Docker API $(docker version --format '{{.Server.APIVersion}}')"

# The Slurm backend's cluster: its own daemons, ports and folder
# (/run/yonder-slurm), no containers, so it leaves dockerd alone.
if command -v slurmctld >/dev/null && command -v slurmd >/dev/null; then
  "$(cd "$(dirname "$0")" && pwd)/slurm.sh" start
else
  echo "services: Slurm is not installed; the Slurm tests will skip (scripts/setup.sh installs it)"
fi
