#!/usr/bin/env bash
# A real one-node Slurm cluster for the Slurm executor's tests,
# from Debian 12's packages (slurmctld, slurmd, slurm-client, munge):
#
#   scripts/slurm.sh start    write the configuration, start munged, slurmctld
#                             and slurmd, wait until the node is idle (idempotent)
#   scripts/slurm.sh stop     stop the daemons this script started
#   scripts/slurm.sh status   sinfo, or why there is nothing to ask
#
# Everything lives in $YONDER_SLURM_DIR (default /run/yonder-slurm): slurm.conf,
# gres.conf, the state and spool folders, the two fake GPU device files
# (gpu0, gpu1: character devices with /dev/null's numbers; Slurm only stats
# them, and without cgroups nothing is fenced), and the logs:
#   $YONDER_SLURM_DIR/log/slurmctld.log, slurmd.log, jobcomp.txt
#   /var/log/munge/munged.log (munged's own default)
# Clients find the cluster through SLURM_CONF=$YONDER_SLURM_DIR/slurm.conf
# (the script prints it; /etc/slurm is left alone, so a site's own Slurm
# configuration is never touched).
#
# The node: CPUs and memory of this machine, Gres=gpu:2, select/cons_tres,
# no cgroups (proctrack/linuxproc, task/none), no accounting storage; job
# completions go to jobcomp/filetxt, which is what sacct reads then.
# Slurm uses its own ports (6817/6818 unless YONDER_SLURM_PORTS=ctld,d) and
# no containers, so it does not disturb dockerd or the Docker tests.
set -euo pipefail

dir=${YONDER_SLURM_DIR:-/run/yonder-slurm}
conf=$dir/slurm.conf
ports=${YONDER_SLURM_PORTS:-6817,6818}
ctld_port=${ports%,*}
slurmd_port=${ports#*,}
export SLURM_CONF=$conf

installed() { command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null && command -v munged >/dev/null; }
munge_up() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
node_idle() { [ -f "$conf" ] && sinfo -h -N -o '%T' 2>/dev/null | grep -qx 'idle'; }
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

write_config() {
  mkdir -p "$dir/state" "$dir/spool" "$dir/log" "$dir/work"
  chmod 755 "$dir"
  chmod 1777 "$dir/work"  # job workspaces, staged by the executor (root) for any job user
  for i in 0 1; do
    [ -c "$dir/gpu$i" ] || { rm -f "$dir/gpu$i"; mknod "$dir/gpu$i" c 1 3; }
  done
  local cpus mem
  # At least 8 CPUs, whatever this machine has (config_overrides lets slurmd
  # accept it): the tests then queue on GPUs, not on cores.
  cpus=$(nproc)
  [ "$cpus" -ge 8 ] || cpus=8
  mem=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.8 }' /proc/meminfo)
  cat >"$conf.new" <<EOF
# Written by scripts/slurm.sh; rewritten on every start.
ClusterName=yonder
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ReturnToService=2
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
GresTypes=gpu
SlurmdParameters=config_overrides
# Short timeouts: a test's cancelled or timed-out job is gone in seconds.
KillWait=2
OverTimeLimit=0
MinJobAge=300
InactiveLimit=0
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
  cat >"$dir/gres.conf.new" <<EOF
AutoDetect=off
Name=gpu File=$dir/gpu0
Name=gpu File=$dir/gpu1
EOF
  mv "$conf.new" "$conf"
  mv "$dir/gres.conf.new" "$dir/gres.conf"
}

wait_for() {  # what, seconds, command...
  local what=$1 seconds=$2
  shift 2
  for _ in $(seq 1 $((seconds * 4))); do
    "$@" && return 0
    sleep 0.25
  done
  echo "slurm: $what did not come up; see $dir/log/" >&2
  return 1
}

start() {
  if ! installed; then
    echo "slurm: not installed (apt-get install slurmctld slurmd slurm-client munge; scripts/setup.sh does)" >&2
    return 1
  fi
  if node_idle || { [ -f "$conf" ] && sinfo -h -N -o '%T' 2>/dev/null | grep -qE '^(mixed|allocated)'; }; then
    echo "slurm: already running (SLURM_CONF=$conf)"
    return 0
  fi
  write_config
  if ! munge_up; then
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    chmod 755 /run/munge
    if [ ! -s /etc/munge/munge.key ]; then
      mkdir -p /etc/munge
      dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=128 2>/dev/null
      chown munge:munge /etc/munge/munge.key
      chmod 400 /etc/munge/munge.key
    fi
    echo "slurm: starting munged (log: /var/log/munge/munged.log)"
    runuser -u munge -- munged
    wait_for munged 20 munge_up
  fi
  if ! pid_alive "$dir/slurmctld.pid"; then
    echo "slurm: starting slurmctld (log: $dir/log/slurmctld.log)"
    # -i: ignore state files a previous, differently configured run left.
    slurmctld -i
  fi
  if ! pid_alive "$dir/slurmd.pid"; then
    echo "slurm: starting slurmd (log: $dir/log/slurmd.log)"
    slurmd -N localhost
  fi
  if ! wait_for "the node" 60 node_idle; then
    sinfo -N -l >&2 || true
    tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
    return 1
  fi
  echo "slurm: node idle, gpu:2 (SLURM_CONF=$conf)"
}

stop() {
  local p
  for p in slurmd slurmctld; do
    if pid_alive "$dir/$p.pid"; then
      kill "$(cat "$dir/$p.pid")"
      echo "slurm: stopped $p"
    fi
  done
}

status() {
  if ! installed; then
    echo "slurm: not installed"
    return 1
  fi
  if [ ! -f "$conf" ]; then
    echo "slurm: not configured (scripts/slurm.sh start)"
    return 1
  fi
  echo "SLURM_CONF=$conf"
  sinfo -N -o '%N %T %c %m %G'
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
