"""A PostgreSQL server of one caller's own: initdb + pg_ctl on a free loopback port.

For the tests and benchmarks that stop, restart or kill the database (the shared server of
``scripts/test`` serves the other tests). Debian's server binaries; run as user ``postgres``
when root. Used by ``tests/service/private_pg.py`` and ``bench/soak.py``.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from carbonsched.ports import free_port


def _bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parts[4]) if Path(p).parts[4].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).parent if pg_ctl else None


class NoPostgresError(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


class PrivatePostgres:
    """One PostgreSQL cluster in a temporary folder, run as the ``postgres`` user when root."""

    def __init__(self) -> None:
        bindir = _bin()
        if bindir is None:
            raise NoPostgresError("PostgreSQL server binaries not found under "
                                  "/usr/lib/postgresql/*/bin or on PATH: apt-get install "
                                  "postgresql (scripts/test installs them)")
        self.bin = bindir
        self.dir = Path(tempfile.mkdtemp(prefix="cs-private-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.as_postgres = os.geteuid() == 0
        try:
            if self.as_postgres:
                shutil.chown(self.dir, "postgres", "postgres")
            self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres")
            self.start()
            self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                      "carbonsched")
        except BaseException:
            # a set-up that fails or is interrupted (a test run stopped during initdb) leaves
            # neither a server nor its folder: the fixture only removes what it was handed
            self.remove()
            raise
        self.url = f"postgresql+psycopg2://postgres:pw-not-shown@127.0.0.1:{self.port}/carbonsched"

    def _cmd(self, tool: str, *args: str) -> list[str]:
        cmd = [str(self.bin / tool), *args]
        return ["runuser", "-u", "postgres", "--", *cmd] if self.as_postgres else cmd

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(self._cmd(tool, *args), check=True, capture_output=True, timeout=120)

    def pg_ctl(self, action: str) -> list[str]:
        """The ``pg_ctl`` command line of ``start`` or ``stop`` (fast, waiting)."""
        opts = (f"-c listen_addresses=127.0.0.1 -c port={self.port} "
                f"-c unix_socket_directories={self.dir} -c fsync=off")
        extra = ["-o", opts, "-l", str(self.dir / "server.log")] if action == "start" else [
            "-m", "fast"]
        return self._cmd("pg_ctl", "-D", str(self.data), "-w", "-t", "60", *extra, action)

    def restart(self) -> None:
        """Stop (fast) and start again on the same port and data."""
        self.stop()
        self.start()

    def start(self) -> None:
        subprocess.run(self.pg_ctl("start"), check=True, capture_output=True, timeout=120)

    def stop(self) -> None:
        subprocess.run(self.pg_ctl("stop"), check=False, capture_output=True, timeout=120)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
