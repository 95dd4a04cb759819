#!/usr/bin/env bash
# bounds-check-stats.sh BUILD [OLD_CUBECC_OPT]: for every example kernel, traced from
# BUILD/examples/libcubecc_examples.so as is and at -O2, how many accesses bounds-check guards
# and proves (by ranges / by buffer.size facts), as a markdown table (docs/passes.md). With
# OLD_CUBECC_OPT, also the totals another cubecc-opt reports ("before" columns). LIB=path: another
# kernel library.
set -eu
build=$1 old=${2:-}
lib=${LIB:-$build/examples/libcubecc_examples.so}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# "<n> <what> (bounds-check)" from --pass-statistics, or 0.
count() { { grep -E "^ *[0-9]+ $2 \(bounds-check\)" <<<"$1" || echo " 0"; } | awk '{print $1; exit}'; }
header="| kernel | -O0: guarded / by ranges / by facts | -O2: guarded / by ranges / by facts |"
[ -n "$old" ] && header+=" before, -O0: guarded / proven | before, -O2: guarded / proven |"
echo "$header"
echo "|---|---|---|$([ -n "$old" ] && echo '---|---|')"
"$build/tools/cubecc" compile "$lib" --emit ir -o "$work/all.cir"
for k in $(grep -o 'kernel @[A-Za-z0-9_]*' "$work/all.cir" | cut -c9-); do
  row="| \`$k\` " before=""
  for level in 0 2; do
    "$build/tools/cubecc" compile "$lib" --emit ir -O$level --kernel "$k" -o "$work/$k.cir"
    s=$("$build/tools/cubecc-opt" "$work/$k.cir" --passes=bounds-check --pass-statistics -o /dev/null 2>&1)
    row+="| $(count "$s" "@$k: accesses guarded") / $(count "$s" "@$k: accesses proven in bounds by ranges")"
    row+=" / $(count "$s" "@$k: accesses proven in bounds by buffer.size facts") "
    if [ -n "$old" ]; then
      s=$("$old" "$work/$k.cir" --passes=bounds-check --pass-statistics -o /dev/null 2>&1)
      before+="| $(count "$s" "checks inserted") / $(count "$s" "checks proven unnecessary") "
    fi
  done
  echo "$row$before|"
done
