"""python -m cubecc ARGS...: runs the cubecc command-line tool shipped in this package."""

import os
import sys


def executable() -> str:
    """The path of the cubecc command-line tool inside the package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "cubecc")


def main() -> None:
    path = executable()
    if not os.access(path, os.X_OK):
        sys.exit(f"cubecc: the command-line tool is missing from the package ({path}): reinstall it")
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    main()
