#!/usr/bin/env bash
# Packs what the GPU check (scripts/gpu-check.sh) runs on a lent GPU machine, which has none of
# this project's packages: the stripped release binaries, the shared libraries they need beyond
# glibc, the Vulkan loader and glslangValidator. Writes gpu-bundle/ (ignored by git); the device
# tool carries it with `carry: ["gpu-bundle"]` (64 MiB at most, which is why NVRTC is not in it:
# libnvrtc.so.13 alone is ~105 MB; gpu-check.sh takes the GPU machine's, CUDA 13.0 there). The CUDA
# driver (libcuda.so.1) is the machine's too: cubecc only ever dlopens it.
# Usage: bash scripts/gpu-bundle.sh   (after a release build in build/)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=$root/gpu-bundle
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
for tool in build/tools/cubecc build/test/cubecc_e2e_tests build/bench/vulkan_vs_glsl \
            build/examples/run_examples build/examples/libcubecc_examples.so \
            "$(command -v glslangValidator)"; do
  cp "$root/$tool" "$bundle/bin/" 2>/dev/null || cp "$tool" "$bundle/bin/"
done
# Benchmarks that may not be built yet.
for tool in build/bench/compile_bench build/bench/launch_bench build/bench/env_bench \
            build/bench/capi_bench build/bench/gpu_roofline \
            build/test/capi/cubecc_external_memory_tests; do
  if [ -x "$root/$tool" ]; then cp "$root/$tool" "$bundle/bin/"; fi
done
strip "$bundle"/bin/*
for lib in libfmt.so.9 libxxhash.so.0 libspirv-cross-c-shared.so.0 libvulkan.so.1 libstdc++.so.6; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" "$bundle/lib/"
done
# Anything else the binaries link that the GPU machine (Ubuntu 24.04, glibc) may lack, except NVRTC
# and the drivers, which come from the machine.
for bin in "$bundle"/bin/*; do
  ldd "$bin" 2>/dev/null | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  name=$(basename "$lib")
  case "$name" in
    libc.so.*|libm.so.*|libdl.so.*|librt.so.*|libpthread.so.*|ld-linux*|libgcc_s.so.*) ;;
    libnvrtc*|libcuda.so*|libamdhip64*|libamd_comgr*) ;;
    *) [ -e "$bundle/lib/$name" ] || cp -L "$lib" "$bundle/lib/" ;;
  esac
done
du -sh "$bundle"
