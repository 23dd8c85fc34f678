#!/usr/bin/env bash
# What a job's /dev/shm size means for a PyTorch DataLoader, the reason for
# the provider's default (half the job's memory; jobs.shm_mib, run --shm-size).
#
# A DataLoader with workers hands each batch from the worker to the trainer
# through shared memory: torch puts the batch's tensors in /dev/shm
# (shm_open), and with prefetching several batches sit there at once. Docker
# mounts a 64 MiB tmpfs on a container's /dev/shm unless told otherwise,
# which is why "DataLoader worker ... is killed by signal: Bus error" is the
# first thing many PyTorch users meet in a container.
#
# This runs the same loader (ImageNet-sized samples, 3x224x224 float32,
# batch 32 = 19 MiB a batch, 4 workers, prefetch 2) under a private mount
# namespace whose /dev/shm is a tmpfs of each size below, as a container's
# is, side by side in one run:
#   workers=0           the anchor: no shared memory at all, one process
#   shm 64m             docker's default (and Yonder's jobs.shm_mib before)
#   shm 256m            a common hand-set --shm-size
#   shm half of 4G      Yonder's default for a job with --memory 4G
# and prints, for each, whether the epoch finished, its batches a second,
# and the ratio to the anchor.
#
# Needs root (unshare -m, mount) and Debian's python3-torch (apt-get install
# python3-torch; not in scripts/packages.txt: the suite does not need it).
# Not part of the test suite: timing belongs here.
#
#   bench/shm_dataloader.sh [BATCHES]      (default 48)
set -euo pipefail
batches=${1:-48}
python=/usr/bin/python3
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "shm_dataloader: Debian's python3-torch is not installed (apt-get install python3-torch)" >&2
  exit 1
fi
[ "$(id -u)" -eq 0 ] || { echo "shm_dataloader: needs root (a private /dev/shm per run: unshare -m)" >&2; exit 1; }

loader=$(mktemp /tmp/yonder-shm-bench.XXXXXX.py)
trap 'rm -f "$loader"' EXIT
cat >"$loader" <<'EOF'
import sys, time, torch
from torch.utils.data import DataLoader, Dataset

class Images(Dataset):
    def __init__(self, n): self.n = n
    def __len__(self): return self.n
    def __getitem__(self, i):
        # Some work per sample, as decoding and augmenting an image costs:
        # what the workers are there to spread over the cores.
        x = torch.full((3, 224, 224), float(i % 7) / 7)
        for _ in range(12):
            x = (x.exp() + 1).log().sqrt()
        return x, i

batches, workers = int(sys.argv[1]), int(sys.argv[2])
kw = {"prefetch_factor": 2, "persistent_workers": False} if workers else {}
dl = DataLoader(Images(batches * 32), batch_size=32, num_workers=workers, **kw)
start = time.monotonic()
seen = 0
try:
    for x, _ in dl:
        seen += 1
        x.sum()  # touch the batch, as a training step would
except Exception as e:  # the DataLoader's own error, first line
    print(f"FAILED after {seen} batches: {str(e).splitlines()[0][:160]}")
    sys.exit(1)
print(f"{seen / (time.monotonic() - start):.1f}")
EOF

run_one() {  # label shm-size-or-"" workers
  local label=$1 size=$2 workers=$3 out rc=0
  if [ -n "$size" ]; then
    out=$(unshare -m sh -c "mount -t tmpfs -o size=$size,mode=1777 tmpfs /dev/shm && exec $python $loader $batches $workers" 2>&1 | tr -d '\0') || rc=$?
  else
    out=$("$python" "$loader" "$batches" "$workers" 2>&1 | tr -d '\0') || rc=$?
  fi
  out=$(printf '%s\n' "$out" | grep -v '^\s*$' | tail -n 1)
  if [ "$rc" -eq 0 ]; then
    printf '%-28s %10s batches/s' "$label" "$out"
    [ -n "$anchor" ] && python3 -c "print(f'   {$out / $anchor:5.2f} x anchor')" || echo "   (anchor)"
  else
    printf '%-28s %s\n' "$label" "$out"
  fi
  last=$out
}

echo "DataLoader: $batches batches of 32 x 3x224x224 float32 (19 MiB each), 4 workers, prefetch 2; torch $("$python" -c 'import torch; print(torch.__version__)')"
anchor=""
run_one "workers=0 (anchor)" "" 0
anchor=$last
run_one "shm 64m (docker's default)" 64m 4
run_one "shm 256m" 256m 4
run_one "shm 2g (ours, --memory 4G)" 2g 4
