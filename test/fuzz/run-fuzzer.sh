#!/usr/bin/env bash
# run-fuzzer.sh FUZZER REPO CORPUS_DIR SECONDS: seeds CORPUS_DIR with every .cir file of the
# repository (and a dictionary of the IR's keywords), then fuzzes for SECONDS. Fails on any finding.
# The seed is fixed (CUBECC_FUZZ_SEED, default 1) so that a run is reproducible: the suite must not
# pass or fail by chance. Longer or other-seed runs are for finding bugs, not for the suite.
set -eu
fuzzer=$1
repo=$2
corpus=$3
seconds=$4
mkdir -p "$corpus"
find "$repo" -name '*.cir' -not -path '*/build*' -exec cp {} "$corpus/" \;
dict=$(dirname "$0")/cir.dict
mkdir -p "$corpus.findings"
exec "$fuzzer" "$corpus" -dict="$dict" -artifact_prefix="$corpus.findings/" \
  -seed="${CUBECC_FUZZ_SEED:-1}" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1
