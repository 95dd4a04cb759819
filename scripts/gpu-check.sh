#!/usr/bin/env bash
# The GPU check, run on a lent GPU machine from the repository root with the bundle of
# scripts/gpu-bundle.sh carried along: what the machine offers (driver, Vulkan ICDs), then, when a
# Vulkan driver for the GPU is present, the e2e suite and the GLSL comparison on it. Results go
# under $OUT (machine.txt, devices.json, e2e.txt, bench.txt). Takes a few minutes at most.
set -uo pipefail
out=${OUT:-/tmp/cubecc-gpu}
mkdir -p "$out"
bundle=$PWD/gpu-bundle
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$bundle/bin:$PATH
export CUBECC_BENCH_GLSL_DIR=$PWD/bench/glsl
{
  echo "== nvidia-smi"; nvidia-smi 2>&1 | head -20
  echo "== os"; head -3 /etc/os-release
  echo "== Vulkan ICDs"; ls -la /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>&1
  cat /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json 2>/dev/null | head -20
  echo "== driver libraries"; ldconfig -p | grep -E 'libcuda|libnvidia|GLX_nvidia|libvulkan' | head -20
  echo "== CUDA"; ls /usr/local/cuda*/bin 2>&1 | head -5
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"
timeout 60 cubecc devices --json > "$out/devices.json" 2> "$out/devices.err"
echo "devices: rc=$?"; cat "$out/devices.json" "$out/devices.err"
vulkan_line=$(grep '"backend": "vulkan"' "$out/devices.json" || true)
if echo "$vulkan_line" | grep -q '"available": true' && ! echo "$vulkan_line" | grep -q llvmpipe; then
  CUBECC_DEVICE=vulkan timeout 240 cubecc_e2e_tests --gtest_filter='*vulkan*:*Vulkan*' > "$out/e2e.txt" 2>&1
  echo "e2e: rc=$?"; tail -5 "$out/e2e.txt"
  (cd "$out" && timeout 120 vulkan_vs_glsl --rounds 21 > "$out/bench.txt" 2>&1)
  echo "bench: rc=$?"; cat "$out/bench.txt"
else
  echo "no Vulkan driver for the GPU here: nothing to run for the Vulkan backend" | tee "$out/e2e.txt"
  # Why, in the loader's words (a missing /dev/nvidia-modeset makes NVIDIA's ICD refuse).
  VK_LOADER_DEBUG=error,driver timeout 30 cubecc devices 2>&1 | tail -8 | tee -a "$out/e2e.txt"
fi
