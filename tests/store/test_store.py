"""The store on SQLite and on the real PostgreSQL server that scripts/test starts."""


import pandas as pd
import pytest
from sqlalchemy import create_engine, text

from carbonsched.errors import BackendUnavailableError, InputError
from carbonsched.store import Store


def _plan(pid="p1"):
    return {
        "plan_id": pid, "date": "2023-07-15", "catalog": "global", "signal_quality": "measured",
        "solver": {"name": "highs", "status": "optimal", "mip_gap": 0.0, "seconds": 1.5},
        "placements": [{"job_id": "a b:c[1]", "site": "ca-on", "start": "2023-07-15T02:00:00Z",
                        "end": "2023-07-15T05:00:00Z", "gpu_type": "A100", "gpus": 8,
                        "energy_kwh": 14.4, "emissions_kg": 0.43}],
        "inference": [{"area": "tokyo", "hour": "2023-07-15T00:00:00Z", "site": "jp-tk",
                       "gpu_type": "T4", "gpus": 3, "energy_kwh": 0.4, "emissions_kg": 0.2}],
        "unplaced": [{"job_id": "j9", "reason": "GangTooLarge"}],
        "totals": {"energy_kwh": 14.8, "emissions_kg": 0.63, "baseline_emissions_kg": 2.0},
    }


def _forecasts():
    ts = pd.date_range("2023-07-15", periods=2, freq="h", tz="UTC")
    return pd.DataFrame({"site": "ca-on", "signal": "carbon_intensity_g_per_kwh",
                         "model": "seasonal_naive", "issued_at": ts[0], "ts": ts,
                         "mean": [30.0, 31.0], "lo_80": [25.0, 26.0], "hi_80": [35.0, 36.0],
                         "lo_95": [20.0, 21.0], "hi_95": [40.0, 41.0],
                         "p_surplus": [0.25, float("nan")]})


def _roundtrip(store: Store):
    store.save_plan(_plan(), _forecasts())
    assert store.get_plan("p1")["placements"][0]["job_id"] == "a b:c[1]"
    rows = store.placements("p1").set_index("job_id")
    assert rows.loc["a b:c[1]", "state"] == "Planned"
    assert rows.loc["a b:c[1]", "start"] == pd.Timestamp("2023-07-15T02:00:00Z")
    assert rows.loc["j9", "state"] == "Pending" and rows.loc["j9", "reason"] == "GangTooLarge"
    fc = store.forecasts("p1")
    assert fc["mean"].tolist() == [30.0, 31.0]
    assert fc["ts"].iloc[1] == pd.Timestamp("2023-07-15T01:00:00Z")
    # the surplus-hour probability is kept where a row has one (issue 35 item 5; NULL elsewhere)
    assert fc["p_surplus"].iloc[0] == 0.25 and pd.isna(fc["p_surplus"].iloc[1])
    # saving the same plan again replaces it, it does not duplicate rows
    store.save_plan(_plan(), _forecasts())
    assert len(store.placements("p1")) == 2
    assert [p["plan_id"] for p in store.list_plans("2023-07-15")] == ["p1"]
    with pytest.raises(InputError, match="no plan 'nope'"):
        store.get_plan("nope")


def test_sqlite_roundtrip(tmp_path):
    _roundtrip(Store(f"sqlite:///{tmp_path}/sub/dir/cs.db"))


@pytest.mark.postgres
def test_postgres_roundtrip(pg_db):
    url = pg_db  # a fresh database of its own (tests/conftest.py)
    eng = create_engine(url)
    store = Store(url)
    _roundtrip(store)
    with eng.connect() as c:
        kind = c.execute(text("SELECT data_type FROM information_schema.columns WHERE "
                              "table_name='placements' AND column_name='start'")).scalar()
        tables = set(c.execute(text("SELECT tablename FROM pg_tables WHERE "
                                    "schemaname='public'")).scalars())
    store.engine.dispose()
    eng.dispose()
    # every migration ran: the tables of dispatch, the service and the signal cache exist
    assert {"plans", "dispatch_intents", "api_tokens", "pipeline_runs",
            "signal_cache", "rolling_jobs"} <= tables
    assert kind == "timestamp with time zone"


