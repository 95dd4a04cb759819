#!/usr/bin/env bash
# The e2e suite on interp and vulkan with every kernel from an environment bundle:
#   1. run the suite once, writing every kernel a device compiles to <work>/kernels/<device>/;
#   2. `cubecc env build` a bundle per device from them (-O0: the suite runs kernels as given),
#      `cubecc env merge` the two, `cubecc env verify` the result;
#   3. run the suite again with CUBECC_ENV set: the suite checks at its end that no kernel was
#      JIT-compiled (and that the environment answered).
# usage: e2e-with-environment.sh <cubecc_e2e_tests> <cubecc> <work dir>
set -euo pipefail
tests=$1 cubecc=$2 work=$3
filter='-*cuda*:*hip*:*Cuda*:*Hip*'
rm -rf "$work"
mkdir -p "$work"
echo "== 1. the suite, collecting the kernels it compiles"
CUBECC_E2E_COLLECT="$work/kernels" "$tests" --gtest_filter="$filter" --gtest_brief=1
for device in interp vulkan; do
  n=$(ls "$work/kernels/$device" | wc -l)
  echo "== 2. $n kernels for $device"
  "$cubecc" env build "$work/kernels/$device"/*.cir --target "$device" -O0 -o "$work/$device.cubeenv"
done
"$cubecc" env merge "$work/interp.cubeenv" "$work/vulkan.cubeenv" -o "$work/e2e.cubeenv"
"$cubecc" env verify "$work/e2e.cubeenv"
echo "== 3. the suite with the bundle"
CUBECC_ENV="$work/e2e.cubeenv" "$tests" --gtest_filter="$filter" --gtest_brief=1
