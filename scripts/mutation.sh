#!/usr/bin/env bash
# Mutation testing of one module with mutmut (https://mutmut.readthedocs.io), in a scratch copy of
# the repository so that neither pyproject.toml nor the working tree is touched.
#
#   bash scripts/mutation.sh carbonsched/plan/result.py tests/plan/test_score_plan.py tests/plan/test_model.py
#
# Arguments: the module to mutate, then the test files that guard it. Prints mutmut's summary
# and the score (killed / (killed + survived), timeouts count as killed); the surviving mutants
# are listed with `mutmut results` in the scratch folder printed at the end. docs/mutation.md
# keeps the command and the last measured score.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODULE=$1; shift
TESTS=("$@")
WORK=${MUTATION_DIR:-$(mktemp -d /tmp/carbonsched-mutation.XXXXXX)}
mkdir -p "$WORK"
(cd "$ROOT" && git ls-files -co --exclude-standard | grep -v '^mutants/' | tar -cf - -T -) \
  | tar -xf - -C "$WORK"
cd "$WORK"
python3 - "$MODULE" "${TESTS[@]}" <<'PY'
import sys
module, tests = sys.argv[1], sys.argv[2:]
lines = ["[mutmut]", "source_paths=carbonsched", f"only_mutate={module}",
         "also_copy=", "    forecasts", "    adapters", "    regions", "    data", "    README.md",
         "    docs",
         "pytest_add_cli_args=", "    -p", "    no:cacheprovider", "    -q", "    -x",
         "pytest_add_cli_args_test_selection="] + [f"    {t}" for t in tests]
open("setup.cfg", "w").write("\n".join(lines) + "\n")
PY
export OMP_NUM_THREADS=1
mutmut run --max-children "${MUTATION_JOBS:-2}" >mutmut.log 2>&1 || true
tail -n 3 mutmut.log | tr '\r' '\n' | tail -n 2
mutmut results --all true 2>/dev/null >results.txt || mutmut results >results.txt 2>/dev/null || true
python3 - <<'PY'
import collections, re
counts = collections.Counter()
for line in open("results.txt"):
    m = re.match(r"\s*(\S+): (\w[\w ]*)$", line.rstrip())
    if m:
        counts[m.group(2)] += 1
killed = counts["killed"] + counts["timeout"]
total = killed + counts["survived"] + counts["no tests"]
print(dict(counts))
if total:
    print(f"mutation score: {killed}/{total} = {100 * killed / total:.1f} % killed")
PY
echo "scratch copy: $WORK (cd there; mutmut results / mutmut show NAME)"
