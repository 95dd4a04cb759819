#!/usr/bin/env bash
# run-must-fail.sh CXX PROGRAM [COMPILE_ARG...] [-- LINK_ARG...]
#
# Runs one must-fail DSL program (test/error/dsl/*.cpp) and succeeds only if it fails the way its
# comments say:
#
#   // EXPECT: <text>   one or more; every <text> must appear in the output (plain substrings)
#   // MODE: trace      optional; without it the program is a compile-time test
#
# compile-time test: `CXX COMPILE_ARG... -fsyntax-only PROGRAM` must exit with 1 (an error, not a
#   compiler crash), the first error the compiler reports must contain the first EXPECT text (the
#   readable static_assert message comes first, not after a wall of template errors), and every
#   EXPECT text must appear in its output.
# trace-time test: `CXX COMPILE_ARG... PROGRAM LINK_ARG... -o BINARY` must succeed, and BINARY (whose
#   main traces the kernel and prints the diagnostics) must exit with 1 (not 0, not a crash or a
#   sanitizer report) with every EXPECT text in its output.
#
# COMPILE_ARG: -std=c++20, -I<dir>, -D..., warning and sanitizer flags. LINK_ARG: the libraries a
# trace-time program links (libcubecc_dsl.a, libcubecc_ir.a, fmt, xxhash) and link flags. By hand:
#
#   bash test/error/dsl/run-must-fail.sh g++ test/error/dsl/negate_unsigned.cpp -std=c++20 \
#     -Idsl/include -Iir/include -- build/dsl/libcubecc_dsl.a build/ir/libcubecc_ir.a -lfmt -lxxhash
#
# Exit status: 0 the program failed as expected, 1 it did not, 2 bad usage.
set -u

if [ $# -lt 2 ]; then
  echo "usage: run-must-fail.sh CXX PROGRAM [COMPILE_ARG...] [-- LINK_ARG...]" >&2
  exit 2
fi
cxx=$1
program=$2
shift 2
compile_args=()
link_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  compile_args+=("$1")
  shift
done
[ $# -gt 0 ] && shift # the --
link_args=("$@")

if [ ! -r "$program" ]; then
  echo "run-must-fail: cannot read $program" >&2
  exit 2
fi
name=$(basename "$program")

expects=()
while IFS= read -r line; do
  expects+=("$line")
done < <(sed -n 's|^// EXPECT: \(.*[^[:space:]]\)[[:space:]]*$|\1|p' "$program")
if [ ${#expects[@]} -eq 0 ]; then
  echo "FAIL $name: no '// EXPECT: <text>' line" >&2
  exit 1
fi
mode=compile
grep -q '^// MODE: trace[[:space:]]*$' "$program" && mode=trace

work=$(mktemp -d "${TMPDIR:-/tmp}/cubecc-must-fail.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL $name ($mode-time test): $1" >&2
  echo "--- command: ${command[*]}" >&2
  echo "--- output (exit status $status):" >&2
  cat "$work/output" >&2
  exit 1
}

if [ $mode = compile ]; then
  command=("$cxx" "${compile_args[@]}" -fsyntax-only "$program")
  "${command[@]}" >"$work/output" 2>&1
  status=$?
  [ $status -eq 0 ] && fail "it compiled; it must not"
  [ $status -ne 1 ] && fail "the compiler exited with $status (a crash?), not 1"
  first_error=$(grep -m1 -E '(^|[[:space:]:])(fatal )?error:' "$work/output")
  case $first_error in
  *"${expects[0]}"*) ;;
  *) fail "the first error is not the expected message '${expects[0]}':
  $first_error" ;;
  esac
else
  command=("$cxx" "${compile_args[@]}" "$program" "${link_args[@]}" -o "$work/program")
  "${command[@]}" >"$work/output" 2>&1
  status=$?
  [ $status -ne 0 ] && fail "it does not compile; a trace-time test must compile, then fail when traced"
  command=("$work/program")
  "${command[@]}" >"$work/output" 2>&1
  status=$?
  [ $status -eq 0 ] && fail "it traced without errors; it must fail"
  [ $status -ne 1 ] && fail "it exited with $status (a crash or a sanitizer report?), not 1"
fi

for text in "${expects[@]}"; do
  grep -qF -- "$text" "$work/output" || fail "the output lacks the expected text '$text'"
done
echo "PASS $name ($mode-time test): failed as expected"
exit 0
