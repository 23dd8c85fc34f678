#!/usr/bin/env bash
# Real-GPU check, for a machine with an NVIDIA GPU: NVML probe and
# per-process accounting through the built gpu_nvml_device_test, the GPU
# known-answer check's program with the real PyTorch, and what the engine
# offers for GPU containers, and the VRAM guard of GPU shares over the real
# driver, and remote CUDA (src/gpu/remote) over the real driver.
# Usage: scripts/gpu-check.sh (after a dev build).
set -u
T=build/dev/tests/gpu/gpu_nvml_device_test
echo "== nvidia-smi"; timeout 20 nvidia-smi -L 2>&1 | head -5
echo "== tools"; for t in docker dockerd nvidia-container-runtime-hook nvidia-ctk python3; do printf '%s: %s\n' $t "$(command -v $t || echo missing)"; done
echo "== docker"; timeout 10 docker info 2>/dev/null | grep -iE 'server version|runtimes|default runtime' || echo "no docker engine answers"
echo "== probe without a GPU process"; YONDER_EXPECT_GPU=1 timeout 60 $T 2>&1 | grep -vE '^\[ RUN|^\[----' | tail -40
echo "== the GPU known-answer check's program with the real PyTorch (mesh verify --gpu)"
YONDER_EXPECT_GPU=1 YONDER_EXPECT_GPU_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" \
  timeout 120 build/dev/tests/mesh/mesh_gpu_benchmark_test --gtest_filter='*RealGpu*' 2>&1 | grep -E 'GPU check|OK|FAIL|Failure|Expected|which is'
if python3 -c 'import torch' 2>/dev/null; then
  echo "== with a torch process holding ~1 GiB"
  python3 -c 'import torch,time; x=torch.empty(2**28, device="cuda"); print("holding", flush=True); time.sleep(25)' &
  P=$!; sleep 12
  YONDER_EXPECT_GPU=1 timeout 30 $T --gtest_filter='*Processes*' 2>&1 | grep -E 'process|MiB|OK|FAIL'
  echo "torch pid $P"; kill $P
else
  echo "== no torch: no process to hold memory"
fi
# GPU shares: the VRAM guard over the real driver. Two processes, each its
# own job's ledger (1 GiB and 2 GiB, written as the provider writes them:
# src/gpu/vram_guard/ledger.h), each refused past its budget with
# CUDA_ERROR_OUT_OF_MEMORY (error 2) while the device has room.
echo "== VRAM guard on the real driver (budgets of 1 GiB and 2 GiB)"
G=build/dev/lib/yonder/libyonder-vram-guard.so; P=build/dev/tests/gpu/vram_probe
D=$(dirname "$(ldconfig -p | grep -m1 'libcuda.so.1 ' | sed 's/.*=> //')")
for mib in 1024 2048; do
  L=$(mktemp /tmp/yonder-vram-ledger.XXXXXX)
  python3 -c "import struct,sys; open(sys.argv[1],'wb').write(b'YVRAM01\0'+struct.pack('<Q',int(sys.argv[2])<<20)+bytes(128*16))" "$L" $mib
  (LD_LIBRARY_PATH=$D YONDER_VRAM_LEDGER=$L LD_PRELOAD=$G timeout 60 $P ctx info alloc $((mib - 100)) alloc 200 info \
     free_all alloc $((mib - 100)) 2>&1 | sed "s/^/budget $mib: /"; rm -f "$L") &
done
wait
# Remote CUDA: an unmodified driver-API program (its kernels as PTX text)
# through the stand-in libcuda.so.1 and yonder-cuda-worker, the worker on
# the real driver; then the bench with the real driver on both sides.
echo "== remote CUDA: cuda_program through the stand-in and the worker on the real driver"
W=build/dev/lib/yonder/yonder-cuda-worker
for scenario in session threads "samples /tmp" "launches 100000"; do
  S=$(mktemp -u /tmp/yonder-cuda.XXXXXX)
  $W --listen "$S" --driver libcuda.so.1 & WP=$!
  for _ in $(seq 100); do [ -S "$S" ] && break; sleep 0.1; done
  ( time LD_LIBRARY_PATH=build/dev/lib/yonder/cuda YONDER_CUDA_SOCKET=$S timeout 120 \
      build/dev/tests/gpu/remote/cuda_program $scenario ) 2>&1 | grep -vE ' ok \(|^$|^user|^sys' | sed "s/^/$scenario: /"
  wait $WP; echo "$scenario: worker exit $?"
done
echo "== remote CUDA bench, real driver both sides"
timeout 300 build/dev/bench/cuda_remote_bench --driver=libcuda.so.1 --bytes=256M --pairs=3 2>&1 | tail -8
