#!/usr/bin/env python3
"""ir-op-index.py [--check | --write] REPO: the op index of docs/ir.md, generated from the one op
table (ir/include/cubecc/ir/ops.def), so the IR reference cannot drift from the IR.

The index (between the `<!-- op index ... -->` markers of docs/ir.md) lists every op of ops.def
with its signature, type class, flags and the section of docs/ir.md that describes it. --check
(the ctest docs_ir_op_index_matches_ops_def) fails when
  - the index in docs/ir.md differs from what ops.def gives (run with --write to regenerate),
  - an op of ops.def has no row in a table of section 4 of docs/ir.md (its semantics), or
  - a table row of section 4 names an op that ops.def does not have.
"""
import pathlib
import re
import sys

BEGIN = "<!-- op index: generated from ops.def by test/utils/ir-op-index.py --write; do not edit -->"
END = "<!-- end of op index -->"
ROW = re.compile(r"^\| `([a-z_][a-z0-9_.]*)` \|")


def table_ops(ops_def):
    rows = re.findall(r'^CUBECC_OP\((\w+), "([^"]+)", (\w+), (\w+), ([^)]+)\)', ops_def, re.M)
    if len(rows) < 50:
        sys.exit(f"found only {len(rows)} ops in ops.def: the table format changed?")
    return [(name, signature, type_class, " ".join(f.strip() for f in flags.split("|")))
            for _, name, signature, type_class, flags in rows]


def documented_ops(ir_md):
    """{op: (section number, section title)} from the tables of section 4."""
    found, section, generated = {}, None, False
    for line in ir_md.splitlines():
        if line in (BEGIN, END):
            generated = line == BEGIN
            continue
        if generated:
            continue
        heading = re.match(r"^### (4\.\d+) (.*)$", line)
        if heading:
            section = heading.groups()
            continue
        if re.match(r"^## ", line) and not line.startswith("## 4."):
            section = None
        if section and (row := ROW.match(line)):
            found.setdefault(row.group(1), section)
    return found


def anchor(number, title):
    text = f"{number} {title}".lower()
    text = re.sub(r"[^a-z0-9 -]", "", text)
    return "#" + text.replace(" ", "-")


def render(ops, documented):
    lines = [BEGIN, "", "| op | signature | type class | flags | described in |",
             "|---|---|---|---|---|"]
    for name, signature, type_class, flags in ops:
        where = documented.get(name)
        link = f"[§{where[0]}]({anchor(*where)})" if where else "—"
        lines.append(f"| `{name}` | {signature} | {type_class} | {flags} | {link} |")
    lines += ["", f"{len(ops)} ops.", "", END]
    return "\n".join(lines)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("--check", "--write"):
        sys.exit(__doc__)
    repo = pathlib.Path(sys.argv[2])
    ops = table_ops((repo / "ir/include/cubecc/ir/ops.def").read_text())
    doc_path = repo / "docs/ir.md"
    doc = doc_path.read_text()
    if BEGIN not in doc or END not in doc:
        sys.exit(f"{doc_path}: the op index markers are missing")
    documented = documented_ops(doc)
    index = render(ops, documented)
    start, end = doc.index(BEGIN), doc.index(END) + len(END)
    problems = []
    names = {name for name, *_ in ops}
    for name, *_ in ops:
        if name not in documented:
            problems.append(f"docs/ir.md: op '{name}' of ops.def has no row in a section 4 table")
    for name, (number, _) in sorted(documented.items()):
        if name not in names:
            problems.append(f"docs/ir.md §{number}: '{name}' is not an op of ops.def")
    if sys.argv[1] == "--write":
        doc_path.write_text(doc[:start] + index + doc[end:])
    elif doc[start:end] != index:
        problems.append("docs/ir.md: the op index differs from ops.def; regenerate it with "
                        "python3 test/utils/ir-op-index.py --write .")
    for p in problems:
        print(p)
    print(f"{len(ops)} ops in ops.def, {len(documented)} described in docs/ir.md, "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
