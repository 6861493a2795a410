#!/usr/bin/env bash
# pip time of the core install next to the full one ([all], today's dependency set before the
# extras), side by side on one machine: fresh venvs, the pip cache warmed first, the lock's pins,
# a clean export of HEAD (as a clean clone). Rounds alternate core and all, so both see the same
# load. Then `carbonsched plan --no-store` in the last core venv.
#
#   bash bench/install_time.sh            # 2 rounds; ROUNDS=3 for more
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
PY=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/src"
git archive HEAD | tar -x -C "$work/src"
echo "machine: $(nproc) cores, $(uname -sr), $($PY --version), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git rev-parse --short HEAD)"
"$PY" -m venv "$work/warm"
"$work/warm/bin/python" -m pip install -q --disable-pip-version-check \
  -c requirements/lock.txt -e "$work/src[all]"   # warm the pip cache (wheels and the build deps)
for r in $(seq "$ROUNDS"); do
  for kind in core all; do
    "$PY" -m venv "$work/$kind$r"
    spec="$work/src"; [ "$kind" = all ] && spec="$work/src[all]"
    t0=$(date +%s.%N)
    "$work/$kind$r/bin/python" -m pip install -q --disable-pip-version-check \
      -c requirements/lock.txt -e "$spec"
    t1=$(date +%s.%N)
    n=$("$work/$kind$r/bin/python" -m pip list --format=freeze 2>/dev/null | grep -vc -e '^pip==' -e '^setuptools==')
    printf 'round %s %-4s pip %6.1f s  %3d packages  load %s\n' "$r" "$kind" \
      "$(echo "$t1 - $t0" | bc)" "$n" "$(cut -d' ' -f1 /proc/loadavg)"
  done
done
t0=$(date +%s.%N)
(cd "$work" && CARBONSCHED_HOME="$work" "$work/core$ROUNDS/bin/carbonsched" plan --no-store >/dev/null 2>&1)
t1=$(date +%s.%N)
printf 'core venv: carbonsched plan --no-store %.1f s\n' "$(echo "$t1 - $t0" | bc)"
