#!/usr/bin/env bash
# The main job, as far as the pipeline exists today:
#   1. trace every kernel of the example kernel library (examples/kernels/*.cpp, built as
#      build/examples/libcubecc_examples.so) through its C ABI, verify it, and print its
#      structural hash (its identity in caches and environment bundles);
#   2. write all traced kernels as IR text, and check that the text round-trips exactly
#      (parse, print, parse, print) for them and for the hand-written IR in examples/ir/.
#   3. optimize every traced kernel with -O3 (verified after each pass) and count its ops;
#   4. compile every example kernel for the vulkan target (SPIR-V, validated in process and again
#      by the standalone spirv-val) and show one as GLSL through SPIRV-Cross;
#   5. compile them for CUDA (PTX, CUBIN for sm_90 through NVRTC), HIP (gfx90a through hipRTC)
#      and the CPU (native SIMD code through LLVM, one shared object per kernel and x86-64 level);
#   5b. the tensor-core GEMM library (examples/tensor_cores, build/examples/libcubecc_gemm.so):
#      a bundle for cuda:sm_80, cuda:sm_90, hip:gfx90a, vulkan:nvidia and interp (each target with
#      the variants it runs, --skip-unsupported), verified, its mma.sync and ldmatrix instructions
#      counted in one variant's PTX and its cooperative-matrix products in one variant's SPIR-V;
#   6. build an environment bundle of every example kernel for cuda:sm_80, cuda:sm_90, hip:gfx90a,
#      vulkan, interp and cpu:x86-64-v2..v4 (no GPU needed), tune the matmul variants on the
#      default device, merge the two, sign the bundle with a new Ed25519 key, inspect it and
#      verify it against the public key;
#   7. list the devices, and run example kernels on the default one (CUBECC_DEVICE, or the best
#      present: a GPU, else the cpu device) through the runtime, checked against the host: once
#      compiling them (JIT, with an empty per-user object cache), once loading them from the
#      signed bundle (CUBECC_ENV: no compilation; CUBECC_TRUSTED_KEYS: signed bundles only);
#      the last one is a captured graph of launches, replayed;
#   8. a table of the kernels run: result check, time to the first result with JIT and with the
#      bundle.
set -euo pipefail
cd "$(dirname "$0")/.."
cubecc=build/tools/cubecc
opt=build/tools/cubecc-opt
library=build/examples/libcubecc_examples.so
gemm_library=build/examples/libcubecc_gemm.so
runner=build/examples/run_examples
for f in "$cubecc" "$opt" "$library" "$gemm_library" "$runner"; do
  [ -e "$f" ] || { echo "demo: $f is missing: run 'bash scripts/setup.sh' first" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== kernels traced from $library (DSL -> IR, verified) =="
printf '%-22s %-28s %s\n' "kernel" "configuration" "structural hash"
"$cubecc" kernels "$library" --hash | while read -r name config hash; do
  printf '%-22s %-28s %s\n' "$name" "$config" "$hash"
done

echo
echo "== IR text round trip =="
"$cubecc" compile "$library" --emit ir -o "$tmp/traced.cir"
failures=0
for f in "$tmp/traced.cir" examples/ir/*.cir; do
  "$opt" "$f" >"$tmp/once"
  "$opt" - <"$tmp/once" >"$tmp/twice"
  kernels=$(grep -c '^  kernel @' "$tmp/once")
  name=$f
  [ "$f" = "$tmp/traced.cir" ] && name="(all traced example kernels)"
  if cmp -s "$tmp/once" "$tmp/twice"; then
    printf '%-40s %3d kernel(s)  round trip exact\n' "$name" "$kernels"
  else
    printf '%-40s %3d kernel(s)  round trip DIFFERS\n' "$name" "$kernels"
    failures=$((failures + 1))
  fi
done

echo
echo "== -O3 (canonicalize, simplify-cf, unroll, cse, licm, vectorize, strength-reduce, dce), verified after each pass =="
printf '%-22s %8s %8s\n' "kernel" "ops" "ops -O3"
count_ops() { grep -cE '^ {4,}(%|[a-z])' "$1" || true; }
"$cubecc" kernels "$library" | while read -r name _; do
  "$cubecc" compile "$library" --emit ir --kernel "$name" -o "$tmp/k.cir"
  "$opt" "$tmp/k.cir" -O3 --verify-each -o "$tmp/k.opt.cir"
  printf '%-22s %8d %8d\n' "$name" "$(count_ops "$tmp/k.cir")" "$(count_ops "$tmp/k.opt.cir")"
done

echo
echo "== the traced IR of the axpy example (examples/kernels/axpy.cpp) =="
"$cubecc" compile "$library" --emit ir --kernel axpy
[ "$failures" -eq 0 ] || { echo "demo: $failures file(s) did not round-trip" >&2; exit 1; }

echo
echo "== SPIR-V for the vulkan target (-O2; validated by cubecc, then by spirv-val) =="
"$cubecc" compile "$library" --target vulkan --emit spirv -o "$tmp/spirv/"
printf '%-22s %8s  %s\n' "kernel" "bytes" "spirv-val --target-env vulkan1.2"
for module in "$tmp"/spirv/*.spv; do
  spirv-val --target-env vulkan1.2 "$module"
  printf '%-22s %8d  valid\n' "$(basename "$module" .spv)" "$(stat -c %s "$module")"
done
echo
echo "== the axpy kernel as GLSL (SPIR-V -> SPIRV-Cross) =="
"$cubecc" compile "$library" --kernel axpy --target vulkan --emit glsl | sed -n '/^void main/,$p'

echo
echo "== CUDA and HIP: PTX and CUBIN through NVRTC, code objects through hipRTC (no GPU needed) =="
echo "   and the CPU: SIMD code through LLVM (one shared object per kernel, AVX2 for x86-64-v3)"
printf '%-22s %10s %10s %10s %10s\n' "kernel" "ptx B" "sm_90 B" "gfx90a B" "cpu v3 B"
"$cubecc" compile "$library" --target cuda:sm_90 --emit ptx -o "$tmp/ptx/"
"$cubecc" compile "$library" --target cuda:sm_90 --emit cubin -o "$tmp/cubin/"
"$cubecc" compile "$library" --target hip:gfx90a --emit hsaco -o "$tmp/hsaco/"
"$cubecc" compile "$library" --target cpu:x86-64-v3 --emit elf -o "$tmp/cpu/"
for module in "$tmp"/ptx/*.ptx; do
  name=$(basename "$module" .ptx)
  printf '%-22s %10d %10d %10d %10d\n' "$name" "$(stat -c %s "$module")" \
    "$(stat -c %s "$tmp/cubin/$name.cubin")" "$(stat -c %s "$tmp/hsaco/$name.hsaco")" \
    "$(stat -c %s "$tmp/cpu/$name.so")"
done
echo "-- the inner loop of axpy for x86-64-v3 (8 f32 lanes per subgroup):"
"$cubecc" compile "$library" --kernel axpy --target cpu:x86-64-v3 --emit asm |
  grep -m 6 -E 'vfmadd|vmovups|vmaskmov' || true

echo
echo "== tensor cores: the GEMM library (examples/tensor_cores) for sm_80, sm_90, gfx90a and Vulkan =="
echo "   (mma.sync and ldmatrix on NVIDIA, MFMA on AMD, VK_NV_cooperative_matrix for NVIDIA GPUs"
echo "   under Vulkan; lavapipe and the CPU have no matrix ops)"
"$cubecc" kernels "$gemm_library" | head -3
# The library's variants assume NVIDIA's 32-wide warps (subgroup_size = 32), except two made for
# AMD's 64-wide wavefronts, the fp8 ones need sm_89, and SPIR-V has f16 cooperative matrices only:
# with --skip-unsupported each target gets the variants it runs.
"$cubecc" env build "$gemm_library" --target cuda:sm_80,cuda:sm_90,hip:gfx90a,vulkan:nvidia,interp \
  --skip-unsupported -o "$tmp/gemm.cubeenv" 2> "$tmp/gemm-build.txt"
tail -1 "$tmp/gemm-build.txt"
echo "-- $(grep -c 'left out of' "$tmp/gemm-build.txt") (kernel, target) pairs left out: each" \
  "vendor's variants are refused by the other's subgroup size, the fp8 ones by sm_80, the bf16" \
  "and fp8 ones by vulkan:nvidia"
"$cubecc" env verify "$tmp/gemm.cubeenv"
"$cubecc" compile "$gemm_library" --kernel gemm_bf16_128x128x32_w64x64_s2_v8 --target cuda:sm_90 \
  --emit ptx -o "$tmp/gemm.ptx"
echo "-- gemm_bf16_128x128x32_w64x64_s2_v8 for sm_90: $(grep -c 'mma.sync' "$tmp/gemm.ptx") mma.sync" \
  "and $(grep -c 'ldmatrix' "$tmp/gemm.ptx") ldmatrix per K step of 32"
"$cubecc" compile "$gemm_library" --kernel gemm_bf16_64x64x32_w32x32_s4_v8 --target cuda:sm_90 \
  --emit ptx -o "$tmp/gemm-pipelined.ptx"
echo "-- gemm_bf16_64x64x32_w32x32_s4_v8 (a 4-stage pipeline): tiles filled by" \
  "$(grep -c 'cp.async.cg' "$tmp/gemm-pipelined.ptx") cp.async of 16 bytes (3 tiles ahead, then" \
  "one per K step), $(grep -c 'cp.async.wait_group' "$tmp/gemm-pipelined.ptx") cp.async.wait_group"
"$cubecc" compile "$gemm_library" --kernel gemm_f16_64x64x32_w32x32_s4_v8 --target vulkan:nvidia \
  --emit spirv-asm -o "$tmp/gemm.spvasm"
echo "-- gemm_f16_64x64x32_w32x32_s4_v8 for vulkan:nvidia (validated by spirv-val):" \
  "$(grep -c 'OpCooperativeMatrixMulAddNV' "$tmp/gemm.spvasm") OpCooperativeMatrixMulAddNV," \
  "$(grep -c 'OpCooperativeMatrixLoadNV' "$tmp/gemm.spvasm") OpCooperativeMatrixLoadNV per K step"

echo
echo "== an environment bundle: every example kernel for every target, tuning records, merged =="
"$cubecc" env build "$library" \
  --target cuda:sm_80,cuda:sm_90,hip:gfx90a,vulkan,interp,cpu:x86-64-v2,cpu:x86-64-v3,cpu:x86-64-v4 \
  -o "$tmp/kernels.cubeenv"
"$cubecc" tune "$library" -o "$tmp/tuning.cubeenv"
"$cubecc" env merge "$tmp/kernels.cubeenv" "$tmp/tuning.cubeenv" -o "$tmp/app.cubeenv"
"$cubecc" env keygen -o "$tmp/ci"
"$cubecc" env sign "$tmp/app.cubeenv" --key "$tmp/ci.key"
"$cubecc" env inspect "$tmp/app.cubeenv"
"$cubecc" env verify "$tmp/app.cubeenv" --key "$tmp/ci.pub"

echo
echo "== devices =="
"$cubecc" devices
echo
echo "== example kernels on the default device, through the runtime, checked against the host =="
echo "-- compiled at the first launch (JIT):"
# The cpu device keeps compiled objects in a per-user cache: an empty one makes the JIT column
# a real compile.
export CUBECC_CACHE_DIR="$tmp/cache"
"$runner" --summary "$tmp/jit.tsv"
echo "-- loaded from the signed environment bundle (CUBECC_ENV, CUBECC_TRUSTED_KEYS): nothing compiled"
CUBECC_ENV="$tmp/app.cubeenv" CUBECC_TRUSTED_KEYS="$tmp/ci.pub" "$runner" --summary "$tmp/env.tsv" |
  tee "$tmp/run.txt"
grep -q ', 0 compiles$' "$tmp/run.txt" || { echo "demo: kernels were compiled despite the bundle" >&2; exit 1; }

echo
echo "== the same signed bundle from Python: the cubecc package (python/, docs/python.md) =="
bash scripts/python-env.sh build/python-venv
build/python-venv/bin/pip install -q --disable-pip-version-check ./python
build/python-venv/bin/python python/examples/run_from_bundle.py "$tmp/app.cubeenv" "$library" "$tmp/ci.pub"

echo
echo "== summary: time to each kernel's first result on the $(head -1 "$tmp/run.txt" | sed 's/^device: //') =="
echo "   (host ms from asking for the kernel to its output downloaded: JIT traces, optimizes and"
echo "    compiles it; env loads it from the bundle; both then run it once and check the result)"
printf '%-18s %-8s %10s %10s\n' "kernel" "check" "JIT ms" "env ms"
join -t $'\t' "$tmp/jit.tsv" "$tmp/env.tsv" | while IFS=$'\t' read -r name check jit _ env; do
  printf '%-18s %-8s %10s %10s\n' "$name" "$check" "$jit" "$env"
done
if grep -qv $'\tok\t' "$tmp/jit.tsv" "$tmp/env.tsv"; then
  echo "demo: a kernel gave a wrong result" >&2
  exit 1
fi
echo "demo: every example kernel traced, verified, round-tripped, compiled to SPIR-V, PTX, CUBIN, a HIP code object and native CPU code, bundled with tuning records, signed, and run with and without the bundle, from C++ and from Python"
