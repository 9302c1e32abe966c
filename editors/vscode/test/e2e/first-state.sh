#!/usr/bin/env bash
# Activation to first state, side by side: the .vsix of a reference revision (default: the
# last build that listed runs and goals through the CLI, fcbbaf5) and this tree's, started
# alternately ROUNDS times each in code-server on the same project (test/e2e/run.mjs with
# LOOPSTATE_E2E_FIRST_STATE_ONLY=1). Prints each figure and the medians; docs/benchmarks.md
# (Editors) has a recorded run. Each launch also prints what the extension had started and
# watched by then (test/e2e/accounting.cjs). Needs what `npm run test:e2e` needs, and `loopstate` on PATH.
set -euo pipefail
cd "$(dirname "$0")/../.."
reference="${1:-fcbbaf5}"
rounds="${ROUNDS:-3}"
scratch="$(mktemp -d /tmp/lsfs-XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
git -C ../.. archive "$reference" editors/vscode protocol/loopstate_protocol/loopstate.schema.json | tar -x -C "$scratch"
ln -s "$PWD/node_modules" "$scratch/editors/vscode/node_modules"
(cd "$scratch/editors/vscode" && npm run --silent build >/dev/null 2>&1)
npm run --silent build >/dev/null 2>&1
before=()
after=()
for _ in $(seq "$rounds"); do
    for build in before after; do
        if [ "$build" = before ]; then vsix="$scratch/editors/vscode/dist/loopstate.vsix"; else vsix="$PWD/dist/loopstate.vsix"; fi
        # a launch that fails gives no figure: it is reported and left out of the medians
        out="$(LOOPSTATE_E2E_FIRST_STATE_ONLY=1 LOOPSTATE_E2E_VSIX="$vsix" node test/e2e/run.mjs 2>/dev/null || true)"
        ms="$(printf '%s\n' "$out" | sed -n 's/^first state: \([0-9]*\) ms.*/\1/p')"
        printf '%s\n' "$out" | sed -n "s/^accounted at first state: /  $build, at its first state: /p"
        echo "$build ($([ "$build" = before ] && echo "$reference" || echo "this tree")): ${ms:-no figure} ms (load $(cut -d' ' -f1 /proc/loadavg))"
        if [ -n "$ms" ]; then
            if [ "$build" = before ]; then before+=("$ms"); else after+=("$ms"); fi
        fi
    done
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median: before $(median "${before[@]}") ms, after $(median "${after[@]}") ms (load: $(cut -d' ' -f1-3 /proc/loadavg))"
