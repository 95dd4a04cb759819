#!/usr/bin/env bash
# run-bundle-fuzzer.sh FUZZER SEEDS REPO CORPUS_DIR SECONDS: seeds CORPUS_DIR with small valid
# bundles (SEEDS writes them), then fuzzes the bundle reader for SECONDS with a fixed seed
# (CUBECC_FUZZ_SEED, default 1). Fails on any finding.
set -eu
fuzzer=$1 seeds=$2 repo=$3 corpus=$4 seconds=$5
mkdir -p "$corpus" "$corpus.findings"
"$seeds" "$corpus" "$repo/examples/ir/axpy.cir"
exec "$fuzzer" "$corpus" -artifact_prefix="$corpus.findings/" -seed="${CUBECC_FUZZ_SEED:-1}" \
  -max_total_time="$seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
