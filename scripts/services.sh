# shellcheck shell=bash
# Start and stop the real services the tests need, on loopback with private ports.
# Source this file, then call start_postgres, start_slurm and start_kube_emulator; stop_services stops
# what was started. Or run it as a command, for the local clusters a plan is dispatched to (the
# README's tour):
#   eval "$(bash scripts/services.sh up [CATALOG])"   Slurm clusters + Kubernetes emulator of CATALOG
#                                                     (default global); exports their settings
#   bash scripts/services.sh down                     stops them
# Its state lives in CARBONSCHED_SERVICES_DIR (default ${TMPDIR:-/tmp}/carbonsched-local-clusters).
# Ports: PostgreSQL on CARBONSCHED_PG_PORT; Slurm and the Kubernetes emulator in
# CARBONSCHED_PORT_BASE .. +99: cluster i's slurmctld on base+10i+1, its node k's slurmd on
# base+10i+2+k, the Kubernetes emulator on base+50. Unless exported, both are picked free at run
# time (python3 -m carbonsched.ports), and exported, so two runs on one machine do not collide.
# Needs root on Debian/Ubuntu: installs the packages it needs when they are missing (apt-get), runs
# munged as user munge, slurmctld and slurmd as root, PostgreSQL as user postgres.

# the daemons and runuser live in sbin, which a login shell's PATH may leave out
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH="$PATH:/usr/sbin:/sbin" ;; esac
export PATH

if [ "${BASH_SOURCE[0]}" = "$0" ]; then  # run as a command: one fixed place, found by `down`
  CARBONSCHED_SERVICES_DIR=${CARBONSCHED_SERVICES_DIR:-${TMPDIR:-/tmp}/carbonsched-local-clusters}
fi
CARBONSCHED_SERVICES_DIR=${CARBONSCHED_SERVICES_DIR:-$(mktemp -d /tmp/carbonsched-services.XXXXXX)}
mkdir -p "$CARBONSCHED_SERVICES_DIR" && chmod 755 "$CARBONSCHED_SERVICES_DIR"

_apt_install() {
  if [ "$(id -u)" != 0 ]; then
    echo "services: $* missing and not root: install them (apt-get install $*)" >&2
    return 1
  fi
  echo "services: installing $* from Debian's packages ..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null
}

# the ports: the exported ones, else free ones picked now (and exported for the tests)
_ensure_pg_port() {
  if [ -z "${CARBONSCHED_PG_PORT:-}" ]; then
    CARBONSCHED_PG_PORT=$(python3 -m carbonsched.ports) || return 1
  fi
  export CARBONSCHED_PG_PORT
}

_ensure_port_base() {
  if [ -z "${CARBONSCHED_PORT_BASE:-}" ]; then
    CARBONSCHED_PORT_BASE=$(python3 -m carbonsched.ports --block 100) || return 1
  fi
  export CARBONSCHED_PORT_BASE
}

_pg_bin() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

start_postgres() {
  local bin port dir
  bin=$(_pg_bin)
  if [ -z "$bin" ] || [ ! -x "$bin/pg_ctl" ]; then
    _apt_install postgresql || return 1
    bin=$(_pg_bin)
  fi
  _ensure_pg_port || return 1
  port=$CARBONSCHED_PG_PORT
  dir="$CARBONSCHED_SERVICES_DIR/pg"
  mkdir -p "$dir" && chown postgres:postgres "$dir"
  runuser -u postgres -- "$bin/initdb" -D "$dir/data" -A trust -U postgres >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; return 1; }
  runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c fsync=off" \
    start >/dev/null || { cat "$dir/server.log" >&2; return 1; }
  "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres carbonsched
  export CARBONSCHED_TEST_POSTGRES_URL="postgresql+psycopg2://postgres@127.0.0.1:$port/carbonsched"
  _PG_STARTED="$bin/pg_ctl -D $dir/data"
  echo "services: PostgreSQL on 127.0.0.1:$port" >&2
}

# Debian's headless-capable browser for the HTML report test (tests/report/test_report_html.py).
# Not a daemon: each test runs its own `chromium --headless` with a fresh --user-data-dir.
start_chromium() {
  local bin
  bin=$(command -v chromium || true)
  if [ -z "$bin" ]; then
    _apt_install chromium || return 1
    bin=$(command -v chromium)
  fi
  export CARBONSCHED_CHROMIUM="$bin"
  echo "services: $("$bin" --version 2>/dev/null || echo chromium) at $bin" >&2
}

_slurm_packages_missing() {
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
    && command -v munged >/dev/null && return 1
  return 0
}

