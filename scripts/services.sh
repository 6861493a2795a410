# shellcheck shell=bash
# Start and stop the real services the tests need, on loopback with private ports.
# Source this file, then call start_postgres; stop_services stops what was started.
# Installs the Debian packages it needs when they are missing (apt-get, as root).

CARBONSCHED_SERVICES_DIR=${CARBONSCHED_SERVICES_DIR:-$(mktemp -d /tmp/carbonsched-services.XXXXXX)}
chmod 755 "$CARBONSCHED_SERVICES_DIR"

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
  port=${CARBONSCHED_PG_PORT:-55432}
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

stop_services() {
  if [ -n "${_PG_STARTED:-}" ]; then
    runuser -u postgres -- $_PG_STARTED -m fast stop >/dev/null 2>&1 || true
    _PG_STARTED=""
  fi
  rm -rf "$CARBONSCHED_SERVICES_DIR"
}
