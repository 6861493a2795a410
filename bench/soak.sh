#!/usr/bin/env bash
# The soak benchmark (bench/soak.py): start the Slurm clusters and the Kubernetes API emulator
# of scripts/services.sh on their own ports, run the soak (which starts its own PostgreSQL), stop
# them. Arguments go to bench/soak.py, e.g. --minutes 10 --out bench/results/soak.json.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/services.sh
source scripts/services.sh
trap stop_services EXIT
export CARBONSCHED_PORT_BASE=${CARBONSCHED_PORT_BASE:-$((58500 + RANDOM % 40 * 100))}
start_slurm global
start_kube_emulator global
export CARBONSCHED_SHARED_DATA=${CARBONSCHED_SHARED_DATA:-$(cd "$ROOT/.." && pwd)/shared/data}
python3 bench/soak.py "$@"
