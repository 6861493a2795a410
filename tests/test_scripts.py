"""The service start-up scripts parse: a broken one fails the test command before any test."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.scriptload import load_script

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "scripts").glob("*.sh")) + [
    Path(__file__).resolve().parents[1] / "scripts" / "test",
    Path(__file__).resolve().parents[1] / ".ci" / "run"]


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_shell_script_parses(script: Path) -> None:
    r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, f"{script}: {r.stderr}"


def test_a_broken_script_is_caught(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sh"
    bad.write_text("f() {\n  echo unclosed\n")
    r = subprocess.run(["bash", "-n", str(bad)], capture_output=True, text=True)
    assert r.returncode != 0 and "unexpected end of file" in r.stderr


def test_services_find_the_sbin_tools_from_a_path_without_sbin(tmp_path: Path) -> None:
    """A login shell's PATH may lack /usr/sbin (runuser, slurmctld, slurmd live there): a fresh
    user's `bash scripts/test` failed at `runuser: command not found`."""
    services = Path(__file__).resolve().parents[1] / "scripts" / "services.sh"
    r = subprocess.run(
        ["bash", "-c", f'source "{services}"; command -v runuser; '
         'rm -rf "$CARBONSCHED_SERVICES_DIR"'],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
             "CARBONSCHED_SERVICES_DIR": str(tmp_path / "services")},
        capture_output=True, text=True)
    if not Path("/usr/sbin/runuser").exists():
        pytest.skip("no /usr/sbin/runuser on this machine")
    assert r.returncode == 0 and r.stdout.strip() == "/usr/sbin/runuser", (r.stdout, r.stderr)


def _slurm_conf_module():
    return load_script("scripts/slurm_conf.py")


def test_slurm_conf_writes_the_catalogs_node_shape(tmp_path: Path) -> None:
    """A hub of the global catalog (16 A100 at 8 per node, 4 V100 at 4) is three nodes, each its
    own slurmd port, spool and pid file; gres.conf gives each node its own GPUs."""
    out = subprocess.run([sys.executable, str(ROOT / "scripts/slurm_conf.py"), "--catalog",
                          "global", "--root", str(tmp_path), "--port-base", "61000",
                          "--munge-socket", "/nowhere"], capture_output=True, text=True, check=True)
    first = out.stdout.splitlines()[0].split()
    assert first[:5] == ["ontario", str(tmp_path / "ontario"),
                         "ontario-n1,ontario-n2,ontario-n3", "61001", "61002"]
    assert len(first[5:]) == 8 + 8 + 4       # device files: the catalog's 20 GPUs
    conf = (tmp_path / "ontario" / "slurm.conf").read_text()
    nodes = re.findall(r"^NodeName=(\S+) .* Port=(\d+) .* Gres=(\S+) ", conf, flags=re.M)
    assert nodes == [("ontario-n1", "61002", "gpu:A100:8"), ("ontario-n2", "61003", "gpu:A100:8"),
                     ("ontario-n3", "61004", "gpu:V100:4")]
    assert "PartitionName=gpu Nodes=ontario-n1,ontario-n2,ontario-n3 " in conf
    assert f"SlurmdSpoolDir={tmp_path}/ontario/spool-%n" in conf
    assert f"SlurmdPidFile={tmp_path}/ontario/slurmd-%n.pid" in conf
    gres = (tmp_path / "ontario" / "gres.conf").read_text().splitlines()
    assert gres[1:] == [
        f"NodeName=ontario-n1 Name=gpu Type=A100 File={tmp_path}/ontario/dev/ontario-n1/gpu[0-7]",
        f"NodeName=ontario-n2 Name=gpu Type=A100 File={tmp_path}/ontario/dev/ontario-n2/gpu[0-7]",
        f"NodeName=ontario-n3 Name=gpu Type=V100 File={tmp_path}/ontario/dev/ontario-n3/gpu[0-3]"]


