#!/usr/bin/env bash
# run-bundle-fuzzer.sh FUZZER SEEDS REPO WORK_DIR RUNS: fuzzes the bundle reader for exactly RUNS
# executions from small valid bundles (SEEDS writes them). Fails on any finding. Reproducible as
# run-fuzzer.sh is: fresh folders, seeds written the same way every time, a fixed random seed
# (CUBECC_FUZZ_SEED, default 1), no timed corpus reload, no address space randomization, and a
# number of executions rather than a time.
set -eu
fuzzer=$1 seeds=$2 repo=$3 work=$4 runs=$5
rm -rf "$work"
mkdir -p "$work/seeds" "$work/corpus" "$work/findings"
"$seeds" "$work/seeds" "$repo/examples/ir/axpy.cir"
echo "run-bundle-fuzzer.sh: $(ls "$work/seeds" | wc -l) seed bundles, $runs runs, seed ${CUBECC_FUZZ_SEED:-1}"
norandom=(setarch -R)
if ! setarch -R true 2>/dev/null; then
  echo "$(basename "$0"): setarch -R is not permitted here: address space randomization stays on"
  norandom=()
fi
exec "${norandom[@]}" "$fuzzer" "$work/corpus" "$work/seeds" -artifact_prefix="$work/findings/" \
  -seed="${CUBECC_FUZZ_SEED:-1}" -runs="$runs" -max_len=16384 -timeout=10 -rss_limit_mb=2048 -reload=0 \
  -print_final_stats=1
