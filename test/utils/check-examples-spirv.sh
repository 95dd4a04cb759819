#!/usr/bin/env bash
# Every example DSL source compiles with `cubecc compile <file>.cpp --target vulkan --emit spirv`
# (built by the host compiler into a kernel library, traced, optimized, written) into modules that
# the standalone spirv-val accepts for Vulkan 1.2.
# Usage: check-examples-spirv.sh <cubecc> <repository root>
set -euo pipefail
cubecc=$1
root=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
count=0
for source in "$root"/examples/kernels/*.cpp; do
  name=$(basename "$source" .cpp)
  if ! "$cubecc" compile "$source" --target vulkan --emit spirv -o "$out/$name/"; then
    echo "FAIL: cubecc compile $source" >&2
    status=1
    continue
  fi
  for module in "$out/$name"/*.spv; do
    if spirv-val --target-env vulkan1.2 "$module"; then
      count=$((count + 1))
    else
      echo "FAIL: spirv-val $module (from $source)" >&2
      status=1
    fi
  done
done
echo "$count SPIR-V modules from $(ls "$root"/examples/kernels/*.cpp | wc -l) example sources pass spirv-val"
[ "$count" -gt 0 ] || status=1
exit $status
