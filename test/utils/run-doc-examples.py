#!/usr/bin/env python3
"""run-doc-examples.py: run every example command of the documentation, so the docs cannot drift
from the tools.

    run-doc-examples.py --source-dir REPO --build-dir BUILD [--list] [FILE.md ...]
    run-doc-examples.py --source-dir REPO --build-dir BUILD --check-cli

Without FILE arguments it reads README.md and every docs/*.md. The conventions (also in
docs/cli.md, "How the examples are tested"):

- A fenced block tagged ```console holds commands and their output. A line starting with `$ ` is
  a command; a trailing `\\` continues it on the next line. Every other non-empty line is shown
  output: each must match a line of the command's output (stdout and stderr together), in order,
  gaps allowed, runs of white space compared as one space; `...` inside a line matches any text,
  and a line that is only `...` says lines were left out.
- A command that must fail says so: a trailing `# exits N` (N = 1, 2 or 3, the command-line
  contract's codes). Without it the command must exit 0. Another `# exit...`-like comment is an
  unknown annotation and fails the test; other comments are free text.
- A block tagged ```console-gpu holds commands that need a GPU (absent on CI machines): they are
  listed as skipped, with a count, and never run.
- A block with `file=NAME` in its info string (```cpp file=tour.cpp) is written to NAME in the
  scratch directory when it is reached (the first block of that name creates the file, later
  blocks of the same name append to it), so a command further down can compile it.
- Commands of one file run in order, each in its own `bash -c`, in a fresh scratch directory per
  file where `build` links to the build tree under test, `examples` to the repository's
  examples/, and `docs` to its docs/; the build's tools/ directory comes first on PATH.
- A block of a docs/*.md file that is not tagged console (untagged, sh, bash, shell) but holds a
  line running `cubecc` or `cubecc-opt` is an error: an example command the test would not run.

--check-cli: every cubecc subcommand and cubecc-opt is documented in docs/cli.md, and
`<command> --help` exits 0 and prints an "Example" section.
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

COMMAND_TIMEOUT_S = 300
FENCE = re.compile(r"^(`{3,})(.*)$")
ANNOTATION = re.compile(r"\s#\s*(exits?|status|returns|fails)\b(.*)$")
EXITS = re.compile(r"^\s+([0-3])\s*$")
TOOL_LINE = re.compile(r"^\s*(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:\S*/)?"
                       r"(cubecc\s+(compile|kernels|env|tune|devices|-)|cubecc-opt(\s|$))")


class Failure(Exception):
    pass


class Block:
    def __init__(self, path, line, fence, info):
        self.path, self.line, self.fence = path, line, fence
        words = info.split()
        self.tag = words[0] if words else ""
        self.attributes = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        self.lines = []  # (line number, text)


def read_blocks(path, shown):
    """The fenced blocks of `path`; messages name it as `shown`."""
    blocks, block = [], None
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fence = FENCE.match(text)
        if block is None:
            if fence:
                block = Block(shown, number, fence.group(1), fence.group(2).strip())
        elif fence and fence.group(1) == block.fence and not fence.group(2).strip():
            blocks.append(block)
            block = None
        else:
            block.lines.append((number, text))
    if block is not None:
        raise Failure(f"{shown}:{block.line}: the code block is never closed")
    return blocks


class Command:
    def __init__(self, path, line, text):
        self.path, self.line, self.text = path, line, text
        self.expected_status = 0
        self.output = []  # (line number, pattern)
        annotation = ANNOTATION.search(text)
        if annotation:
            kind, rest = annotation.group(1), annotation.group(2)
            status = EXITS.match(rest)
            if kind != "exits" or not status:
                raise Failure(f"{path}:{line}: unknown annotation '#{annotation.group(0).split('#', 1)[1]}'"
                              " (write '# exits N' with N = 1, 2 or 3)")
            self.expected_status = int(status.group(1))
            if self.expected_status == 0:
                raise Failure(f"{path}:{line}: '# exits 0' is the default; leave it out")

    def where(self):
        return f"{self.path}:{self.line}"


def parse_console(block):
    """The commands of a console block, each with the output lines shown under it."""
    commands, pending, start = [], None, 0
    for number, text in block.lines:
        if pending is not None:
            pending += "\n" + text
            if not text.endswith("\\"):
                commands.append(Command(block.path, start, pending))
                pending = None
            continue
        if text.startswith("$ "):
            if text.endswith("\\"):
                pending, start = text[2:], number
            else:
                commands.append(Command(block.path, number, text[2:]))
        elif text.strip() == "$":
            raise Failure(f"{block.path}:{number}: an empty command")
        elif text.strip():
            if not commands:
                raise Failure(f"{block.path}:{number}: output shown before any command "
                              "(a command line starts with '$ ')")
            commands[-1].output.append((number, text))
    if pending is not None:
        raise Failure(f"{block.path}:{start}: the command's last line ends with '\\'")
    return commands


def squeeze(text):
    return " ".join(text.split())


def pattern_regex(pattern):
    parts = [re.escape(p) for p in squeeze(pattern).split("...")]
    return re.compile("^" + ".*".join(parts) + "$")


def check_output(command, output):
    lines = [squeeze(l) for l in output.splitlines()]
    at = 0
    for number, pattern in command.output:
        if pattern.strip() == "...":
            continue
        regex = pattern_regex(pattern)
        while at < len(lines) and not regex.match(lines[at]):
            at += 1
        if at == len(lines):
            return f"{command.path}:{number}: shown output line not found (in order) in the " \
                   f"output of the command at line {command.line}:\n    {pattern.strip()}"
        at += 1
    return None


def lint_block(block):
    """A docs block that holds a cubecc command but is not run by this test."""
    if block.tag not in ("", "sh", "bash", "shell"):
        return None
    for number, text in block.lines:
        if TOOL_LINE.match(text.removeprefix("$ ")):
            return f"{block.path}:{number}: a cubecc command in a ```{block.tag} block: tag the " \
                   f"block ```console (the docs test runs it) or ```console-gpu (needs a GPU)"
    return None


def run_file(path, shown, repo, build, env, failures):
    """Runs the examples of one markdown file; returns (commands run, commands skipped)."""
    blocks = read_blocks(path, shown)
    is_doc = path.parent.name == "docs"
    ran = skipped = 0
    with tempfile.TemporaryDirectory(prefix="cubecc-docs-") as scratch:
        scratch = pathlib.Path(scratch)
        (scratch / "build").symlink_to(build)
        (scratch / "examples").symlink_to(repo / "examples")
        (scratch / "docs").symlink_to(repo / "docs")
        written = set()
        for block in blocks:
            if is_doc and (problem := lint_block(block)):
                failures.append(problem)
                continue
            if "file" in block.attributes:
                name = block.attributes["file"]
                target = scratch / name
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "a" if name in written else "w", encoding="utf-8") as f:
                    f.write("\n".join(text for _, text in block.lines) + "\n")
                written.add(name)
            if block.tag == "console-gpu":
                for command in parse_console(block):
                    print(f"  skipped (needs a GPU) {command.where()}: {command.text.splitlines()[0]}")
                    skipped += 1
                continue
            if block.tag != "console":
                continue
            for command in parse_console(block):
                ran += 1
                started = time.monotonic()
                try:
                    result = subprocess.run(["bash", "-c", command.text], cwd=scratch, env=env,
                                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, timeout=COMMAND_TIMEOUT_S)
                    output = result.stdout.decode("utf-8", "replace")
                    status = result.returncode
                except subprocess.TimeoutExpired:
                    failures.append(f"{command.where()}: timed out after {COMMAND_TIMEOUT_S} s: "
                                    f"{command.text}")
                    continue
                took = time.monotonic() - started
                print(f"  {command.where()} ({took:.1f} s, exit {status}): "
                      f"{command.text.splitlines()[0]}")
                problem = None
                if status != command.expected_status:
                    problem = f"{command.where()}: exit status {status}, the docs say " \
                              f"{command.expected_status}: {command.text}"
                else:
                    problem = check_output(command, output)
                if problem:
                    tail = "\n".join(output.splitlines()[-40:])
                    failures.append(f"{problem}\n  its output (last 40 lines):\n{tail}")
    return ran, skipped


SUBCOMMANDS = [
    ["cubecc", "compile"], ["cubecc", "kernels"], ["cubecc", "env", "build"],
    ["cubecc", "env", "inspect"], ["cubecc", "env", "verify"], ["cubecc", "env", "merge"],
    ["cubecc", "tune"], ["cubecc", "devices"], ["cubecc-opt"],
]


def check_cli(repo, build, env):
    failures = []
    cli = (repo / "docs/cli.md").read_text(encoding="utf-8")
    for words in SUBCOMMANDS:
        name = " ".join(words)
        if not re.search(r"^#+ .*`" + re.escape(name) + r"( |`)", cli, re.M):
            failures.append(f"docs/cli.md: no section heading names `{name}`")
        if not re.search(r"^\$ " + re.escape(name) + r" ", cli, re.M):
            failures.append(f"docs/cli.md: no ```console example runs `{name}`")
        tool = build / "tools" / words[0]
        result = subprocess.run([str(tool), *words[1:], "--help"], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=60)
        text = result.stdout.decode("utf-8", "replace")
        if result.returncode != 0:
            failures.append(f"`{name} --help` exits {result.returncode}, not 0")
        elif not re.search(r"^Examples?:", text, re.M):
            failures.append(f"`{name} --help` prints no 'Example:' section")
        print(f"  {name}: --help exit {result.returncode}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source-dir", required=True, type=pathlib.Path)
    parser.add_argument("--build-dir", required=True, type=pathlib.Path)
    parser.add_argument("--check-cli", action="store_true")
    parser.add_argument("files", nargs="*", type=pathlib.Path)
    args = parser.parse_args()
    repo, build = args.source_dir.resolve(), args.build_dir.resolve()
    if not (build / "tools" / "cubecc").exists():
        sys.exit(f"{build}/tools/cubecc does not exist: build the tools first")

    env = dict(os.environ)
    env["PATH"] = f"{build / 'tools'}{os.pathsep}{env.get('PATH', '')}"
    env.pop("CUBECC_ENV", None)  # the docs set it where they mean it
    if args.check_cli:
        failures = check_cli(repo, build, env)
        for f in failures:
            print(f"FAIL {f}")
        print(f"{len(SUBCOMMANDS)} commands checked, {len(failures)} problems")
        return 1 if failures else 0

    files = args.files or [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]
    failures, total_ran, total_skipped = [], 0, 0
    started = time.monotonic()
    for path in files:
        path = path.resolve()
        shown = path.relative_to(repo) if path.is_relative_to(repo) else path
        with tempfile.TemporaryDirectory(prefix="cubecc-docs-cache-") as cache:
            env["CUBECC_CACHE_DIR"] = cache  # tuning caches stay in the scratch space
            try:
                ran, skipped = run_file(path, shown, repo, build, env, failures)
            except Failure as e:
                failures.append(str(e))
                continue
        if ran or skipped:
            print(f"{shown}: {ran} commands run, {skipped} skipped")
        total_ran += ran
        total_skipped += skipped
    for f in failures:
        print(f"FAIL {f}")
    print(f"{total_ran} commands run, {total_skipped} skipped (need a GPU), {len(failures)} "
          f"failures, {len(files)} files, {time.monotonic() - started:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
