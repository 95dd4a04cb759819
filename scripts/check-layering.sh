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
for backend in cuda hip spirv; do
  [ -d "codegen/$backend" ] || continue
  for other in cuda hip spirv; do
    [ "$backend" = "$other" ] && continue
    if grep -rnE "#include [<\"](cubecc/codegen/$other/|codegen/$other/)" "codegen/$backend"; then
      echo "codegen/$backend includes codegen/$other: backends share only codegen/common"
      bad=1
    fi
  done
done
[ "$bad" -eq 0 ] && echo "layering: every include points down the layer graph"
exit "$bad"
