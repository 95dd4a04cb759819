#!/usr/bin/env bash
# The main job, as far as the pipeline exists today:
#   1. trace every kernel of the example kernel library (examples/kernels/*.cpp, built as
#      build/examples/libcubecc_examples.so) through its C ABI, verify it, and print its
#      structural hash (its identity in caches and environment bundles);
#   2. write all traced kernels as IR text, and check that the text round-trips exactly
#      (parse, print, parse, print) for them and for the hand-written IR in examples/ir/.
#   3. optimize every traced kernel with -O3 (verified after each pass) and count its ops.
# Code generation (CUDA, HIP, SPIR-V), environments and running kernels join as they land.
set -euo pipefail
cd "$(dirname "$0")/.."
cubecc=build/tools/cubecc
opt=build/tools/cubecc-opt
library=build/examples/libcubecc_examples.so
for f in "$cubecc" "$opt" "$library"; do
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
echo "demo: every example kernel traced, verified and round-tripped exactly"
