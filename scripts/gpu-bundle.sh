#!/usr/bin/env bash
# Packs what the GPU check (scripts/gpu-check.sh) runs on a lent GPU machine, which has none of
# this project's packages: the stripped release binaries, the shared libraries they need beyond
# glibc, the Vulkan loader and glslangValidator. Writes gpu-bundle/ (ignored by git); the device
# tool carries it with `carry: ["gpu-bundle"]`.
# Usage: bash scripts/gpu-bundle.sh   (after a release build in build/)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=$root/gpu-bundle
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
for tool in build/tools/cubecc build/test/cubecc_e2e_tests build/bench/vulkan_vs_glsl \
            "$(command -v glslangValidator)"; do
  cp "$root/$tool" "$bundle/bin/" 2>/dev/null || cp "$tool" "$bundle/bin/"
done
strip "$bundle"/bin/*
for lib in libfmt.so.9 libxxhash.so.0 libspirv-cross-c-shared.so.0 libvulkan.so.1 libstdc++.so.6; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" "$bundle/lib/"
done
du -sh "$bundle"