def test_slurm_conf_private_clusters_keep_one_node(tmp_path: Path) -> None:
    mod = _slurm_conf_module()
    d, node, devices = mod.write_cluster(tmp_path, "priv", "ca-on-toronto", "global",
                                         {"A100": 16, "V100": 4}, 61091, 61092, "/nowhere")
    assert (node, len(devices)) == ("priv-n1", 20)
    conf = (d / "slurm.conf").read_text()
    assert f"SlurmdPidFile={d}/slurmd.pid" in conf and "Gres=gpu:A100:16,gpu:V100:4 " in conf
    with pytest.raises(ValueError, match="12 A100 is not whole nodes of 8"):
        mod.cluster_nodes("x", {"A100": 12}, {"A100": 8})


# ---------------------------------------------------------------------- ports (issue 34, item 6)
SERVICES = Path(__file__).resolve().parents[1] / "scripts" / "services.sh"
TEST_COMMAND = Path(__file__).resolve().parents[1] / "scripts" / "test"


def _ports_from_services(env: dict[str, str], tmp_path: Path) -> tuple[int, int]:
    import os
    import sys

    r = subprocess.run(
        ["bash", "-c", f'source "{SERVICES}"; _ensure_pg_port && _ensure_port_base && '
         'echo "$CARBONSCHED_PG_PORT $CARBONSCHED_PORT_BASE"; rm -rf "$CARBONSCHED_SERVICES_DIR"'],
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path),
             "CARBONSCHED_SERVICES_DIR": str(tmp_path / "services"),
             **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}, **env},
        capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    pg, base = r.stdout.split()
    return int(pg), int(base)


def test_services_pick_free_ports_unless_exported(tmp_path: Path) -> None:
    """Two runs on one machine: the second never gets a block the first one holds."""
    import socket

    pg, base = _ports_from_services({}, tmp_path)
    assert 1024 < pg < 65536 and 20000 <= base and base + 99 < 32000
    # the first run's Kubernetes emulator listens on base+50: a second run must go elsewhere
    with socket.socket() as held:
        held.bind(("127.0.0.1", base + 50))
        held.listen()
        for _ in range(5):
            _, other = _ports_from_services({}, tmp_path)
            assert not other <= base + 50 < other + 100
    assert _ports_from_services({"CARBONSCHED_PG_PORT": "55650",
                                 "CARBONSCHED_PORT_BASE": "60800"}, tmp_path) == (55650, 60800)


def test_free_port_block_skips_a_busy_block_and_fits_at_the_limit() -> None:
    import random
    import socket

    from carbonsched.ports import free_port, free_port_block

    assert free_port() > 0
    # a block of 20 free now (a multiple of 20, so two blocks of 10), not a fixed port range:
    # several test runs share the machine
    base = free_port_block(20)
    # two blocks of 10 in [base, base + 20): the first has a busy port, the second is taken
    with socket.socket() as held:
        held.bind(("127.0.0.1", base + 3))
        held.listen()
        assert free_port_block(10, low=base, high=base + 20, rng=random.Random(0)) == base + 10
        with pytest.raises(OSError, match="no 10 consecutive free ports"):
            free_port_block(10, low=base, high=base + 10, attempts=5)
    # just at the limit: exactly one block fits; one port less and none does
    assert free_port_block(10, low=base, high=base + 10) == base
    with pytest.raises(ValueError,
                       match=rf"no block of 10 ports fits in \[{base}, {base + 9}\)"):
        free_port_block(10, low=base, high=base + 9)
    with pytest.raises(ValueError, match="size 0 must be >= 1"):
        free_port_block(0)