def test_dead_database_names_the_url_and_fix():
    with pytest.raises(BackendUnavailableError,
                       match=r"127\.0\.0\.1:1/x is unreachable.*CARBONSCHED_DATABASE_URL"):
        Store("postgresql+psycopg2://u:secret@127.0.0.1:1/x")


def test_bad_url_is_input_error():
    with pytest.raises(InputError, match="not usable"):
        Store("nosuchdialect://x")


@pytest.mark.parametrize("url, shown", [
    ("nosuchdialect://ops:s3cret@db/x", "nosuchdialect://ops:***@db/x"),
    ("postgresql+nodriver://ops@db/x?password=s3cret", "postgresql+nodriver://ops@db/x?password=***"),
    ("postgresql://ops:s3cret@db:notaport/x", "postgresql://… (the rest not shown: it does not"),
    # the parser's own words would name a piece of the password (the "port" s3cret@db)
    ("postgresql://ops:p@ss:s3cret@db/x", "postgresql://… (the rest not shown: it does not"),
    # a libpq keyword DSN and a URL without a scheme: nothing of them is shown
    ("host=db user=ops password=s3cret dbname=x", "(not shown: not a URL)"),
    ("ops:s3cret@db/x", "(not shown: not a URL)"),
    # an '@' in the password: where it ends cannot be told, so only the scheme is shown
    ("postgresql+psycopg2://ops:p@s3cret@127.0.0.1:1/x",
     "database URL postgresql+psycopg2://… is not usable: its password or user holds an "
     "unescaped '@'; percent-encode it as %40 in CARBONSCHED_DATABASE_URL"),
    ("postgresql+psycopg2://ops:Xy@s3cret/9Q@127.0.0.1:1/x",
     "database URL postgresql+psycopg2://… is not usable: its password or user holds an "
     "unescaped '@'"),
    ("postgresql+psycopg2://ops:Xy@s3cret?9Q@127.0.0.1:1/x",
     "database URL postgresql+psycopg2://… is not usable: its password or user holds an "
     "unescaped '@'"),
])
def test_a_bad_url_is_named_without_its_password(url, shown):
    with pytest.raises(InputError) as info:
        Store(url)
    msg = str(info.value)
    assert "s3cret" not in msg and shown in msg and "CARBONSCHED_DATABASE_URL" in msg
    # nor in a chained exception a log's traceback would print
    assert info.value.__cause__ is None
    assert info.value.__context__ is None or info.value.__suppress_context__


def _prefixes(store: Store):
    for pid in ("0c831765c6f9aa11", "0c831765d000bb22", "ff00_%x"):
        store.save_plan(_plan(pid), _forecasts())
    assert store.resolve_plan_id("0c831765c6f9aa11") == "0c831765c6f9aa11"   # the id itself
    assert store.resolve_plan_id("0c831765c6f9") == "0c831765c6f9aa11"       # as `plan` prints
    assert store.resolve_plan_id("0c831765d") == "0c831765d000bb22"
    # six characters at the least; five name nothing even when unique
    assert store.resolve_plan_id("ff00_%") == "ff00_%x"                     # LIKE's wildcards
    with pytest.raises(InputError, match="needs at least 6 characters"):  # literal, not patterns
        store.resolve_plan_id("ff00_")
    with pytest.raises(InputError, match="'0c8317' names several plans "
                       r"\(0c831765c6f9aa11, 0c831765d000bb22\); give more of the id"):
        store.resolve_plan_id("0c8317")
    with pytest.raises(InputError, match="no plan 'ff00__%'"):
        store.resolve_plan_id("ff00__%")        # '_' and '%' match only themselves
    with pytest.raises(InputError, match="no plan '0c831765e'"):
        store.resolve_plan_id("0c831765e")


def test_sqlite_short_plan_ids(tmp_path):
    _prefixes(Store(f"sqlite:///{tmp_path}/cs.db"))


@pytest.mark.postgres
def test_postgres_short_plan_ids(pg_db):
    _prefixes(Store(pg_db))
