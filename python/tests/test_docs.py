"""docs/python.md runs as a notebook: its ```python cells in order, in one namespace, each ```text
block right after a cell being that cell's printed output (line by line; `...` inside a line
matches any text, a line that is only `...` any number of lines). The cells run in a scratch
directory where `build` is the cubecc tree under test, as the docs' console examples do."""

import contextlib
import io
import os
import re

from conftest import BUILD_DIR, REPOSITORY

DOC = REPOSITORY / "docs" / "python.md"


def cells(text):
    """(code, expected output or None) for each ```python block."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = re.match(r"^```(\w*)", lines[i])
        if not m:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        blocks.append((m.group(1), "\n".join(lines[i + 1:end]), i + 1))
        i = end + 1
    out = []
    for k, (tag, body, line) in enumerate(blocks):
        if tag == "python":
            expected = blocks[k + 1][1] if k + 1 < len(blocks) and blocks[k + 1][0] == "text" else None
            out.append((body, expected, line))
    return out


def matches(expected, got):
    want, have = expected.splitlines(), got.rstrip("\n").splitlines()
    pattern = "".join(
        r"(?:.*\n)*?" if w.strip() == "..." else ".*".join(map(re.escape, w.split("..."))) + r"\n"
        for w in want)
    return re.fullmatch(pattern, "\n".join(have) + "\n") is not None


def test_the_python_guide_runs_as_written(tmp_path, monkeypatch):
    os.symlink(BUILD_DIR, tmp_path / "build")
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__doc__"}
    found = cells(DOC.read_text())
    assert len(found) >= 5, f"{DOC} should hold the notebook's cells"
    for code, expected, line in found:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"{DOC}:{line}", "exec"), namespace)
        if expected is not None:
            assert matches(expected, printed.getvalue()), (
                f"{DOC}:{line}: the cell printed\n{printed.getvalue()}\nthe guide shows\n{expected}")
