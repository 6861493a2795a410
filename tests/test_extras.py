"""Install extras: the core plans a day; a missing extra is an error that names it (issue 34.6).

A missing package is simulated in a fresh interpreter with ``sys.modules[name] = None`` (the import
statement then raises ``ModuleNotFoundError`` as for an uninstalled package).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from carbonsched.errors import EXTRA_OF_MODULE, EXTRAS, MissingExtraError, require_extra

ROOT = Path(__file__).resolve().parents[1]
#: Every package an extra brings that carbonsched imports (EXTRA_OF_MODULE's keys).
OPTIONAL = sorted(EXTRA_OF_MODULE)


def _run(code: str, *, block: list[str], env: dict[str, str] | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    pre = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in block)
    return subprocess.run([sys.executable, "-c", pre + code], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})


def _cli(args: list[str]) -> str:
    return ("from carbonsched.cli.entry import main\n"
            f"sys.argv = ['carbonsched', *{args!r}]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    print('exit', e.code)\n"
            f"print('loaded', sorted(m for m in {OPTIONAL!r} if sys.modules.get(m)))\n")


def test_pyproject_extras_match_the_helpers_table():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = meta["optional-dependencies"]
    assert set(EXTRAS) == set(extras) - {"all", "test"}
    assert set(EXTRA_OF_MODULE.values()) <= set(EXTRAS)
    assert extras["all"] == [f"carbonsched[{','.join(EXTRAS)}]"]
    core = " ".join(meta["dependencies"]).lower()
    for dist in ("fastapi", "uvicorn", "apscheduler", "prometheus", "kubernetes", "distributed",
                 "lightgbm", "matplotlib", "openpyxl", "entsoe"):
        assert dist not in core, f"{dist} is in the core dependencies"


def test_core_without_any_extra_plans_a_day(tmp_path):
    out = tmp_path / "plan.json"
    r = _run(_cli(["plan", "--no-store", "--out", str(out)]), block=OPTIONAL,
             env={"CARBONSCHED_HOME": str(tmp_path)})
    assert "exit 0" in r.stdout or "exit" not in r.stdout, r.stdout + r.stderr
    assert "loaded []" in r.stdout, r.stdout
    assert out.exists(), r.stderr
    assert "placed" in r.stdout and "jobs" in r.stdout
    # the forecasters' choice does not trip on the missing LightGBM (an opt-in candidate)
    assert "lightgbm" not in (r.stdout + r.stderr).lower(), r.stdout + r.stderr


@pytest.mark.parametrize(("missing", "args", "extra"), [
    ("fastapi", ["serve", "--no-cron", "--port", "1"], "service"),
    ("uvicorn", ["serve", "--no-cron", "--port", "1"], "service"),
    ("apscheduler", ["serve", "--no-cron", "--port", "1"], "service"),
])
def test_cli_names_the_missing_extra(missing, args, extra):
    r = _run(_cli(args), block=[missing])
    assert "exit 2" in r.stdout, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    err = " ".join(r.stderr.split())
    assert f"needs the Python package '{missing}'" in err, err
    assert f"'.[{extra}]'" in err and f"carbonsched[{extra}]" in err, err


@pytest.mark.parametrize(("module", "extra"), sorted(EXTRA_OF_MODULE.items()))
def test_require_extra_names_the_extra_of_every_optional_module(module, extra):
    r = _run(f"from carbonsched.errors import require_extra\n"
             f"try:\n    require_extra({module!r}, 'the test')\n"
             "except ImportError as e:\n    print(type(e).__name__, e.extra, e.name)\n",
             block=[module])
    assert r.stdout.split() == ["MissingExtraError", extra, module], r.stdout + r.stderr


def test_require_extra_returns_an_installed_module():
    assert require_extra("json", "the test").dumps([1]) == "[1]"


@pytest.mark.parametrize(("missing", "code", "extra"), [
    ("matplotlib", "from carbonsched.evaluate.replay import plot_daily\n"
     "plot_daily({'daily': []}, 'x.png')", "report"),
    ("distributed", "from carbonsched.evaluate.executor import map_in_order\n"
     "list(map_in_order(print, [(1,)], executor='dask', workers=1))", "dask"),
    ("lightgbm", "from carbonsched.forecasts.dacf_models import LightGBMDayAhead\n"
     "LightGBMDayAhead()._fit_point(__import__('pandas').DataFrame({'a': [1.0]}), [1.0])",
     "lightgbm"),
    ("kubernetes", "from carbonsched.adapters.dispatch.kubernetes import KubernetesAdapter\n"
     "import inspect\n"
     "a = object.__new__(KubernetesAdapter)\n"
     "import threading; a._lock = threading.Lock(); a._api = None\n"
     "a._custom()", "kubernetes"),
])
def test_library_paths_raise_missing_extra(missing, code, extra):
    r = _run("try:\n" + "".join(f"    {line}\n" for line in code.splitlines())
             + "except ImportError as e:\n    print(type(e).__name__, e.extra, e.name)\n",
             block=[missing])
    assert r.stdout.split()[-3:] == ["MissingExtraError", extra, missing], r.stdout + r.stderr


def test_postgres_store_without_its_driver_names_the_service_extra(monkeypatch):
    from carbonsched.store import Store

    monkeypatch.setitem(sys.modules, "psycopg2", None)
    with pytest.raises(MissingExtraError) as e:
        Store("postgresql+psycopg2://u@127.0.0.1:1/carbonsched")
    assert e.value.extra == "service" and e.value.name == "psycopg2"
    assert "a postgresql+psycopg2 database URL needs the Python package 'psycopg2'" in str(e.value)
