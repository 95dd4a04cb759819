#!/usr/bin/env bash
# run-fuzzer.sh FUZZER REPO WORK_DIR RUNS: runs a fuzzer of IR text (the parser's, the passes')
# for exactly RUNS executions from a seed corpus of every .cir file of the repository (and a
# dictionary of the IR's keywords). Fails on any finding.
#
# A run is reproducible: the seed corpus is copied into a fresh folder under names that sort the
# same on every machine, the new inputs go to another fresh folder, the random seed is fixed
# (CUBECC_FUZZ_SEED, default 1), the corpus folder is not reloaded on a timer (-reload=0), address
# space randomization is off (setarch -R: code that hashes pointers takes the same branches every
# run, so coverage and with it the mutations are the same) and the length of the run is a number
# of executions, not a time. The same build explores the same inputs on a fast or a busy machine:
# the suite must not pass or fail by chance. Long runs (-runs=10000000) are for finding bugs; docs/testing.md lists them.
set -eu
fuzzer=$1
repo=$2
work=$3
runs=$4
rm -rf "$work"
mkdir -p "$work/seeds" "$work/corpus" "$work/findings"
# Each seed is named by its path in the repository, so that the order does not depend on find.
(cd "$repo" && find . -name '*.cir' -not -path './build*' -not -path './.git/*' | LC_ALL=C sort) |
  while read -r path; do
    name=${path#./}
    cp "$repo/$name" "$work/seeds/${name//\//__}"
  done
echo "run-fuzzer.sh: $(ls "$work/seeds" | wc -l) seed files, $runs runs, seed ${CUBECC_FUZZ_SEED:-1}"
norandom=(setarch -R)
if ! setarch -R true 2>/dev/null; then
  echo "$(basename "$0"): setarch -R is not permitted here: address space randomization stays on"
  norandom=()
fi
exec "${norandom[@]}" "$fuzzer" "$work/corpus" "$work/seeds" -dict="$(dirname "$0")/cir.dict" \
  -artifact_prefix="$work/findings/" -seed="${CUBECC_FUZZ_SEED:-1}" -runs="$runs" -max_len=4096 \
  -timeout=10 -rss_limit_mb=2048 -reload=0 -print_final_stats=1
