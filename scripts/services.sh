# shellcheck shell=bash
# Start and stop the real services the tests need, on loopback with private ports.
# Source this file, then call start_postgres, start_slurm and start_kube_emulator; stop_services stops
# what was started. Ports: PostgreSQL on CARBONSCHED_PG_PORT; Slurm and the Kubernetes emulator in
# CARBONSCHED_PORT_BASE .. +99: cluster i's slurmctld on base+10i+1, its slurmd on base+10i+2, the
# Kubernetes emulator on base+50. Unless exported, both are picked free at run time
# (python3 -m carbonsched.ports), and exported, so two runs on one machine do not collide.
# Needs root on Debian/Ubuntu: installs the packages it needs when they are missing (apt-get), runs
# munged as user munge, slurmctld and slurmd as root, PostgreSQL as user postgres.

# the daemons and runuser live in sbin, which a login shell's PATH may leave out
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH="$PATH:/usr/sbin:/sbin" ;; esac
export PATH

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

# One munged on a private socket, then one slurmctld and one slurmd per Slurm site of the catalog
# (independent clusters: own ClusterName, ports, state directory, node; fake GPUs in gres.conf).
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
  while read -r cluster cdir node ctld_port slurmd_port devs; do
    for dev in $devs; do [ -e "$dev" ] || mknod "$dev" c 1 3; done
    SLURM_CONF="$cdir/slurm.conf" slurmctld -i -L "$cdir/slurmctld.log" \
      || { cat "$cdir/slurmctld.log" >&2; return 1; }
    SLURM_CONF="$cdir/slurm.conf" slurmd -N "$node" -L "$cdir/slurmd.log" \
      || { cat "$cdir/slurmd.log" >&2; return 1; }
    CARBONSCHED_SLURM_CLUSTERS="$CARBONSCHED_SLURM_CLUSTERS $cluster"
  done <"$dir/clusters.txt"
  # wait until every node is idle (the controller answers and the slurmd registered its GPUs)
  local t=0
  while read -r cluster cdir node _; do
    until SLURM_CONF="$cdir/slurm.conf" sinfo -h -n "$node" -o %t 2>/dev/null | grep -q idle; do
      t=$((t + 1))
      if [ $t -gt 120 ]; then
        echo "services: Slurm cluster $cluster did not come up; logs in $cdir" >&2
        tail -n 20 "$cdir/slurmctld.log" "$cdir/slurmd.log" >&2
        return 1
      fi
      sleep 0.5
    done
  done <"$dir/clusters.txt"
  export CARBONSCHED_SLURM_CONF_DIR="$dir"
  export CARBONSCHED_SLURM_CLUSTERS="${CARBONSCHED_SLURM_CLUSTERS# }"
  echo "services: Slurm clusters $CARBONSCHED_SLURM_CLUSTERS (confs in $dir, ports from $base)" >&2
}

_stop_slurm() {
  local cluster cdir pidf
  [ -n "${_SLURM_DIR:-}" ] || return 0
  while read -r cluster cdir _; do
    for pidf in "$cdir/slurmd.pid" "$cdir/slurmctld.pid"; do
      [ -s "$pidf" ] && kill "$(cat "$pidf")" 2>/dev/null
    done
  done <"$_SLURM_DIR/clusters.txt"
  [ -s "$_SLURM_DIR/munge/munged.pid" ] && kill "$(cat "$_SLURM_DIR/munge/munged.pid")" 2>/dev/null
  sleep 0.5
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
