"""Executors: local processes and a real Dask cluster give the same results in the same order."""

from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

import carbonsched.evaluate.executor as executor_mod
from carbonsched.cli.app import app
from carbonsched.errors import BackendUnavailableError, InputError
from carbonsched.evaluate.executor import ExecutorKind, map_in_order, parse_executor
from carbonsched.evaluate.replay import run_replay


def _power(base: int, exp: int) -> int:
    return base**exp


ARGS = [(b, e) for b, e in [(2, 10), (3, 3), (7, 0), (2, 10), (5, 2)]]
EXPECTED = [1024, 27, 1, 1024, 25]


def test_local_inline_and_processes_keep_the_order() -> None:
    assert list(map_in_order(_power, ARGS)) == EXPECTED
    assert list(map_in_order(_power, ARGS, executor="local", workers=2)) == EXPECTED


def test_dask_local_cluster_keeps_order_and_runs_duplicates_twice() -> None:
    # (2, 10) appears twice: pure=False, so both run and both results come back in place
    assert list(map_in_order(_power, ARGS, executor="dask", workers=2)) == EXPECTED


def test_dask_local_cluster_leaves_nothing_in_the_temporary_directory(tmp_path,
                                                                      monkeypatch) -> None:
    # dask's default scratch directory, <tmp>/dask-scratch-space, outlived every run
    import tempfile

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    assert list(map_in_order(_power, ARGS, executor="dask", workers=2)) == EXPECTED
    assert sorted(p.name for p in tmp.iterdir()) == []


@pytest.mark.parametrize("name", ["DASK", " dask "])
def test_executor_names_are_case_and_space_tolerant(name: str) -> None:
    assert parse_executor(name) is ExecutorKind.DASK


def test_bad_executor_settings_are_refused() -> None:
    with pytest.raises(InputError, match=r"unknown executor 'ray'; choose from local, dask"):
        list(map_in_order(_power, ARGS, executor="ray"))
    with pytest.raises(InputError, match=r"workers must be >= 1, got 0"):
        list(map_in_order(_power, ARGS, workers=0))
    with pytest.raises(InputError, match=r"--scheduler-address needs --executor dask"):
        list(map_in_order(_power, ARGS, scheduler_address="tcp://127.0.0.1:1"))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_scheduler_is_a_backend_error(monkeypatch) -> None:
    monkeypatch.setattr(executor_mod, "DASK_CONNECT_TIMEOUT_S", 2.0)
    address = f"tcp://127.0.0.1:{_closed_port()}"
    with pytest.raises(BackendUnavailableError,
                       match=rf"Dask scheduler {address} did not answer within 2 s"):
        list(map_in_order(_power, ARGS, executor="dask", scheduler_address=address))


def test_cli_refuses_bad_executor_before_loading_data(tmp_path) -> None:
    r = CliRunner().invoke(app, ["replay", "--out", str(tmp_path / "r.json"),
                                 "--executor", "spark", "--data-dir", str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert "unknown executor 'spark'; choose from local, dask" in r.output
    assert not (tmp_path / "r.json").exists()


@pytest.mark.shared_data
@pytest.mark.slow
def test_replay_on_dask_matches_local_day_by_day(shared_data) -> None:
    kw = dict(catalog="global", data_dir=shared_data, start="2023-07-02", end="2023-07-04",
              policies=("agnostic", "greedy", "milp"), seed=0, time_limit_s=60.0,
              chunk_days=1, workload_scale=0.1, workers=2)
    local = run_replay(**kw, executor="local")
    dask = run_replay(**kw, executor="dask")
    assert local["executor"] == "local" and dask["executor"] == "dask"
    assert [d["date"] for d in dask["daily"]] == ["2023-07-02", "2023-07-03", "2023-07-04"]
    assert dask["daily"] == local["daily"]
    assert dask["notes"] == local["notes"]
    for pol in ("agnostic", "greedy", "milp"):
        a, b = local["policies"][pol], dask["policies"][pol]
        assert {k: v for k, v in a.items() if k != "seconds"} == \
            {k: v for k, v in b.items() if k != "seconds"}
    assert local["policies"]["milp"]["emissions_kg"] < local["policies"]["agnostic"][
        "emissions_kg"]


def test_dask_local_cluster_serves_http_on_a_free_loopback_port() -> None:
    # with dashboard_address=None distributed still took the fixed port 8787: a second run on
    # the machine printed "Port 8787 is already in use" (the socket held here is that run)
    import warnings

    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        holder.bind(("127.0.0.1", 8787))
        holder.listen(1)
    except OSError:
        pass   # another process holds it already: the same situation
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            assert list(map_in_order(_power, ARGS, executor="dask", workers=2)) == EXPECTED
    finally:
        holder.close()
    assert [str(w.message) for w in seen if "8787" in str(w.message)] == []
