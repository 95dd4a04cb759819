#!/usr/bin/env bash
# Runs the whole test suite, as CI does:
#   1. build-test/: a debug build with ASan + UBSan and warnings as errors; ctest runs the unit
#      tests, the lit golden tests, the must-fail inputs and the repository checks;
#   2. build-tsan/: the memory pool, and the runtime with the interpreter, and their threads tests
#      (test/tsan) under ThreadSanitizer, which cannot
#      share a build with ASan;
#   3. the Python package (python/), built against build-test/ in the virtual environment
#      build-test/python-venv/ (scripts/python-env.sh: pytest, NumPy and PyTorch from PyPI), and
#      its pytest suite with the ASan runtime preloaded;
#   4. build-fuzz/: the libFuzzer targets (clang 14, ASan + UBSan); ctest runs the IR parser and
#      passes fuzzers (from the repository's .cir files) and the environment bundle reader fuzzer
#      (from small valid bundles) for CUBECC_FUZZ_RUNS (default 300000) executions each, from
#      sorted seeds with a fixed random seed, so that every run explores the same inputs.
# Expects the packages from scripts/setup.sh. Exits non-zero if anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '\033[1m[test]\033[0m %s\n' "$*"; }
jobs=$(nproc)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

status=0
say "configuring and building build-test/ (debug, ASan + UBSan, -Werror)"
cmake --preset test >/dev/null
cmake --build --preset test -j "$jobs"
say "running the test suite under ASan + UBSan"
ctest --preset test -j "$jobs" || status=1

say "configuring, building and running the runtime's threading tests (the pool; the runtime with the interpreter) under ThreadSanitizer (build-tsan/)"
if cmake -S test/tsan -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
  cmake --build build-tsan -j "$jobs"; then
  ctest --test-dir build-tsan --output-on-failure || status=1
else
  status=1
fi

say "building the Python package against build-test/ and running its tests (pytest, ASan preloaded)"
if bash scripts/python-env.sh build-test/python-venv --test &&
  CUBECC_BUILD_DIR="$PWD/build-test" build-test/python-venv/bin/pip install -q ./python; then
  # The package ships build-test's instrumented libcubecc.so: its ASan runtime must come first,
  # and libstdc++ must be loaded before ASan looks for __cxa_throw (Python does not link it).
  LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libstdc++.so.6)" \
    ASAN_OPTIONS=detect_leaks=0:alloc_dealloc_mismatch=0:use_sigaltstack=0 CUBECC_BUILD_DIR="$PWD/build-test" \
    build-test/python-venv/bin/pytest -q -p no:cacheprovider python/tests || status=1
else
  status=1
fi

say "configuring and building build-fuzz/ (clang 14, libFuzzer, ASan + UBSan)"
cmake --preset fuzz -DCUBECC_FUZZ_RUNS="${CUBECC_FUZZ_RUNS:-300000}" >/dev/null
cmake --build --preset fuzz -j "$jobs"
say "running the IR parser, passes and bundle reader fuzzers for ${CUBECC_FUZZ_RUNS:-300000}" \
  "executions each"
ctest --preset fuzz || status=1

if [ "$status" -eq 0 ]; then
  say "all test suites passed"
else
  say "FAILED: see the ctest output above"
fi
exit "$status"
