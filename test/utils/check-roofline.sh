#!/usr/bin/env bash
# check-roofline.sh GPU_ROOFLINE ROOFLINE_SVG_PY
#
# bench/gpu_roofline without a GPU: (1) --smoke on the interpreter must run every bandwidth
# kernel and the GEMM shapes, check them (exit 0: "all results correct"), and write JSON whose
# rows scripts/roofline-svg.py draws (one bar per bandwidth kernel, one label per GEMM row);
# (2) on the default cuda device, absent here, it must say "skipped" and exit 0.
set -euo pipefail
bench=$1
svg=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/cubecc-roofline.XXXXXX")
trap 'rm -rf "$work"' EXIT

# 48 KiB of shared memory, as a CUDA kernel's static limit, so that every variant runs (the
# interpreter's default is 32 KiB).
CUBECC_INTERP_SHARED_BYTES=49152 "$bench" --device interp --smoke --reps 1 \
  --json "$work/smoke.json" > "$work/smoke.txt"
if grep -q "not run" "$work/smoke.txt"; then
  cat "$work/smoke.txt" >&2
  exit 1
fi
grep -q "all results correct" "$work/smoke.txt"
python3 "$svg" "$work/smoke.json" > "$work/smoke.svg"
python3 - "$work/smoke.json" "$work/smoke.svg" <<'PY'
import json, sys, xml.dom.minidom
data = json.load(open(sys.argv[1]))
rows = data["rows"]
bandwidth = [r for r in rows if r["kind"] == "bandwidth"]
gemm = [r for r in rows if r["kind"] == "gemm"]
assert [r["kernel"] for r in bandwidth] == ["copy_v4", "axpy_w4", "reduce_sum", "reduce_sum_w4", "softmax", "softmax_w4"], rows
assert len(gemm) == 6 and all(r["correct"] and r["variant"].startswith(r["kernel"]) for r in gemm), gemm
assert [r["kernel"] for r in gemm] == ["gemm_bf16"] * 2 + ["gemm_f16"] * 2 + ["gemm_e4m3"] * 2, gemm
svg = xml.dom.minidom.parse(sys.argv[2])
assert len(svg.getElementsByTagName("rect")) == len(bandwidth)
labels = [t for t in svg.getElementsByTagName("text") if "x" in t.firstChild.data and "gemm" in t.firstChild.data]
assert len(labels) == len(gemm), len(labels)
PY

# No GPU here: the default device is cuda, which cannot open.
if "$bench" --device cuda --json "$work/cuda.json" > "$work/cuda.txt"; then
  if grep -q "skipped" "$work/cuda.txt"; then
    # To a file first: grep -q would close the pipe at its match, and pipefail would count the
    # writer's broken pipe as a failure.
    python3 "$svg" "$work/cuda.json" > "$work/cuda.svg"
    grep -q "was skipped" "$work/cuda.svg"
  else
    echo "check-roofline: a CUDA device is present; the smoke run above is the check here"
  fi
else
  echo "check-roofline: gpu_roofline --device cuda failed without a GPU" >&2
  exit 1
fi
echo "check-roofline: ok"
