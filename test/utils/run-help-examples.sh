#!/usr/bin/env bash
# run-help-examples.sh BUILD REPO: every subcommand of cubecc (and cubecc-opt) answers --help with
# exit code 0 and an "Example" section, and every example command in those sections runs and
# exits 0 — so the help cannot drift from the tool. The examples run in order, in a scratch
# directory where build/ is BUILD and examples/ is REPO/examples (the paths the help uses), with
# BUILD/tools on PATH; a later example may use a file an earlier one wrote (app.cubeenv).
set -u
build=$(cd "$1" && pwd)
repo=$(cd "$2" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
ln -s "$build" "$scratch/build"
ln -s "$repo/examples" "$scratch/examples"
export PATH="$build/tools:$PATH"
cd "$scratch" || exit 2

# In the order that makes each example's inputs exist.
commands=("" "compile" "kernels" "env build" "tune" "env keygen" "env sign" "env inspect"
          "env verify" "env merge" "env" "env diff" "env prune" "devices" "opt")
failures=0
examples=0
for sub in "${commands[@]}"; do
  if [ "$sub" = opt ]; then tool=(cubecc-opt); else tool=(cubecc $sub); fi
  if ! help=$("${tool[@]}" --help 2>&1); then
    echo "FAIL: '${tool[*]} --help' exited non-zero:"
    echo "$help"
    failures=$((failures + 1))
    continue
  fi
  if ! grep -q '^Example' <<<"$help"; then
    echo "FAIL: '${tool[*]} --help' has no Example section"
    failures=$((failures + 1))
    continue
  fi
  # The lines of the Example(s) section that are commands.
  while IFS= read -r line; do
    command=${line#  }
    examples=$((examples + 1))
    if output=$(bash -c "$command" 2>&1 </dev/null); then
      echo "ok: $command"
    else
      echo "FAIL (exit $?): $command  (from '${tool[*]} --help')"
      tail -20 <<<"$output"
      failures=$((failures + 1))
    fi
  done < <(sed -n '/^Example/,/^$/p' <<<"$help" | grep -E '^  (cubecc|CUBECC_[A-Z_]+=)')
done
echo "$examples example command(s) from ${#commands[@]} --help texts, $failures failure(s)"
[ "$failures" -eq 0 ] && [ "$examples" -gt 0 ]
