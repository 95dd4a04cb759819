#!/usr/bin/env bash
# check-format.sh [REPO]: every C++ file in git is formatted with the repository's .clang-format.
# Fix with: git ls-files '*.cpp' '*.h' | xargs clang-format-14 -i
set -u
cd "${1:-$(dirname "$0")/..}" || exit 2
files=$(git ls-files '*.cpp' '*.h' 2>/dev/null)
[ -n "$files" ] || { echo "check-format: not a git checkout, nothing to check"; exit 0; }
if clang-format-14 --dry-run --Werror $files; then
  echo "check-format: $(wc -w <<<"$files") files formatted"
else
  echo "check-format: run: git ls-files '*.cpp' '*.h' | xargs clang-format-14 -i"
  exit 1
fi