def test_the_test_command_says_up_front_it_needs_root_and_what_no_services_does(
        tmp_path: Path) -> None:
    import os
    import shutil

    runuser = shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin")
    if os.geteuid() != 0 or not runuser:
        pytest.skip("needs root to run the test command as another user")
    r = subprocess.run([runuser, "-u", "nobody", "--", "bash", str(TEST_COMMAND)],
                       capture_output=True, text=True, timeout=60, cwd="/",
                       env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r.returncode == 2
    first = r.stderr.splitlines()[0]
    assert first.startswith("== the services (PostgreSQL, Slurm, Chromium) need root on "
                            "Debian/Ubuntu: apt-get installs what is missing")
    assert "`bash scripts/test --no-services` runs every test that needs no service, without " \
        "root" in first
    assert ("error: starting the services needs root (uid 65534); run as root, or `bash "
            "scripts/test --no-services`") in r.stderr
    assert "installing" not in r.stderr        # refused before anything is installed


def test_the_test_command_stops_when_the_install_fails(tmp_path: Path) -> None:
    """`|| true` after the install let the suite run on whatever was installed: a failed extra
    then showed as failing or skipped tests far from the cause."""
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python3").write_text(
        "#!/bin/bash\n"
        'if [ "$1 $2 $3" = "-m pip install" ]; then\n'
        '  echo "ERROR: Could not find a version that satisfies the requirement highspy" >&2\n'
        "  exit 1\n"
        "fi\n"
        'if [ "$1 $2" = "-m pytest" ]; then echo "pytest started" >&2; exit 0; fi\n'
        # nothing reaches a real interpreter: no install, no suite, whatever the script calls
        'echo "python3 $* (not run by the shim)" >&2\n'
        "exit 99\n")
    (shim / "python3").chmod(0o755)
    r = subprocess.run(["bash", str(TEST_COMMAND), "--no-services"], capture_output=True,
                       text=True, timeout=120, cwd="/",
                       env={"PATH": f"{shim}:/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r.returncode == 1, r.stderr
    assert "Could not find a version that satisfies the requirement highspy" in r.stderr
    assert ("error: installing carbonsched[all,test] from requirements/lock.txt failed (pip "
            "exit 1, its output above)") in r.stderr
    assert "pytest started" not in r.stderr     # the suite never started


def test_the_test_command_shows_pips_lines_while_pip_runs(tmp_path: Path) -> None:
    """pip's output was held until pip exited, so a slow install printed nothing: the shim's
    pip writes a line and waits for the test to have read it (20 s at most)."""
    shim = tmp_path / "bin"
    shim.mkdir()
    seen = tmp_path / "seen"
    (shim / "python3").write_text(
        "#!/bin/bash\n"
        'if [ "$1 $2 $3" = "-m pip install" ]; then\n'
        '  echo "Running pip as the \'root\' user can result in broken permissions" >&2\n'
        '  echo "Collecting highspy (slow mirror)" >&2\n'
        f'  for i in $(seq 200); do [ -e {seen} ] && {{ echo "pip: read while running" >&2; '
        "exit 3; }; sleep 0.1; done\n"
        '  echo "pip: nobody read it while pip ran" >&2; exit 3\n'
        "fi\n"
        'echo "python3 $* (not run by the shim)" >&2\n'
        "exit 99\n")
    (shim / "python3").chmod(0o755)
    proc = subprocess.Popen(["bash", str(TEST_COMMAND), "--no-services"], cwd="/",
                            stderr=subprocess.PIPE, text=True,
                            env={"PATH": f"{shim}:/usr/bin:/bin", "HOME": str(tmp_path)})
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("Collecting highspy"):
            seen.touch()
    assert proc.wait(timeout=120) == 3
    text = "".join(lines)
    assert "pip: read while running" in text, text
    assert "Running pip as the 'root'" not in text          # still filtered
    assert "failed (pip exit 3, its output above)" in text


def test_a_private_postgres_whose_set_up_fails_leaves_no_folder(tmp_path, monkeypatch) -> None:
    """A test run stopped during initdb left /tmp/cs-private-pg-* behind: the fixture removes
    only a server it was handed, and the constructor did not clean up after itself."""
    import tempfile

    from scripts import private_postgres as pp

    if pp._bin() is None:
        pytest.skip("no PostgreSQL server binaries (scripts/test installs them)")
    made = []
    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp(**kw):
        made.append(Path(real_mkdtemp(dir=tmp_path, **kw)))
        return str(made[-1])

    def initdb_fails(self, tool, *args):
        raise subprocess.CalledProcessError(1, [tool], stderr=b"initdb: interrupted")

    monkeypatch.setattr(pp.tempfile, "mkdtemp", mkdtemp)
    monkeypatch.setattr(pp.PrivatePostgres, "_run", initdb_fails)
    with pytest.raises(subprocess.CalledProcessError):
        pp.PrivatePostgres()
    assert len(made) == 1 and made[0].name.startswith("cs-private-pg-")
    assert not made[0].exists()


# ---------------------------------------------------------------------- stopping the services
def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _job_scripts(services_dir: Path) -> list[int]:
    """PIDs of the Slurm job scripts running from ``services_dir``'s spool folders."""
    r = subprocess.run(["pgrep", "-f", f"{services_dir}/slurm/[^ ]*/job[0-9]*/slurm_script"],
                       capture_output=True, text=True, timeout=30)
    return [int(p) for p in r.stdout.split()]


@pytest.mark.slurm
def test_services_down_ends_the_jobs_still_running(monkeypatch) -> None:
    """A job running when the services stop ends with them: a stopped slurmd leaves its job
    steps running, and a demo plan's jobs that began at midnight during the suite looped on
    for a day after it, from a deleted folder. So does a test-owned cluster whose fixture's
    teardown never ran: a run killed in a test's setup left its slurmctld and slurmd running."""
    import os
    import shutil
    import tempfile
    import time

    from carbonsched.ports import free_port_block
    from tests.dispatch.helpers import PrivateCluster, poll

    if not os.environ.get("CARBONSCHED_SLURM_CONF_DIR"):
        pytest.skip("needs root and Slurm (scripts/test starts the Slurm clusters)")
    # not under pytest's tmp_path: munged runs as user munge, which cannot enter it
    top = Path(tempfile.mkdtemp(prefix="carbonsched-services-test."))
    top.chmod(0o755)
    svc = top / "svc"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CARBONSCHED_PORT_BASE", "CARBONSCHED_SLURM", "CARBONSCHED_KUBE"))}
    env["CARBONSCHED_SERVICES_DIR"] = str(svc)
    up = subprocess.run(["bash", str(SERVICES), "up", "global"], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=600)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        conf_dir = Path(re.search(r"CARBONSCHED_SLURM_CONF_DIR=(\S+)", up.stdout).group(1))
        job_env = {**env, "SLURM_CONF": str(sorted(conf_dir.glob("*/slurm.conf"))[0])}
        sb = subprocess.run(["sbatch", "--parsable", "--wrap", "sleep 600"], env=job_env,
                            capture_output=True, text=True, timeout=60)
        assert sb.returncode == 0, sb.stderr
        for _ in range(240):
            if _job_scripts(svc):
                break
            time.sleep(0.5)
        assert _job_scripts(svc), "the job never started"
        monkeypatch.setenv("CARBONSCHED_PORT_BASE", str(free_port_block(2) - 95))
        own = PrivateCluster(conf_dir, "orphan", 95, {"A100": 1})
        own.start()                                  # and never closed, as in a killed run
        daemons = [int((own.dir / f).read_text()) for f in ("slurmctld.pid", "slurmd.pid")]
        assert all(_alive(pid) for pid in daemons)
    finally:
        down = subprocess.run(["bash", str(SERVICES), "down"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        left = svc.exists()
        shutil.rmtree(top, ignore_errors=True)
    assert down.returncode == 0, down.stderr
    assert _job_scripts(svc) == []
    # SIGTERM sent by the stop; each daemon ends within a second or two (a generous limit)
    poll(lambda: [pid for pid in daemons if _alive(pid)], lambda v: v == [],
         "the test-owned cluster's daemons", timeout_s=60)
    assert not left


def test_the_kube_emulator_keeps_an_idle_job_without_a_deadline_running() -> None:
    """A Job of ``parallelism: 0`` (no pod) without ``activeDeadlineSeconds`` never ends; the
    emulator's reconcile raised ``OverflowError`` on it (``timedelta(seconds=inf)``), failing
    every later request to that cluster. Just beside it: the same Job with the least deadline
    of 1 s ends ``DeadlineExceeded``."""
    emu = load_script("scripts/kube_emulator.py", register=True)
    cluster = emu.Cluster("c", run_seconds=1.0)

    def job(name: str, deadline: int | None) -> dict:
        spec = {"parallelism": 0, "suspend": False, "template": {"spec": {"containers": []}}}
        if deadline is not None:
            spec["activeDeadlineSeconds"] = deadline
        return {"apiVersion": "batch/v1", "kind": "Job", "spec": spec,
                "metadata": {"name": name, "namespace": "ns", "uid": name,
                             "annotations": {}, "labels": {}}}

    cluster.bucket(emu.JOB)[("ns", "idle")] = job("idle", None)
    cluster.bucket(emu.JOB)[("ns", "bounded")] = job("bounded", 1)
    cluster.reconcile()
    idle = cluster.bucket(emu.JOB)[("ns", "idle")]["status"]
    assert idle["active"] == 0 and not idle.get("conditions"), idle
    later = datetime.now(UTC) + timedelta(seconds=5)
    emu._now = lambda: later  # the emulator's clock, 5 s on: past the 1 s deadline
    cluster.reconcile()
    idle = cluster.bucket(emu.JOB)[("ns", "idle")]["status"]
    assert not any(c["type"] in ("Complete", "Failed") for c in idle.get("conditions", []))
    bounded = cluster.bucket(emu.JOB)[("ns", "bounded")]["status"]
    assert [(c["type"], c.get("reason")) for c in bounded["conditions"]
            if c["type"] == "Failed"] == [("Failed", "DeadlineExceeded")], bounded


def test_the_kube_emulator_reads_label_selectors_as_the_api_server_does() -> None:
    """Known bad: the emulator split a selector at every comma, so a set-based term
    (``jobset-name in (a-0,b-0)``) matched nothing, silently (a real API server lists both);
    an unreadable selector matched nothing too instead of the API server's 400. Equality,
    set-based and existence terms, with ``!=``/``notin`` matching an absent label."""
    from fastapi.testclient import TestClient

    emu = load_script("scripts/kube_emulator.py", register=True)
    labels = {"app.kubernetes.io/managed-by": "carbonsched",
              "jobset.sigs.k8s.io/jobset-name": "a-0", "empty": ""}
    cases = {
        "": True,
        "app.kubernetes.io/managed-by=carbonsched": True,
        "app.kubernetes.io/managed-by==carbonsched,jobset.sigs.k8s.io/jobset-name": True,
        "jobset.sigs.k8s.io/jobset-name in (a-0,b-0)": True,
        "jobset.sigs.k8s.io/jobset-name in ( b-0 , a-0 )": True,
        "jobset.sigs.k8s.io/jobset-name in (b-0,c-0)": False,
        "jobset.sigs.k8s.io/jobset-name notin (b-0)": True,
        "jobset.sigs.k8s.io/jobset-name notin (a-0,b-0)": False,
        "other notin (a-0)": True,           # absent: notin and != match
        "other!=x": True,
        "other in (a-0)": False,
        "other": False, "!other": True, "!empty": False, "empty=": True, "empty!=": False,
        "app.kubernetes.io/managed-by=carbonsched,jobset.sigs.k8s.io/jobset-name in "
        "(a-0,b-0),other!=q": True,
    }
    assert {sel: emu._selector_matches(sel, labels) for sel in cases} == cases
    for bad in ("k in ()", "a=b=c", "k in (a", "k notin a"):
        with pytest.raises(ValueError, match="unable to parse requirement"):
            emu.parse_selector(bad)
    app = emu.create_app({"c": ["ns"]})
    with TestClient(app) as client:
        r = client.get("/clusters/c/api/v1/namespaces/ns/pods",
                       params={"labelSelector": "k in (a"})
        assert (r.status_code, r.json()["reason"]) == (400, "BadRequest")
        r = client.get("/clusters/c/api/v1/namespaces/ns/pods",
                       params={"labelSelector": "k in (a,b)"})
        assert (r.status_code, r.json()["items"]) == (200, [])
