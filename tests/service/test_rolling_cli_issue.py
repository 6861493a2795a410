"""``carbonsched plan --dispatch --rolling`` is the run the service's cron claims now.

Before, the command was issued at its ``--date``'s 00:00 UTC, by default tomorrow's: with the
service rolling every 6 h, a run at 02:00Z on 2026-07-15 was recorded as issued at
2026-07-16T00:00Z, and every service run issued before that (06:00, 12:00, 18:00) failed ("not
after the previous run"), final; the command itself committed [00:00, 06:00) of the next day.
Now it is issued at the newest due issue time of the cadence (the cron's own rule, so both
share the run's record), and an explicit ``--date`` after that is refused before anything is
claimed. Clocks are injected (:class:`~carbonsched.clock.ManualClock`): no wall clock.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from typer.testing import CliRunner

from carbonsched.catalog import load_catalog
from carbonsched.cli.app import app
from carbonsched.cli.service import lost_database, plan_and_dispatch, rolling_issue
from carbonsched.clock import ManualClock
from carbonsched.config import Settings, get_settings
from carbonsched.errors import InputError, StoreUnavailableError
from carbonsched.service.cron import DailyCron
from carbonsched.store import Store
from carbonsched.store.service import ServiceStore

CATALOG = "china-eastdata-westcompute"   # modelled signals (Asia/Shanghai): no shared data
DAY = datetime(2026, 7, 15, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("CARBONSCHED_DISPATCHER", "CARBONSCHED_CONFIG", "CARBONSCHED_ROLLING",
                "CARBONSCHED_ROLLING_RUN_EVERY_HOURS", "CARBONSCHED_AS_OF",
                "CARBONSCHED_CRON_TIMEZONE", "CARBONSCHED_CRON_TIME",
                "CARBONSCHED_CRON_PLAN_OFFSET_DAYS"):
        monkeypatch.delenv(var, raising=False)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _settings(every: int) -> Settings:
    return Settings(catalog=CATALOG, rolling=True, rolling_run_every_hours=every,
                    horizon_hours=24)


def _issue(every: int, day: str, now: datetime) -> tuple[date, date, datetime]:
    return rolling_issue(_settings(every), load_catalog(CATALOG), day, now)


def test_without_a_date_the_run_is_the_newest_due_issue_time():
    # 02:00Z: the 00:00Z run (08:00 on 07-15 in Shanghai), not tomorrow's
    assert _issue(6, "", DAY + timedelta(hours=2)) == (
        date(2026, 7, 15), date(2026, 7, 15), DAY)
    # 18:00Z is 02:00 on 07-16 in Shanghai: the cron's local day of that run
    assert _issue(6, "", DAY + timedelta(hours=18, minutes=59)) == (
        date(2026, 7, 16), date(2026, 7, 15), DAY + timedelta(hours=18))
    # every 24 h the cron's daily rule (06:00 Shanghai, the next day): 07:00 local on 07-15
    # (23:00Z on 07-14) runs the day 2026-07-16, issued at its 00:00 UTC
    assert _issue(24, "", DAY - timedelta(hours=1)) == (
        date(2026, 7, 15), date(2026, 7, 16), DAY + timedelta(days=1))


def test_a_date_at_the_newest_due_issue_time_is_run_one_cadence_later_is_refused():
    # at the limit: at 2026-07-16T00:00:00Z that issue time is the newest due one
    midnight = DAY + timedelta(days=1)
    assert _issue(6, "2026-07-16", midnight) == (
        date(2026, 7, 16), date(2026, 7, 16), midnight)
    # an earlier issue time may be run (a missed day, a replay)
    assert _issue(6, "2026-07-15", midnight - timedelta(hours=6))[2] == DAY
    # one cadence later: at 18:00Z the newest due is 18:00, and 07-16 00:00 is 6 h ahead
    with pytest.raises(InputError) as exc:
        _issue(6, "2026-07-16", midnight - timedelta(hours=6))
    assert str(exc.value) == (
        "--rolling --date 2026-07-16: the run would be issued at 2026-07-16T00:00Z, after the "
        "newest due issue time 2026-07-15T18:00Z (now 2026-07-15T18:00:00Z; runs are issued "
        "every 6 h from 00:00 UTC (CARBONSCHED_ROLLING_RUN_EVERY_HOURS)); a rolling run "
        "issued ahead of the clock commits work early and makes every service run issued "
        "before it fail. Drop --date to run the run due now (2026-07-15T18:00Z), or run this "
        "from 2026-07-16T00:00:00Z; for a plan of 2026-07-16 that commits nothing, run "
        "`carbonsched plan --date 2026-07-16 --no-store --out plan.json` (without "
        "--dispatch)")
    with pytest.raises(InputError, match="after the newest due issue time 2026-07-15T18:00Z"):
        _issue(6, "2026-07-16", midnight - timedelta(seconds=1))


def test_every_24_hours_a_date_is_limited_by_the_daily_rule():
    # 06:00 in Shanghai on 07-15 is 22:00Z on 07-14: from then on the day 07-16 is due
    due_at = DAY - timedelta(hours=2)
    assert _issue(24, "2026-07-16", due_at) == (
        date(2026, 7, 15), date(2026, 7, 16), DAY + timedelta(days=1))
    with pytest.raises(InputError) as exc:
        _issue(24, "2026-07-16", due_at - timedelta(seconds=1))
    assert ("after the newest due issue time 2026-07-15T00:00Z (now 2026-07-14T21:59:59Z; "
            "runs are issued daily at 06:00 Asia/Shanghai, each planning 1 day(s) ahead "
            "(CARBONSCHED_CRON_TIME, CARBONSCHED_CRON_PLAN_OFFSET_DAYS))") in str(exc.value)
    assert "or run this from 2026-07-14T22:00:00Z;" in str(exc.value)
    with pytest.raises(InputError, match="issued at 2026-07-17T00:00Z, after the newest due "
                       "issue time 2026-07-16T00:00Z"):
        _issue(24, "2026-07-17", due_at)


def test_the_command_and_the_service_share_the_cadence_and_its_runs(tmp_path, monkeypatch):
    """The review's case: the service rolls every 6 h; an operator runs the command at 02:00Z
    without --date. Before: run 2026-07-16T00:00Z recorded, the service's 06:00 run failed."""
    url = f"sqlite:///{tmp_path / 'roll.sqlite'}"
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", url)
    monkeypatch.setenv("CARBONSCHED_ROLLING", "true")        # the service's settings
    monkeypatch.setenv("CARBONSCHED_ROLLING_RUN_EVERY_HOURS", "6")
    clock = ManualClock(DAY + timedelta(hours=2))
    code = plan_and_dispatch("", CATALOG, None, None, "highs", 20.0, 24, None, rolling=True,
                             clock=clock)
    assert code == 0
    db = ServiceStore(Store(url))
    [cli] = db.runs()
    assert (cli["run_key"], cli["planning_date"], cli["local_day"], cli["trigger"],
            cli["status"]) == ("2026-07-15T00:00Z", "2026-07-15", "2026-07-15", "cli",
                               "succeeded")
    rolling = db.store.get_plan(cli["plan_id"])["rolling"]
    assert rolling["commit_before"] == "2026-07-15T06:00:00Z"    # commits [00:00, 06:00)
    settings = Settings(catalog=CATALOG, database_url=url, rolling=True,
                        rolling_run_every_hours=6, horizon_hours=24, time_limit_s=20.0)
    cron = DailyCron.from_settings(settings, db, clock, replica="svc")
    assert cron.tick("check") is None                 # the same issue time: run once
    clock.set(DAY + timedelta(hours=6))
    svc = cron.tick("scheduled")
    assert (svc["run_key"], svc["status"], svc["error"]) == ("2026-07-15T06:00Z",
                                                             "succeeded", "")
    # the command again at 06:30 is the service's 06:00 run: not planned twice
    clock.set(DAY + timedelta(hours=6, minutes=30))
    assert plan_and_dispatch("", CATALOG, None, None, "highs", 20.0, 24, None, rolling=True,
                             clock=clock) == 0
    assert [r["run_key"] for r in db.runs()] == ["2026-07-15T06:00Z", "2026-07-15T00:00Z"]
    assert db.get_run(DAY + timedelta(hours=6))["attempts"] == 1


