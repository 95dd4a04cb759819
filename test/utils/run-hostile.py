#!/usr/bin/env python3
"""run-hostile.py [--stdin-mib N] [--base DIR] -- COMMAND...: runs COMMAND with arguments that a
lit RUN line cannot spell, and exits with its exit code (128 + N for a signal N).

In COMMAND's arguments:
  @LONG@      becomes DIR/d/d/.../ (3000 levels: a path over PATH_MAX, 4096 bytes)
  @LONGNAME@  becomes 300 'n's (a file name over NAME_MAX, 255 bytes)
--stdin-mib N feeds N MiB of spaces to COMMAND's standard input through a pipe (a command that
stops reading early is not an error here).
"""
import argparse
import os
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stdin-mib", type=int, default=None)
    parser.add_argument("--base", default=".")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    long_path = os.path.join(args.base, "d/" * 3000)
    command = [a.replace("@LONGNAME@", "n" * 300).replace("@LONG@", long_path) for a in command]
    if args.stdin_mib is None:
        code = subprocess.run(command).returncode
    else:
        process = subprocess.Popen(command, stdin=subprocess.PIPE)
        chunk = b" " * (1 << 20)
        try:
            for _ in range(args.stdin_mib):
                process.stdin.write(chunk)
            process.stdin.close()
        except BrokenPipeError:
            pass
        code = process.wait()
    sys.exit(128 - code if code < 0 else code)


if __name__ == "__main__":
    main()