# One munged on a private socket, then one slurmctld per Slurm site of the catalog and one slurmd
# per node of it (independent clusters: own ClusterName, ports, state directory; nodes of the
# catalog's node shape, gpus_per_node, each its own slurmd -N <node> on its own port; fake GPUs in
# gres.conf, one device folder per node; scripts/slurm_conf.py).
# Exports CARBONSCHED_SLURM_CONF_DIR (<dir>/<cluster>/slurm.conf, how carbonsched reaches each
# cluster without slurmdbd) and CARBONSCHED_SLURM_CLUSTERS (space-separated names).
start_slurm() {
  local catalog=${1:-global} base dir line cluster cdir node
  local ctld_port slurmd_port devs
  _ensure_port_base || return 1
  base=$CARBONSCHED_PORT_BASE
  if _slurm_packages_missing; then
    _apt_install slurmctld slurmd slurm-client munge || return 1
  fi
  dir="$CARBONSCHED_SERVICES_DIR/slurm"
  mkdir -p "$dir/munge" "$dir/munge-key" /run/munge
  chown munge:munge "$dir/munge" "$dir/munge-key" /run/munge
  chmod 755 "$dir/munge"
  chmod 700 "$dir/munge-key"
  # a private key and socket: never touches a system munged
  runuser -u munge -- mungekey --create --keyfile="$dir/munge-key/munge.key" >/dev/null 2>&1 \
    || return 1
  runuser -u munge -- munged --socket="$dir/munge/munge.socket" \
    --key-file="$dir/munge-key/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge-key/munged.seed" || { cat "$dir/munge/munged.log" >&2; return 1; }
  _SLURM_DIR="$dir"
  CARBONSCHED_SLURM_CLUSTERS=""
  python3 "$(dirname "${BASH_SOURCE[0]}")/slurm_conf.py" --catalog "$catalog" --root "$dir" \
    --port-base "$base" --munge-socket "$dir/munge/munge.socket" >"$dir/clusters.txt" || return 1
  local nodes log
  while read -r cluster cdir nodes ctld_port slurmd_port devs; do
    for dev in $devs; do [ -e "$dev" ] || mknod "$dev" c 1 3; done
    SLURM_CONF="$cdir/slurm.conf" slurmctld -i -L "$cdir/slurmctld.log" \
      || { cat "$cdir/slurmctld.log" >&2; return 1; }
    for node in ${nodes//,/ }; do
      log="$cdir/slurmd.log"
      [ "$node" = "$nodes" ] || log="$cdir/slurmd-$node.log"
      SLURM_CONF="$cdir/slurm.conf" slurmd -N "$node" -L "$log" \
        || { cat "$log" >&2; return 1; }
    done
    CARBONSCHED_SLURM_CLUSTERS="$CARBONSCHED_SLURM_CLUSTERS $cluster"
  done <"$dir/clusters.txt"
  # wait until every node is idle (the controller answers and each slurmd registered its GPUs)
  local t=0
  while read -r cluster cdir nodes _; do
    until [ "$(SLURM_CONF="$cdir/slurm.conf" sinfo -h -N -n "$nodes" -o %t 2>/dev/null \
               | grep -c '^idle')" = "$(echo "${nodes//,/ }" | wc -w)" ]; do
      t=$((t + 1))
      if [ $t -gt 120 ]; then
        echo "services: Slurm cluster $cluster did not come up; logs in $cdir" >&2
        tail -n 20 "$cdir/slurmctld.log" "$cdir"/slurmd*.log >&2
        return 1
      fi
      sleep 0.5
    done
  done <"$dir/clusters.txt"
  export CARBONSCHED_SLURM_CONF_DIR="$dir"
  export CARBONSCHED_SLURM_CLUSTERS="${CARBONSCHED_SLURM_CLUSTERS# }"
  echo "services: Slurm clusters $CARBONSCHED_SLURM_CLUSTERS (confs in $dir, ports from $base)" >&2
}

# Every job first, then the daemons: a stopped slurmd leaves the job steps it started running
# (slurmstepd is their parent, not slurmd), so a job that began during the run (a plan's --begin
# at the next midnight) outlived it, its script looping in a spool folder already deleted. The
# jobs are cancelled while the controllers answer; any step left after the daemons stop (its
# script runs from this run's spool folders) is killed with its slurmstepd.
_stop_slurm() {
  local cluster cdir pidf pid parent jobs t=0
  [ -n "${_SLURM_DIR:-}" ] || return 0
  local scripts="$_SLURM_DIR/[^ ]*/job[0-9]*/slurm_script"   # a job's script, as pgrep -f sees it
  while read -r cluster cdir _; do
    jobs=$(SLURM_CONF="$cdir/slurm.conf" timeout 10 squeue -h -o %i 2>/dev/null)
    # shellcheck disable=SC2086
    [ -z "$jobs" ] || SLURM_CONF="$cdir/slurm.conf" timeout 10 scancel --quiet $jobs 2>/dev/null
  done <"$_SLURM_DIR/clusters.txt"
  while pgrep -f "$scripts" >/dev/null && [ $t -lt 20 ]; do
    sleep 0.5
    t=$((t + 1))
  done
  while read -r cluster cdir _; do
    for pidf in "$cdir"/slurmd*.pid "$cdir/slurmctld.pid"; do
      [ -s "$pidf" ] && kill "$(cat "$pidf")" 2>/dev/null
    done
  done <"$_SLURM_DIR/clusters.txt"
  # test-owned clusters (tests/dispatch/helpers.py: private_root), whose fixture's teardown a
  # killed run never reaches
  for pidf in "$_SLURM_DIR"/pc-*/*/slurm*.pid; do
    [ -s "$pidf" ] && kill "$(cat "$pidf")" 2>/dev/null
  done
  [ -s "$_SLURM_DIR/munge/munged.pid" ] && kill "$(cat "$_SLURM_DIR/munge/munged.pid")" 2>/dev/null
  sleep 0.5
  for pid in $(pgrep -f "$scripts"); do
    parent=$(ps -o ppid= -p "$pid" 2>/dev/null | tr -d ' ')
    case "$(ps -o comm= -p "${parent:-0}" 2>/dev/null)" in
      slurmstepd*) kill -9 "$parent" 2>/dev/null ;;
    esac
    kill -9 "$pid" 2>/dev/null
  done
  _SLURM_DIR=""
}

# The project's Kubernetes API emulator (scripts/kube_emulator.py) on loopback, one kubeconfig
# context per Kubernetes site of the catalog. Exports CARBONSCHED_KUBECONFIG (not KUBECONFIG:
# that one selects a real cluster for the contract suite).
start_kube_emulator() {
  local catalog=${1:-global} port dir t=0
  _ensure_port_base || return 1
  port=$(( CARBONSCHED_PORT_BASE + 50 ))
  dir="$CARBONSCHED_SERVICES_DIR/kube"
  mkdir -p "$dir"
  python3 "$(dirname "${BASH_SOURCE[0]}")/kube_emulator.py" --port "$port" --catalog "$catalog" \
    --kubeconfig "$dir/kubeconfig" >"$dir/emulator.log" 2>&1 &
  _KUBE_PID=$!
  until [ -s "$dir/kubeconfig" ] && python3 -c "import urllib.request as u; \
u.urlopen('http://127.0.0.1:$port/openapi.json', timeout=1)" 2>/dev/null; do
    t=$((t + 1))
    if [ $t -gt 120 ] || ! kill -0 "$_KUBE_PID" 2>/dev/null; then
      echo "services: the Kubernetes emulator did not come up:" >&2
      cat "$dir/emulator.log" >&2
      return 1
    fi
    sleep 0.5
  done
  export CARBONSCHED_KUBECONFIG="$dir/kubeconfig"
  echo "services: Kubernetes API emulator on 127.0.0.1:$port (kubeconfig $dir/kubeconfig)" >&2
}

stop_services() {
  _stop_slurm
  if [ -n "${_KUBE_PID:-}" ]; then
    kill "$_KUBE_PID" 2>/dev/null || true
    _KUBE_PID=""
  fi
  if [ -n "${_PG_STARTED:-}" ]; then
    runuser -u postgres -- $_PG_STARTED -m fast stop >/dev/null 2>&1 || true
    _PG_STARTED=""
  fi
  rm -rf "$CARBONSCHED_SERVICES_DIR"
}

# ---- run as a command (not sourced): `up [CATALOG]` and `down`
_services_main() {
  local state="$CARBONSCHED_SERVICES_DIR/state.sh" catalog=${2:-global}
  case "${1:-}" in
    up)
      if [ -s "$state" ]; then
        echo "services: already up (state in $state); run \`bash scripts/services.sh down\` first" >&2
        cat "$CARBONSCHED_SERVICES_DIR/env.sh"
        return 0
      fi
      start_slurm "$catalog" && start_kube_emulator "$catalog" || { stop_services; return 1; }
      printf '_SLURM_DIR=%q\n_KUBE_PID=%q\n' "$_SLURM_DIR" "$_KUBE_PID" >"$state"
      printf 'export CARBONSCHED_SLURM_CONF_DIR=%q\nexport CARBONSCHED_KUBECONFIG=%q\n' \
        "$CARBONSCHED_SLURM_CONF_DIR" "$CARBONSCHED_KUBECONFIG" >"$CARBONSCHED_SERVICES_DIR/env.sh"
      cat "$CARBONSCHED_SERVICES_DIR/env.sh"
      echo "services: up; this shell needs the exports above (eval \"\$(bash scripts/services.sh up)\"" \
        "sets them, or source $CARBONSCHED_SERVICES_DIR/env.sh); stop with" \
        "\`bash scripts/services.sh down\`" >&2
      ;;
    down)
      if [ ! -s "$state" ]; then
        echo "services: nothing to stop (no $state)" >&2
        return 0
      fi
      # shellcheck source=/dev/null
      source "$state"
      stop_services
      echo "services: stopped" >&2
      ;;
    *)
      echo "usage: bash scripts/services.sh up [CATALOG] | down  (or source it in a script)" >&2
      return 2
      ;;
  esac
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  _services_main "$@"
  exit $?
fi
