#!/usr/bin/env python3
"""check-op-coverage.py REPO: every op of ir/include/cubecc/ir/ops.def appears, as an op, in a
CHECK line of some lit test under test/lit/ir (so each op's printed form is pinned by a golden
test that also round-trips it)."""
import pathlib
import re
import sys

repo = pathlib.Path(sys.argv[1])
table = (repo / "ir/include/cubecc/ir/ops.def").read_text()
ops = re.findall(r'^CUBECC_OP\(\w+, "([^"]+)"', table, re.M)
if len(ops) < 50:
    sys.exit(f"found only {len(ops)} ops in ops.def: the table format changed?")

checked = set()
op_pattern = re.compile(r"^\s*(?:%[\w.]+(?:, %[\w.]+)* = )?([a-z_][\w.]*)")
for path in (repo / "test/lit/ir").glob("*.cir"):
    text = path.read_text()
    if "RUN: %cubecc-opt %s | %cubecc-opt - | FileCheck" not in text:
        continue  # only files that also check the round trip count
    for line in text.splitlines():
        m = re.match(r"\s*// CHECK(?:-NEXT|-SAME)?:(.*)", line)
        if not m:
            continue
        op = op_pattern.match(m.group(1))
        if op:
            checked.add(op.group(1))

missing = [op for op in ops if op not in checked]
for op in missing:
    print(f"no lit round-trip test checks op '{op}' (add one under test/lit/ir)")
print(f"{len(ops) - len(missing)} of {len(ops)} ops have a lit round-trip test")
sys.exit(1 if missing else 0)
