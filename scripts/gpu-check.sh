#!/usr/bin/env bash
# The GPU check, run on a lent GPU machine (an NVIDIA H200 with its driver and a CUDA toolkit) from
# the repository root with the bundle of scripts/gpu-bundle.sh carried along:
#   1. what the machine offers (driver, CUDA toolkits, Vulkan ICDs) -> machine.txt
#   2. `cubecc devices` (text and JSON)                             -> devices.txt, devices.json
#   3. streams, events, 4 threads and a faulting kernel on cuda    -> e2e-cuda-streams.txt
#      the e2e suite on the cuda device: examples, ABI, bf16        -> e2e-cuda.txt (+ .json)
#      then every op family on cuda                                  -> e2e-cuda-ops.txt (+ .json)
#   2b. bench/gpu_roofline: copy ceiling, bandwidth kernels, GEMMs vs cuBLAS -> roofline.*
#   4. the benchmarks present in the bundle: compile_bench (NVRTC and the driver's module load),
#      and, where a Vulkan driver for the GPU exists, vulkan_vs_glsl -> bench-*.txt / .json
#   5. when time is left and Vulkan has the GPU: the e2e suite on vulkan -> e2e-vulkan.txt
# (and, on cuda: a bundle built and run, tuning, adopted device memory, launch_bench)
# Results go under $OUT; summary.txt has one line per step. Every step has a timeout so the whole
# check ends within about 7.5 minutes (CUBECC_GPU_CHECK_SECONDS, default 450).
#
# NVRTC (libnvrtc.so.13, ~105 MB) is too large for the bundle; it is taken from the machine's CUDA
# toolkit (/usr/local/cuda-13.0 on the lent machines), found below and put on LD_LIBRARY_PATH.
set -uo pipefail
out=${OUT:-/tmp/cubecc-gpu}
mkdir -p "$out"
bundle=$PWD/gpu-bundle
budget=${CUBECC_GPU_CHECK_SECONDS:-450}
SECONDS=0
summary=$out/summary.txt
counts() { grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?[,.]' "$1" | tr '\n' ' '; }
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
# The seconds a step may take: its own limit, or what is left of the budget if that is less.
limit() {
  local left=$((budget - SECONDS))
  if ((left < $1)); then echo $((left > 0 ? left : 1)); else echo "$1"; fi
}

# NVRTC from the machine's CUDA toolkit, the newest 13.x first (cubecc was built against 13.0).
nvrtc_dir=
for dir in /usr/local/cuda-13.0/lib64 /usr/local/cuda-13*/lib64 /usr/local/cuda/lib64 \
           /usr/local/cuda-13*/targets/x86_64-linux/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  if [ -e "$dir/libnvrtc.so.13" ]; then nvrtc_dir=$dir; break; fi
done
if [ -z "$nvrtc_dir" ]; then
  found=$(ldconfig -p 2>/dev/null | awk '/libnvrtc\.so\.13 / {print $NF; exit}')
  [ -n "$found" ] && nvrtc_dir=$(dirname "$found")
fi
export LD_LIBRARY_PATH=$bundle/lib${nvrtc_dir:+:$nvrtc_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The kernels NVRTC compiles include cuda_fp16.h / cuda_bf16.h: codegen looks in $CUDA_HOME/include.
if [ -z "${CUDA_HOME:-}" ]; then
  for root in "${nvrtc_dir:+$nvrtc_dir/..}" "${nvrtc_dir:+$nvrtc_dir/../../..}" /usr/local/cuda-13.0 \
              /usr/local/cuda; do
    if [ -n "$root" ] && [ -e "$root/include/cuda_fp16.h" ]; then
      CUDA_HOME=$(cd "$root" && pwd); export CUDA_HOME; break
    fi
  done
fi
export PATH=$bundle/bin:$PATH
export CUBECC_BENCH_GLSL_DIR=$PWD/bench/glsl
export MESA_SHADER_CACHE_DISABLE=true

{
  echo "== nvidia-smi"; nvidia-smi 2>&1 | head -20
  echo "== os"; head -3 /etc/os-release
  echo "== CUDA toolkits"; ls -d /usr/local/cuda* 2>&1; ls /usr/local/cuda*/bin 2>&1 | head -5
  echo "== NVRTC used: ${nvrtc_dir:-none found}"; ls -la "$nvrtc_dir"/libnvrtc* 2>&1
  echo "== CUDA headers for NVRTC: CUDA_HOME=${CUDA_HOME:-none found}"
  echo "== driver libraries"; ldconfig -p | grep -E 'libcuda|libnvidia|GLX_nvidia|libvulkan' | head -20
  echo "== Vulkan ICDs"; ls -la /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>&1
  cat /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json 2>/dev/null | head -20
  echo "== libraries the bundle's binaries miss"
  for bin in "$bundle"/bin/*; do ldd "$bin" 2>&1 | grep 'not found' | sed "s|^|$(basename "$bin"): |"; done
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"
[ -n "$nvrtc_dir" ] || note "NVRTC: libnvrtc.so.13 not found on this machine: cuda kernels cannot be compiled"
[ -n "${CUDA_HOME:-}" ] || note "CUDA headers: no cuda_fp16.h found: cuda kernels cannot be compiled"

timeout "$(limit 60)" cubecc devices > "$out/devices.txt" 2>&1
rc=$?
note "devices: rc=$rc"
cat "$out/devices.txt"
timeout "$(limit 60)" cubecc devices --json > "$out/devices.json" 2> "$out/devices.err"
cuda_line=$(grep '"backend": "cuda"' "$out/devices.json" || true)
vulkan_line=$(grep '"backend": "vulkan"' "$out/devices.json" || true)

# The roofline first (issue 20): the copy ceiling, the bandwidth kernels against it, and every
# tensor-core GEMM shape against cuBLAS (which must agree exactly: see bench/gpu_roofline.cpp),
# as a table, JSON and the SVG chart.
if echo "$cuda_line" | grep -q '"available": true' && [ -x "$bundle/bin/gpu_roofline" ]; then
  timeout "$(limit 200)" gpu_roofline --device cuda --reps 10 --json "$out/roofline.json" \
    > "$out/roofline.txt" 2>&1
  rc=$?
  note "gpu_roofline: rc=$rc ($(tail -1 "$out/roofline.txt"))"
  cat "$out/roofline.txt"
  command -v python3 > /dev/null && python3 scripts/roofline-svg.py "$out/roofline.json" \
    > "$out/roofline.svg" 2> "$out/roofline-svg.err"
else
  note "gpu_roofline: not run (no cuda device, or not in the bundle)"
fi

# The e2e suite on cuda: a test whose device does not open is skipped (it says why), so check the
# device first and say so plainly.
if echo "$cuda_line" | grep -q '"available": true'; then
  # Streams and the lost context first, in their own run: two streams ordered by an event, four
  # threads with their own streams, tickets, and a kernel storing through a bad pointer (in a
  # child process) that must lose the device with DeviceFailure while a new device works. By its
  # path: the death test re-executes argv[0] with execv, which does not search PATH.
  timeout "$(limit 60)" "$bundle/bin/cubecc_e2e_tests" \
    --gtest_filter='Devices/GpuStreams.*/cuda:Devices/GpuContextLoss.*/cuda' \
    --gtest_output="json:$out/e2e-cuda-streams.json" > "$out/e2e-cuda-streams.txt" 2>&1
  rc=$?
  note "e2e cuda (streams, events, 4 threads, faulting kernel): rc=$rc ($(counts "$out/e2e-cuda-streams.txt"))"
  grep -E '^\[  (FAILED|DEATH)  +\]' "$out/e2e-cuda-streams.txt" | head -12
  CUBECC_DEVICE=cuda timeout "$(limit 150)" cubecc_e2e_tests \
    --gtest_filter='*cuda*:-Ops/*:Devices/GpuStreams.*:Devices/GpuContextLoss.*' \
    --gtest_output="json:$out/e2e-cuda.json" > "$out/e2e-cuda.txt" 2>&1
  rc=$?
  note "e2e cuda (examples, abi, bf16): rc=$rc ($(counts "$out/e2e-cuda.txt"))"
  tail -30 "$out/e2e-cuda.txt"
  CUBECC_DEVICE=cuda timeout "$(limit 210)" cubecc_e2e_tests --gtest_filter='Ops/*cuda*' \
    --gtest_output="json:$out/e2e-cuda-ops.json" > "$out/e2e-cuda-ops.txt" 2>&1
  rc=$?
  note "e2e cuda (ops): rc=$rc ($(counts "$out/e2e-cuda-ops.txt"))"
  grep -E '^\[  FAILED  \]|^\[ops\]' "$out/e2e-cuda-ops.txt" | head -40
else
  note "e2e cuda: not run, the cuda device does not open: $cuda_line"
fi

# Environment bundles on the GPU: every example kernel built for the device's arch (by NVRTC here,
# as a CI machine would), then the examples run with the bundle: nothing may be compiled. Then the
# matmul variants tuned on the GPU into a bundle of records.
if echo "$cuda_line" | grep -q '"available": true' && [ -e "$bundle/bin/libcubecc_examples.so" ]; then
  arch=$(sed -n 's/.*"arch": "\(sm_[0-9a-z]*\)".*/\1/p' "$out/devices.json" | head -1)
  timeout "$(limit 60)" cubecc env build "$bundle/bin/libcubecc_examples.so" \
    --target "cuda:${arch:-sm_90},interp" -o "$out/gpu.cubeenv" > "$out/env.txt" 2>&1
  rc=$?
  note "env build cuda:${arch:-sm_90}: rc=$rc"
  CUBECC_DEVICE=cuda timeout "$(limit 30)" run_examples >> "$out/env.txt" 2>&1
  CUBECC_ENV="$out/gpu.cubeenv" CUBECC_DEVICE=cuda timeout "$(limit 30)" run_examples \
    >> "$out/env.txt" 2>&1
  rc=$?
  note "run_examples from the bundle on cuda: rc=$rc ($(grep -c ', 0 compiles$' "$out/env.txt") runs with 0 compiles)"
  timeout "$(limit 60)" cubecc tune "$bundle/bin/libcubecc_examples.so" --device cuda \
    -o "$out/tuning.cubeenv" >> "$out/env.txt" 2>&1
  rc=$?
  note "tune on cuda: rc=$rc"
  tail -25 "$out/env.txt"
fi

# Memory the caller owns on the GPU: a CUdeviceptr adopted as a Buffer (runtime and C API paths).
if echo "$cuda_line" | grep -q '"available": true' &&
  [ -x "$bundle/bin/cubecc_external_memory_tests" ]; then
  timeout "$(limit 60)" cubecc_external_memory_tests --gtest_filter='*cuda*:ExternalMemory.*'     > "$out/external-memory-cuda.txt" 2>&1
  rc=$?
  note "external memory on cuda: rc=$rc ($(counts "$out/external-memory-cuda.txt"))"
fi

# The C API's cost per launch on the GPU, against the C++ runtime.
if [ -x "$bundle/bin/capi_bench" ] && echo "$cuda_line" | grep -q '"available": true'; then
  timeout "$(limit 60)" capi_bench "$bundle/bin/libcubecc_examples.so" --devices cuda \
    > "$out/bench-capi.txt" 2>&1
  note "capi_bench (cuda: C API vs C++ per launch): rc=$?"
fi

# Benchmarks: whichever the bundle has.
if [ -x "$bundle/bin/compile_bench" ]; then
  (cd "$out" && timeout "$(limit 60)" compile_bench --reps 3 > "$out/bench-compile.txt" 2>&1)
  rc=$?
  note "compile_bench: rc=$rc"
  tail -20 "$out/bench-compile.txt"
else
  note "compile_bench: not in the bundle"
fi
if [ -x "$bundle/bin/launch_bench" ] && echo "$cuda_line" | grep -q '"available": true'; then
  (cd "$out" && timeout "$(limit 60)" launch_bench --devices cuda > "$out/bench-launch.txt" 2>&1)
  rc=$?
  note "launch_bench (cuda: direct vs graph replay): rc=$rc"
  tail -6 "$out/bench-launch.txt"
fi
gpu_vulkan=false
if echo "$vulkan_line" | grep -q '"available": true' && ! echo "$vulkan_line" | grep -q llvmpipe; then
  gpu_vulkan=true
fi
if $gpu_vulkan && [ -x "$bundle/bin/vulkan_vs_glsl" ]; then
  (cd "$out" && CUBECC_DEVICE=vulkan timeout "$(limit 90)" vulkan_vs_glsl --rounds 21 \
     > "$out/bench-vulkan-vs-glsl.txt" 2>&1)
  rc=$?
  note "vulkan_vs_glsl: rc=$rc"
  cat "$out/bench-vulkan-vs-glsl.txt"
fi

# The Vulkan backend on the GPU, with what time is left (no validation layer in the bundle).
if $gpu_vulkan; then
  if ((budget - SECONDS > 30)); then
    CUBECC_VULKAN_VALIDATION=0 CUBECC_DEVICE=vulkan timeout "$(limit 240)" cubecc_e2e_tests \
      --gtest_filter='*vulkan*:*Vulkan*' > "$out/e2e-vulkan.txt" 2>&1
    rc=$?
    note "e2e vulkan: rc=$rc ($(counts "$out/e2e-vulkan.txt"))"
  else
    note "e2e vulkan: no time left"
  fi
else
  note "vulkan: no Vulkan driver for the GPU here"
  # Why, in the loader's words (a missing /dev/nvidia-modeset makes NVIDIA's ICD refuse).
  VK_LOADER_DEBUG=error,driver timeout "$(limit 30)" cubecc devices 2>&1 | tail -8 > "$out/vulkan-why.txt"
  cat "$out/vulkan-why.txt"
fi
note "total: ${SECONDS}s"
