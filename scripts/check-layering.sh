#!/usr/bin/env bash
# check-layering.sh [REPO]: the one dependency rule of docs/architecture.md, checked on the
# sources. A layer may include only the public headers (cubecc/<layer>/...) of layers below it:
#   dsl -> ir <- passes <- codegen <- runtime <- autotune <- environments <- capi <- tools
# capi/ (the C API and the C++ umbrella header for embedders) sits on top: it may use the DSL's
# kernel library loader as well as the runtime and environments.
# and one backend under codegen/ never includes another. The CMake targets enforce the same rule
# through include paths; this check also catches a path that happens to be reachable.
set -u
repo=${1:-$(dirname "$0")/..}
cd "$repo" || exit 2

allowed() { # layer -> the layers it may include
  case $1 in
    ir) echo "ir" ;;
    dsl) echo "dsl ir" ;;
    passes) echo "passes ir" ;;
    codegen) echo "codegen passes ir" ;;
    runtime) echo "runtime codegen passes ir" ;;
    autotune) echo "autotune runtime codegen passes ir" ;;
    environments) echo "environments autotune runtime codegen passes ir" ;;
    capi) echo "capi environments autotune runtime codegen passes ir dsl" ;;
    tools | test | bench | examples) echo "ANY" ;;
  esac
}

bad=0
for layer in ir dsl passes codegen runtime autotune environments capi; do
  [ -d "$layer" ] || continue
  ok=$(allowed "$layer")
  while IFS=: read -r file line include; do
    target=$(sed -E 's/.*cubecc\/([a-z_]+)\/.*/\1/' <<<"$include")
    if ! grep -qw -- "$target" <<<"$ok"; then
      echo "$file:$line: layer '$layer' includes '$target' (allowed: $ok)"
      bad=1
    fi
  done < <(grep -rnoE '#include [<"]cubecc/[a-z_]+/' "$layer" 2>/dev/null)
done
# Backends: a folder under codegen/ (other than common/) is one backend, with the public headers
# backend_headers lists; nothing of one backend (folder or public header) may include another
# backend's folder or headers: backends share only codegen/common.
backend_headers() { # backend folder -> its public headers
  case $1 in
    cuda) echo "cuda.h" ;;
    hip) echo "hip.h" ;;
    spirv) echo "spirv.h" ;;
    llvm) echo "cpu.h cpu_abi.h cpu_elf.h" ;;
    *) echo "" ;;
  esac
}
backend_folders=$(find codegen -mindepth 1 -maxdepth 1 -type d ! -name common ! -name include -printf '%f\n' | sort)
for backend in $backend_folders; do
  own_files="codegen/$backend"
  for h in $(backend_headers "$backend"); do own_files="$own_files codegen/include/cubecc/codegen/$h"; done
  for other in $backend_folders; do
    [ "$backend" = "$other" ] && continue
    pattern="codegen/$other/"
    for h in $(backend_headers "$other"); do pattern="$pattern|cubecc/codegen/$h"; done
    # shellcheck disable=SC2086
    if grep -rnE "#include [<\"](${pattern//./\\.})[\">]" $own_files; then
      echo "codegen/$backend includes backend $other: backends share only codegen/common"
      bad=1
    fi
  done
done
# The shared C-family emitter and the registry belong to no backend.
if grep -rnE '#include [<"]cubecc/codegen/(cuda|hip|spirv|cpu|cpu_abi|cpu_elf)\.h[">]' codegen/common; then
  echo "codegen/common includes a backend's header: common code belongs to no backend"
  bad=1
fi
[ "$bad" -eq 0 ] && echo "layering: every include points down the layer graph"
exit "$bad"
