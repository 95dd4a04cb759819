#!/usr/bin/env bash
# The e2e suite on interp, vulkan and cpu with every kernel from an environment bundle:
#   1. the kernels: those the e2e tests of this ctest run wrote to <work>/kernels/<device>/
#      (CUBECC_E2E_COLLECT; they are this test's fixture), or, run alone, one run of the suite
#      collecting them;
#   2. `cubecc env build` a bundle per device from them (-O0: the suite runs kernels as given; for
#      vulkan, the SPIR-V of the targets vulkan:nvidia and vulkan),
#      `cubecc env merge` them, `cubecc env verify` and `cubecc env inspect` the result (each
#      exits 1 on a damaged entry), and rename it into place, as a deployment does;
#   3. the suite again with CUBECC_ENV set: it checks at its end that no kernel was JIT-compiled
#      and that the environment answered.
# usage: e2e-with-environment.sh <cubecc_e2e_tests> <cubecc> <work dir> [build | run K N]
#   build: steps 1 and 2 only; run K N: step 3 only, the K-th of N shards of the suite (gtest's
#   sharding: ctest runs the shards side by side with the other tests). Neither: all three steps.
# cpu bundles are built for cpu:native, the level the cpu device of this machine runs; a build
# without the LLVM backend skips the cpu tests, so there are no cpu kernels and no cpu bundle.
set -euo pipefail
tests=$1 cubecc=$2 work=$3 mode=${4:-all}
filter='-*cuda*:*hip*:*Cuda*:*Hip*'
if [ "$mode" = run ]; then
  echo "== 3. the suite with the bundle, shard $5 of $6"
  CUBECC_ENV="$work/e2e.cubeenv" GTEST_SHARD_INDEX=$5 GTEST_TOTAL_SHARDS=$6 \
    "$tests" --gtest_filter="$filter" --gtest_brief=1
  exit
fi
mkdir -p "$work"
rm -f "$work"/*.cubeenv
if [ -d "$work/kernels/interp" ] && [ -d "$work/kernels/vulkan" ]; then
  echo "== 1. the kernels the e2e tests compiled"
else
  echo "== 1. the suite, collecting the kernels it compiles"
  CUBECC_E2E_COLLECT="$work/kernels" "$tests" --gtest_filter="$filter" --gtest_brief=1
fi
bundles=()
for device in interp vulkan cpu; do
  if [ "$device" = cpu ] && [ ! -d "$work/kernels/cpu" ]; then
    echo "== 2. no kernels for cpu (its tests were skipped: no LLVM backend)"
    continue
  fi
  echo "== 2. $(ls "$work/kernels/$device" | wc -l) kernels for $device"
  target=$device skip=()
  [ "$device" = cpu ] && target=cpu:native
  # vulkan:nvidia's SPIR-V first: lavapipe takes it wherever it relies on nothing lavapipe lacks
  # (on a tie the first binary wins), the baseline's elsewhere, so the suite checks that what the
  # writer records is all the code depends on (docs/environments.md).
  [ "$device" = vulkan ] && target=vulkan:nvidia,vulkan skip=(--skip-unsupported)
  "$cubecc" env build "$work/kernels/$device"/*.cir --target "$target" "${skip[@]}" -O0 \
    -o "$work/$device.cubeenv"
  bundles+=("$work/$device.cubeenv")
done
"$cubecc" env merge "${bundles[@]}" -o "$work/e2e.cubeenv.new"
"$cubecc" env verify "$work/e2e.cubeenv.new"
"$cubecc" env inspect "$work/e2e.cubeenv.new" > "$work/e2e-inspect.txt"
mv "$work/e2e.cubeenv.new" "$work/e2e.cubeenv"
[ "$mode" = build ] && exit 0
echo "== 3. the suite with the bundle"
CUBECC_ENV="$work/e2e.cubeenv" "$tests" --gtest_filter="$filter" --gtest_brief=1
