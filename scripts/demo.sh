#!/usr/bin/env bash
# The main job, as far as the pipeline exists today: the IR round trip. For each example kernel
# under examples/ir/ it parses and verifies the module, prints it, parses the printed text again,
# checks that the second printing is identical, and reports each kernel's structural hash (its
# identity in caches and environment bundles). Later stages (DSL tracing, passes, backends,
# environments) join this script as they land.
set -euo pipefail
cd "$(dirname "$0")/.."
opt=build/tools/cubecc-opt
[ -x "$opt" ] || { echo "demo: $opt is missing: run 'bash scripts/setup.sh' first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

printf '%-22s %-14s %-8s %s\n' "file" "kernel" "round" "structural hash"
failures=0
for f in examples/ir/*.cir; do
  "$opt" "$f" >"$tmp/once"
  "$opt" - <"$tmp/once" >"$tmp/twice"
  if cmp -s "$tmp/once" "$tmp/twice"; then round=ok; else round=DIFFERS; failures=$((failures + 1)); fi
  "$opt" "$f" --passes=print-hash | sed -n 's|^// hash @\([^:]*\): \([0-9a-f]*\)$|\1 \2|p' |
    while read -r kernel hash; do
      printf '%-22s %-14s %-8s %s\n' "$(basename "$f")" "$kernel" "$round" "$hash"
    done
done
echo
echo "The text form of examples/ir/axpy.cir after a round trip:"
cat "$tmp/once" | "$opt" - --strip-locations
[ "$failures" -eq 0 ] || { echo "demo: $failures file(s) did not round-trip" >&2; exit 1; }
echo "demo: every example parsed, verified and round-tripped exactly"
