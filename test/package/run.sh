#!/usr/bin/env bash
# run.sh BUILD SOURCE EXAMPLES: the installed package, used the way an application outside the tree
# uses it (EXAMPLES: the built libcubecc_examples.so, for step 6).
#   1. `cmake --install BUILD` into a scratch prefix; nothing installed may point into the tree;
#   2. test/package/project is configured against it with find_package(cubecc CONFIG), built
#      (a C++ application and a kernel library through cubecc_add_kernel_library) and run on the
#      default device: compiled at its first launch, then again from a bundle that the installed
#      `cubecc env build` made of the kernel library: 0 compiles;
#   3. the installed `cubecc compile` builds a DSL source with the installed kernel-library kit;
#   4. a C program through cubecc.h, likewise from the bundle (strict mode);
#   5. pkg-config: programs are compiled and linked with `pkg-config --cflags --libs cubecc`;
#   6. a C program that has only libcubecc and a bundle of the examples (no kernel library, no DSL
#      headers) runs their kernels by name: 0 compiles, results equal to the host's.
set -euo pipefail
build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
examples=$3
scratch=$(mktemp -d)
# The cpu device caches compiled objects per user: this test keeps its own.
export CUBECC_CACHE_DIR="$scratch/cache"
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/prefix
step() { printf '[package] %s\n' "$*"; }

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$scratch/install.log"
for f in bin/cubecc bin/cubecc-opt lib/libcubecc.so include/cubecc.h include/cubecc/cubecc.hpp include/cubecc/dsl.h \
  lib/cmake/cubecc/cubeccConfig.cmake lib/pkgconfig/cubecc.pc lib/cubecc/libcubecc_dsl.a \
  share/cubecc/kernel_library.map; do
  [ -e "$prefix/$f" ] || { echo "FAIL: the install has no $f"; exit 1; }
done
if grep -rlI -e "$build" -e "$source" "$prefix/lib/cmake" "$prefix/lib/pkgconfig"; then
  echo "FAIL: the installed package files above point into the build or source tree"
  exit 1
fi

step "configuring and building test/package/project against the installed package"
cmake -S "$source/test/package/project" -B "$scratch/project" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Debug >"$scratch/configure.log" ||
  { cat "$scratch/configure.log"; exit 1; }
cmake --build "$scratch/project" >"$scratch/build.log" || { cat "$scratch/build.log"; exit 1; }

step "running the application (JIT)"
"$scratch/project/scale_app" | tee "$scratch/jit.txt"
grep -q ': ok, compiles 1$' "$scratch/jit.txt"

step "bundling its kernel library with the installed cubecc, and running from the bundle"
"$prefix/bin/cubecc" kernels "$scratch/project/libscale_kernels.so"
"$prefix/bin/cubecc" env build "$scratch/project/libscale_kernels.so" --target vulkan,interp,cpu:native \
  -o "$scratch/app.cubeenv"
CUBECC_ENV=$scratch/app.cubeenv "$scratch/project/scale_app" | tee "$scratch/env.txt"
grep -q ': ok, compiles 0$' "$scratch/env.txt"

step "the C application (cubecc.h): JIT, then strictly from the bundle"
"$scratch/project/scale_c" "$scratch/project/libscale_kernels.so" | tee "$scratch/c-jit.txt"
grep -q ': ok, compiles 1$' "$scratch/c-jit.txt"
"$scratch/project/scale_c" "$scratch/project/libscale_kernels.so" "$scratch/app.cubeenv" |
  tee "$scratch/c-env.txt"
grep -q ': ok, compiles 0$' "$scratch/c-env.txt"

step "the installed cubecc compiles a DSL source with the installed kit"
"$prefix/bin/cubecc" --version
(cd "$scratch" && "$prefix/bin/cubecc" compile "$source/test/package/project/kernels.cpp" \
  --target vulkan --emit spirv -o "$scratch/scale.spv")
spirv-val --target-env vulkan1.2 "$scratch/scale.spv"

step "pkg-config --cflags --libs cubecc"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
flags=$(pkg-config --cflags --libs cubecc)
echo "$flags"
c++ -std=c++20 "$source/test/package/project/app.cpp" $flags -o "$scratch/scale_pkgconfig"
"$scratch/scale_pkgconfig"
cc -std=c11 "$source/test/package/project/app.c" $flags -o "$scratch/scale_c_pkgconfig"
"$scratch/scale_c_pkgconfig" "$scratch/project/libscale_kernels.so"
step "kernels by name from a bundle, without the kernel library or the DSL"
"$prefix/bin/cubecc" env build "$examples" --target vulkan,interp,cpu:native \
  -o "$scratch/examples.cubeenv"
"$scratch/project/named_c" "$scratch/examples.cubeenv" | tee "$scratch/named.txt"
grep -q ': ok, compiles 0$' "$scratch/named.txt"
step "ok"
