"""The kept published forecasts (migration 0025): one row per key, read as of an issue time.

On SQLite and on the real PostgreSQL that scripts/test starts (``pg_db``).
"""

from __future__ import annotations

import pandas as pd
import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import inspect

from carbonsched.errors import InputError
from carbonsched.store import MIGRATIONS, Store
from carbonsched.store.published_forecasts import published_forecasts, write_published

T = pd.Timestamp("2023-12-18", tz="UTC")
HOUR = pd.Timedelta(hours=1)
SECOND = pd.Timedelta(seconds=1)
TEMP = "temperature_c"


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path) -> Store:
    if request.param == "sqlite":
        return Store(f"sqlite:///{tmp_path / 'p.sqlite'}")
    return Store(request.getfixturevalue("pg_db"))


def rows(published: pd.Timestamp, values: list[float], feature: str = TEMP) -> pd.DataFrame:
    """One publication of ``feature`` for the hours T, T+1h, ... (one value each)."""
    return pd.DataFrame({"feature": feature, "issued_at": published,
                         "ts": pd.date_range(T, periods=len(values), freq="h"),
                         "value": values})


def test_the_same_key_twice_is_one_row_and_the_first_value_stays(store):
    assert write_published(store, "open-meteo", "gb-london", rows(T - HOUR, [5.0, 6.0]),
                           T - HOUR) == 2
    # fetched again (the same publication): nothing new; a changed value does not overwrite
    assert write_published(store, "open-meteo", "gb-london", rows(T - HOUR, [9.0, 6.0]),
                           T) == 0
    got = published_forecasts(store, "gb-london", TEMP, T, T, T + 2 * HOUR)
    assert list(got["value"]) == [5.0, 6.0]
    assert (got["fetched_at"] == T - HOUR).all()
    # NaN values are not kept
    assert write_published(store, "open-meteo", "gb-london",
                           rows(T, [float("nan"), 7.0]), T) == 1


def test_an_as_of_read_returns_only_what_was_published_by_the_issue_time(store):
    write_published(store, "open-meteo", "gb-london", rows(T - 6 * HOUR, [1.0, 1.0, 1.0]),
                    T - 6 * HOUR)
    write_published(store, "open-meteo", "gb-london", rows(T, [2.0, 2.0]), T)  # at the limit
    write_published(store, "open-meteo", "gb-london", rows(T + SECOND, [3.0, 3.0, 3.0]),
                    T + SECOND)  # one second after the issue time: the known-bad row
    write_published(store, "open-meteo", "de-frankfurt", rows(T, [8.0]), T)  # another site
    write_published(store, "open-meteo", "gb-london", rows(T - HOUR, [4.0], "wind_speed_m_per_s"),
                    T - HOUR)
    got = published_forecasts(store, "gb-london", TEMP, T, T, T + 3 * HOUR)
    # the latest publication at or before T of each hour: T's where it covers the hour
    assert list(got["value"]) == [2.0, 2.0, 1.0]
    assert list(got["published_at"]) == [T, T, T - 6 * HOUR]
    assert (got["published_at"] <= T).all() and 3.0 not in set(got["value"])
    assert set(got["zone"]) == {"gb-london"} and set(got["feature"]) == {TEMP}
    # one second later, the later publication is knowable
    later = published_forecasts(store, "gb-london", TEMP, T + SECOND, T, T + 3 * HOUR)
    assert list(later["value"]) == [3.0, 3.0, 3.0]
    # one second before T, only the oldest
    early = published_forecasts(store, "gb-london", TEMP, T - SECOND, T, T + 3 * HOUR)
    assert list(early["value"]) == [1.0, 1.0, 1.0]
    # every feature, and the hours asked for only
    both = published_forecasts(store, "gb-london", None, T, T + HOUR, T + 3 * HOUR)
    assert list(zip(both["feature"], both["ts"], both["value"], strict=True)) == [
        (TEMP, T + HOUR, 2.0), (TEMP, T + 2 * HOUR, 1.0)]
    assert len(published_forecasts(store, "gb-london", TEMP, T - 7 * HOUR, T, T + HOUR)) == 0
    with pytest.raises(InputError, match="has no time zone"):
        published_forecasts(store, "gb-london", TEMP, T.tz_localize(None), T, T + HOUR)


def test_each_provider_keeps_its_own_latest_publication(store):
    ci = "carbon_intensity_g_per_kwh"
    write_published(store, "electricitymaps", "GB", rows(T - HOUR, [200.0], ci), T - HOUR)
    write_published(store, "watttime", "GB", rows(T - 2 * HOUR, [300.0], ci), T - 2 * HOUR)
    got = published_forecasts(store, "GB", ci, T, T, T + HOUR)
    assert list(zip(got["provider"], got["value"], strict=True)) == [
        ("electricitymaps", 200.0), ("watttime", 300.0)]
    one = published_forecasts(store, "GB", ci, T, T, T + HOUR, provider="watttime")
    assert list(one["value"]) == [300.0]


def _migrate(store: Store, revision: str, down: bool = False) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with store.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(cfg, revision)


def test_the_migration_upgrades_and_downgrades(store):
    def tables():
        return set(inspect(store.engine).get_table_names())

    assert "published_forecasts" in tables()  # the store migrates to head when opened
    idx = {i["name"] for i in inspect(store.engine).get_indexes("published_forecasts")}
    assert "ix_published_forecasts_lookup" in idx
    write_published(store, "open-meteo", "gb-london", rows(T, [1.0]), T)
    _migrate(store, "0024_forecast_calibration", down=True)
    assert "published_forecasts" not in tables() and "signal_cache" in tables()
    _migrate(store, "head")
    assert "published_forecasts" in tables()
    assert len(published_forecasts(store, "gb-london", TEMP, T, T, T + HOUR)) == 0
    assert write_published(store, "open-meteo", "gb-london", rows(T, [1.0]), T) == 1