def test_the_command_refuses_a_rolling_date_ahead_of_the_clock_claiming_nothing(
        tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'ahead.sqlite'}"
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", url)
    r = CliRunner().invoke(app, [
        "plan", "--dispatch", "--rolling", "--date", "2100-01-01", "--catalog", CATALOG,
        "--hours", "24"])
    assert r.exit_code == 2, r.output
    flat = " ".join(r.stderr.split())
    assert flat.startswith("error: --rolling --date 2100-01-01: the run would be issued at "
                           "2100-01-01T00:00Z, after the newest due issue time "), flat
    assert ServiceStore(Store(url)).runs() == []


def test_a_rolling_run_that_lost_its_database_names_the_command_that_runs_it_again():
    # before, every run was told `--date D`, which for the run issued at 06:00Z runs 00:00Z
    exc = StoreUnavailableError("/tmp/s.sqlite", "storing the plan", "disk I/O error")
    hint = str(lost_database(exc, "2026-07-15", None, 45.0, DAY + timedelta(hours=6)))
    assert hint.endswith(
        "no plan file was written; once the database is back, run `carbonsched plan --dispatch "
        "--rolling` again (it takes the record of the run issued at 2026-07-15T06:00Z, while no "
        "later issue time is due, over 45 s after this run's last heartbeat)")
    hint = str(lost_database(exc, "2026-07-15", None, 45.0, DAY))
    assert "run `carbonsched plan --dispatch --rolling --date 2026-07-15` again (it takes the " \
           "record of the run issued at 2026-07-15T00:00Z over 45 s" in hint
    # a daily run: as before
    assert "run `carbonsched plan --dispatch --date 2026-07-15` again (it takes the date's run " \
           "record over 45 s" in str(lost_database(exc, "2026-07-15", None, 45.0))


def test_a_daily_rolling_run_is_refused_with_cron_settings_the_cron_refuses():
    """The cron refuses a run that comes after its plan's issue time (the plan's first hours
    would be past); the rolling command used the same rule without the check (found by
    review: offset 0 west of UTC issued 14 h in the past)."""
    def settings(offset: int) -> Settings:
        return Settings(catalog=CATALOG, rolling=True, rolling_run_every_hours=24,
                        horizon_hours=24, cron_timezone="America/New_York",
                        cron_plan_offset_days=offset)

    now = DAY + timedelta(hours=14)
    with pytest.raises(InputError, match="CARBONSCHED_CRON_PLAN_OFFSET_DAYS=0: the run"):
        rolling_issue(settings(0), load_catalog(CATALOG), "", now)
    # just inside: offset 1 (06:00 in New York plans the next UTC day) is accepted
    assert rolling_issue(settings(1), load_catalog(CATALOG), "", now)[2] == \
        DAY + timedelta(days=1)
