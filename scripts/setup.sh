#!/usr/bin/env bash
# cubecc setup for a fresh Debian 12 machine: installs the Debian packages the project needs (only those that are
# missing; safe to run again), then configures and builds the release tree in build/.
#
#   bash scripts/setup.sh                  install packages, configure and build build/ (release)
#   bash scripts/setup.sh --packages-only  install packages and stop
#
# Everything comes from Debian's own archive; nothing is downloaded from anywhere else.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  # build
  build-essential cmake ninja-build ccache pkg-config python3
  python3-venv python3-dev  # the Python package (python/, docs/python.md): a venv and the headers nanobind builds against
  # libraries
  libfmt-dev libcli11-dev libxxhash-dev nlohmann-json3-dev
  libdlpack-dev  # the C API exchanges tensors with frameworks through DLPack
  libtbb-dev     # the cpu device spreads a launch's workgroups over the cores with oneTBB
  libflatbuffers-dev flatbuffers-compiler  # environment bundles: the index and entries are FlatBuffers
  libsodium-dev  # environment bundles: Ed25519 signatures (cubecc env sign / keygen / verify --key)
  # SPIR-V backend and the Vulkan runtime (lavapipe runs it on the CPU)
  spirv-headers spirv-tools spirv-cross libspirv-cross-c-shared-dev
  libvulkan-dev libvulkan-volk-dev mesa-vulkan-drivers vulkan-tools
  vulkan-validationlayers glslang-tools  # validation layers for the tests, glslang for the GLSL baseline benchmark
  # HIP backend: hipRTC (inside libamdhip64) and comgr compile for AMD GPUs without one here
  libamdhip64-dev libhiprtc-builtins5 libamd-comgr-dev rocm-device-libs
  # CPU backend: LLVM 19 (one shared libLLVM) and lld's ELF driver, linked into the plugin libcubecc_llvm.so
  llvm-19-dev liblld-19-dev lld-19
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  libhalide14-0-dev       # Halide 14, the peer that bench/cpu_vs_halide measures the cpu device against
  llvm-19-tools           # FileCheck, not, count and lit for the lit tests
  clang-14 libclang-rt-14-dev  # libFuzzer and sanitizer runtimes for the fuzz targets
  clang-format-14 clang-tidy-14
)

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${#missing[@]} Debian package(s): ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  say "all ${#packages[@]} Debian packages already installed"
fi

[ "${1:-}" = "--packages-only" ] && exit 0

say "configuring build/ (release)"
cmake --preset release >/dev/null
say "building build/ with $(nproc) job(s)"
cmake --build --preset release
say "done: tools are in build/tools/"
