#!/usr/bin/env bash
# check-round-trip.sh CUBECC_OPT REPO: for every valid .cir file in the repository, printing the
# parsed module and parsing and printing that again gives the same text
# (`cubecc-opt x.cir | cubecc-opt -` == `cubecc-opt x.cir`). Files under test/error are inputs
# that must fail and are skipped; so are files that do not parse on their own (lit inputs that
# are generated or mutated by their RUN lines).
set -u
opt=$1
repo=$2
checked=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
while IFS= read -r -d '' f; do
  if ! "$opt" "$f" >"$tmp/once" 2>"$tmp/err"; then
    grep -q '^// RUN:.*expect-exit' "$f" && continue
    echo "FAIL: $f does not parse: $(head -3 "$tmp/err")"
    failed=$((failed + 1))
    continue
  fi
  if ! "$opt" - <"$tmp/once" >"$tmp/twice" 2>"$tmp/err"; then
    echo "FAIL: the printed form of $f does not parse: $(head -3 "$tmp/err")"
    failed=$((failed + 1))
  elif ! cmp -s "$tmp/once" "$tmp/twice"; then
    echo "FAIL: $f: printing the re-parsed module changes the text:"
    diff "$tmp/once" "$tmp/twice" | head -20
    failed=$((failed + 1))
  fi
  checked=$((checked + 1))
done < <(find "$repo" -name '*.cir' -not -path '*/build*' -not -path "$repo/test/error/*" -print0 | sort -z)
echo "$checked .cir files round-trip checked, $failed failed"
[ "$checked" -gt 0 ] && [ "$failed" -eq 0 ]
