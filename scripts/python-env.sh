#!/usr/bin/env bash
# Makes (or updates) a Python virtual environment for the cubecc package (docs/python.md):
#
#   bash scripts/python-env.sh DIR          python3 -m venv DIR, with NumPy
#   bash scripts/python-env.sh DIR --test   and what the tests need: pytest, PyTorch
#
# The package itself is then `DIR/bin/pip install ./python`. Everything comes from PyPI (the
# Debian packages python3-venv and python3-dev come from scripts/setup.sh). PyTorch is a test-only
# dependency: PyPI's Linux wheel, which runs on the CPU without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: python-env.sh DIR [--test]}
say() { printf '\033[1m[python-env]\033[0m %s\n' "$*"; }

[ -x "$dir/bin/python" ] || { say "creating $dir"; python3 -m venv "$dir"; }
packages=(numpy)
[ "${2:-}" = "--test" ] && packages+=(pytest torch)
say "installing ${packages[*]} into $dir (only what is missing)"
"$dir/bin/pip" install -q --disable-pip-version-check "${packages[@]}"
