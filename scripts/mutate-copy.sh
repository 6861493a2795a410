#!/usr/bin/env bash
# Mutation testing of carbonsched/timeaxis.py and forecasts/base.py in a throw-away copy laid out
# as the installed package (carbonsched/ with forecasts/, adapters/, regions/, data/ inside), so the
# work tree is never touched. Usage: bash scripts/mutate-copy.sh [OUT_DIR]   (default /tmp/mutate)
# Needs the project's virtualenv active (pytest, pandas, ...). Prints each file's score.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-/tmp/mutate}"
rm -rf "$OUT" && mkdir -p "$OUT/pkg"
cp -r "$ROOT/carbonsched" "$OUT/pkg/carbonsched"
for d in forecasts adapters regions data; do cp -r "$ROOT/$d" "$OUT/pkg/carbonsched/$d"; done
cp -r "$ROOT/tests" "$ROOT/scripts" "$ROOT/pyproject.toml" "$OUT/"
cd "$OUT"
export PYTHONPATH="$OUT/pkg:$OUT"
python -c "import carbonsched, sys; assert carbonsched.__file__.startswith('$OUT'), carbonsched.__file__"
python scripts/mutate.py pkg/carbonsched/timeaxis.py tests/test_timeaxis.py tests/trust/test_guards.py \
    | tee "$OUT/timeaxis.log"
python scripts/mutate.py pkg/carbonsched/forecasts/base.py tests/trust/test_guards.py \
    | tee "$OUT/base.log"
