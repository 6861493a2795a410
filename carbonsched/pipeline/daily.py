"""One planning day: ingest -> forecast -> plan -> store.

:func:`forecast_site` turns a site's signal history into day-ahead forecasts of carbon intensity,
green surplus and PUE; :func:`build_problem` assembles the planner's input; :func:`run_daily_plan`
runs the whole day and returns the plan document that ``carbonsched plan --out`` writes.

Issue-time rule: a plan for day D is issued at D 00:00 UTC and uses only observations before it.
Each signal is forecast by the model chosen for its site on rolling validation
(:mod:`carbonsched.forecasts.registry`, :func:`select_forecast`; the plan's ``forecast_models``
names it). PUE for measured sources: the site's PUE model applied to the past weather gives a PUE
history, forecast like the other signals (there is no archived day-ahead weather forecast for
these zones; weather persistence is the fallback when no choice can be made); modelled sources use
the model's own weather (climatological by construction, so known ahead).
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.adapters.signals import load_site_signals
from carbonsched.adapters.signals.quality import check_history as check_signal_history
from carbonsched.adapters.signals.quality import signal_age_hours
from carbonsched.catalog import Catalog, load_catalog
from carbonsched.domain import SignalQuality, Site, Workload, jsonable
from carbonsched.errors import ForecastError, InputError, TimeAxisError
from carbonsched.forecasts.base import Forecaster, fit_with_fallback
from carbonsched.forecasts.baselines import SeasonalNaive
from carbonsched.forecasts.exogenous import check_table as check_exogenous
from carbonsched.forecasts.exogenous import features_present
from carbonsched.forecasts.green_surplus import green_surplus_index
from carbonsched.forecasts.pue import pue_from_weather
from carbonsched.forecasts.registry import (
    DEFAULT_SCHEDULE,
    SIGNAL_SETTINGS,
    SelectedForecaster,
    ensemble_members,
)
from carbonsched.forecasts.registry import (
    NAIVE as NAIVE_MODEL,
)
from carbonsched.limits import MAX_HORIZON_HOURS
from carbonsched.pipeline.document import read_plan_document
from carbonsched.pipeline.replayed import (
    SIGNAL_QUALITY_REPLAYED,
    ReplayedSignals,
    ReplayShift,
    replay_sentence,
    shift_workload,
)
from carbonsched.plan import (
    PlanningProblem,
    PlanResult,
    agnostic_plan,
    resolve_solver,
    score_plan,
    site_hour_power,
    solve_plan,
)
from carbonsched.plan.baselines import BASELINE_DEFINITION
from carbonsched.plan.sets import check_slot_minutes
from carbonsched.timeaxis import HOUR, day_start_utc, hourly_slots, require_aware
from carbonsched.workload.schema import apply_templates

Progress = Callable[[str], None]

HISTORY_DAYS = 56
"""Days of signal history the per-lead OLS default is fitted on (its ``train_days``). [d]"""

FORECAST_HISTORY_DAYS = DEFAULT_SCHEDULE.load_days
"""Days of signal history loaded before an issue time: the model choice uses up to a year
before its refit period's start (:mod:`carbonsched.forecasts.registry`). [d]"""

UNUSED_SIGNAL_NOTE = re.compile(r"\bprice\b|price_usd_per_mwh")
"""Notes about a signal a carbon plan does not need: electricity prices. Where a price exists it
sharpens the green-surplus index; where it does not, the index comes from the renewable share
alone (:mod:`carbonsched.forecasts.green_surplus`), so a missing price file or price hour is not
missing data of the plan and is not put in its notes."""


def plan_uses(note: str) -> bool:
    """Whether a reader's or history check's note is about a signal the plan uses.

    ``False`` for notes about electricity prices (:data:`UNUSED_SIGNAL_NOTE`).
    """
    return UNUSED_SIGNAL_NOTE.search(note) is None


MODEL_CACHE_SIZE = 256
"""Fewest fitted model choices kept in the process (site x signal x issue hour x horizon);
:func:`size_model_cache` raises the bound to a service's working set."""
SELECTED_SIGNALS = 3
"""Signals whose model is chosen per site: carbon intensity, green-surplus index, PUE."""
_model_cache_limit = MODEL_CACHE_SIZE
"""The process-wide cache's bound now (:func:`size_model_cache`)."""


def model_cache_size(sites: int, run_every_hours: int = 24) -> int:
    """Entries the process-wide model cache keeps for ``sites`` planned every few hours.

    A refit period's working set is one choice per site, signal and issue hour (the choice is
    phased to the issue's UTC hour): ``sites`` x :data:`SELECTED_SIGNALS` x
    ``24 / run_every_hours``. Twice that, for the per-issue fallbacks and the forecasts the API
    or a backtest add to the same cache; never below :data:`MODEL_CACHE_SIZE`. A bound below the
    working set refits every choice at every run (the LRU drops each before its hour comes
    round again). Superseded refit periods are pruned, not counted (:func:`forecast_site`).
    """
    return max(MODEL_CACHE_SIZE, 2 * sites * SELECTED_SIGNALS * (24 // run_every_hours))


def size_model_cache(sites: int, run_every_hours: int = 24) -> int:
    """Raise the process-wide cache's bound to :func:`model_cache_size` (never lower it)."""
    global _model_cache_limit
    _model_cache_limit = max(_model_cache_limit, model_cache_size(sites, run_every_hours))
    return _model_cache_limit


def remember_model(cache: dict[Any, Any], key: Any, model: Any) -> None:
    """Keep ``model`` under ``key``, dropping an ``OrderedDict``'s least recent past the bound.

    The bound is the process's (:func:`size_model_cache`).

    Parameters
    ----------
    cache
        The cache, changed in place: an ``OrderedDict`` (least recent first) is bounded; a
        plain ``dict`` (a caller's own, e.g. one backtest's) only gets ``key``.
    key
        The model's key (site, signal, refit-period start, horizon, settings hash).
    model
        The fitted model (:class:`SelectedForecaster`).
    """
    cache[key] = model
    if isinstance(cache, OrderedDict):
        cache.move_to_end(key)
        while len(cache) > _model_cache_limit:
            cache.popitem(last=False)

_MODEL_CACHE: OrderedDict[Any, Any] = OrderedDict()
"""Process-wide cache of fitted :class:`SelectedForecaster` s, shared by the daily plan, the
service and the site backtest; keyed by site, signal, refit-period start, horizon and a hash of
the history the choice was fitted on, so changed data is never served a stale model."""

PERSISTENCE_TEMPERATURE_ERROR_C = 2.5
"""Standard deviation of a same-hour-yesterday temperature forecast's error, pushed through the
(monotone) PUE model for its 80 %/95 % intervals. [°C] Assumption: day-to-day changes of hourly
mid-latitude temperature are typically 2-3 °C; a day-ahead NWP forecast (about 1.5 °C RMSE, see
:class:`carbonsched.forecasts.pue.PueForecaster`) would halve it."""



def _quiet(_: str) -> None:
    return None


@dataclass
class SiteForecast:
    """Day-ahead forecasts for one site.

    Attributes
    ----------
    site
        Site id.
    signals
        Frame on the horizon slots (index ``slot``, UTC) with ``carbon_intensity_g_per_kwh``,
        ``pue``, ``pue_hi_95`` (upper bound of the PUE's 95 % interval) and
        ``green_surplus_kw``.
    long
        Long frame for the store: site, signal, model, issued_at, ts, mean, lo_80, hi_80, lo_95,
        hi_95.
    signal_quality
        ``measured``, ``estimated``, ``degraded`` or ``modelled``.
    notes
        Fallbacks and data gaps, for the plan.
    signal_age_hours
        Signal -> age of its newest observation at the issue time [h] (``None``: none);
        see :func:`carbonsched.adapters.signals.quality.signal_age_hours`.
    quality_reasons
        Why the quality is ``degraded`` (empty otherwise).
    models
        Signal -> the model choice (:meth:`SelectedForecaster.describe`, plus ``refit_from``
        and ``fallback``), for the plan's ``forecast_models`` block.
    """

    site: str
    signals: pd.DataFrame
    long: pd.DataFrame
    signal_quality: str
    notes: list[str] = field(default_factory=list)
    signal_age_hours: dict[str, float | None] = field(default_factory=dict)
    quality_reasons: list[str] = field(default_factory=list)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)


def surplus_reference(hist: pd.DataFrame, issued_at: pd.Timestamp) -> pd.Series | None:
    """Reference ``renewable_pct`` of the green-surplus index at ``issued_at``.

    The year before the refit period's start (:meth:`ModelSchedule.period_start`), so the index
    a period's models are fitted on does not move inside the period; ``None`` when the frame has
    no renewable share there (the index then judges the share against the frame itself).
    """
    if "renewable_pct" not in hist:
        return None
    start = DEFAULT_SCHEDULE.period_start(issued_at)
    r = hist["renewable_pct"]
    r = r[(r.index < start) & (r.index >= start - pd.Timedelta(days=365))]
    return r if r.notna().any() else None


def _history_key(y: pd.Series) -> int:
    return hash((str(y.index[0]) if len(y) else "", len(y), y.to_numpy(float).tobytes()))


def select_forecast(site: Site, signal: str, y: pd.Series, issued_at: pd.Timestamp,
                    horizon_hours: int, cache: Any, clip: tuple[float, float] | None = None,
                    exog: pd.DataFrame | None = None,
                    ) -> tuple[pd.DataFrame, dict[str, Any], str | None]:
    """Forecast ``signal`` with the model chosen for ``issued_at``'s refit period.

    The choice (:class:`carbonsched.forecasts.registry.SelectedForecaster`) is fitted on the
    history strictly before the refit period's start for ``issued_at``'s UTC hour of day and
    reused for every issue of the period at that hour (``cache``); the forecast conditions on
    ``y`` strictly before ``issued_at``. When no choice can be fitted (too little history
    before the period start), seasonal naive is fitted on the history before the issue time and
    the returned note says so.

    ``exog`` (:mod:`carbonsched.forecasts.exogenous`, what was published by ``issued_at``) adds
    the candidates that read exogenous forecasts: the choice is fitted on the values published
    before the period start, the forecast reads those published by ``issued_at``.

    Returns
    -------
    (DataFrame, dict, str or None)
        The forecast (contract columns), the choice's description, and a fallback note.
    """
    period = DEFAULT_SCHEDULE.period_start(issued_at)
    y_fit = y[(y.index < period)
              & (y.index >= period - pd.Timedelta(days=DEFAULT_SCHEDULE.history_days))]
    # one choice per issue hour: the per-hour models and the validation issues are phased to it
    ex_fit = None
    if exog is not None and features_present(exog, signal):
        ex_fit = exog[exog["issued_at"] < period]
        ex_fit.attrs.update(exog.attrs)
    else:
        exog = None
    key = (site.id, signal, period, horizon_hours, _history_key(y_fit), issued_at.hour,
           None if ex_fit is None else hash((len(ex_fit),
                                             ex_fit["value"].to_numpy(float).tobytes())))
    model = cache.get(key)
    note = None
    if model is None:
        try:
            model = SelectedForecaster(signal, tz=site.timezone, clip=clip,
                                       horizon_hours=horizon_hours,
                                       issue_hour=issued_at.hour, exog=ex_fit).fit(y_fit)
        except ForecastError as exc:
            y_now = y[y.index < issued_at]
            model = SeasonalNaive(tz=site.timezone if signal.startswith("carbon") else None,
                                  clip=clip).fit(y_now)
            note = (f"model choice failed ({exc}); used seasonal naive (24 h) fitted on the "
                    "history before the issue time")
            key = (*key, issued_at)  # a fallback is fitted per issue, not per period
        remember_model(cache, key, model)
    # features published by the issue time but not before the period start (a provider's live
    # forecast with no archive): no past issue to fit or validate a model on, so unused; named
    offered = features_present(exog, signal) if exog is not None else ()
    fitted = features_present(ex_fit, signal) if ex_fit is not None else ()
    unfitted = [f for f in offered if f not in fitted]
    if isinstance(model, SelectedForecaster):
        fc = model.predict(issued_at, horizon_hours, y=y, exog=exog)
        info = {**model.describe(), "refit_from": period.isoformat(), "fallback": None}
        note = naive_kept_note(model)
        sp = model.surplus_probability_.note if model.surplus_probability_ else None
        if sp:  # issue 35 item 5: the plan says when the calibrated probability is not used
            note = f"{note}; {sp}" if note else sp
        ex = info.get("exogenous") or {}
        if ex.get("used") and ex.get("fallback_hours"):
            n = ex["fallback_hours"]
            miss = (f"{n} forecast hour(s) had no exogenous forecast published by the issue "
                    f"time and were forecast without it ({', '.join(ex['features'])})")
            note = f"{note}; {miss}" if note else miss
        info["fallback"] = note
    else:
        fc = model.predict(issued_at, horizon_hours, y=y)
        info = {"model": "seasonal-naive-24h", "metric": None, "validation_error": None,
                "refit_from": None, "fallback": note, "issue_hour_utc": issued_at.hour,
                "features": {"seasonal-naive-24h": ["same hour on the latest observed day"]}}
        fc.attrs["model"] = "seasonal-naive-24h"
    if unfitted:
        why = (f"{', '.join(unfitted)} forecast(s) read at the issue time were not used: none "
               f"was published before the refit period's start ({period.isoformat()}), so no "
               "model could be fitted or validated on them")
        info["exogenous_not_fitted"] = {"features": unfitted, "why": why}
        note = f"{note}; {why}" if note else why
        info["fallback"] = note
    return fc, info, note


def known_exogenous(site: Site, exogenous: pd.DataFrame | None,
                    issued_at: pd.Timestamp) -> pd.DataFrame | None:
    """The exogenous forecasts published at or before ``issued_at``, with the site's PUE on them.

    Rows published later are dropped here (and never read by a model: each issue reads only
    values published by its own time, :func:`carbonsched.forecasts.exogenous.known_at`). Where
    a temperature and a humidity forecast share a publication and target hour, the site's PUE
    model on them (:func:`carbonsched.forecasts.pue.pue_from_weather`) is added as feature
    ``pue``.

    Parameters
    ----------
    site
        The site (its PUE model).
    exogenous
        The long table of :mod:`carbonsched.forecasts.exogenous`, or ``None``.
    issued_at
        The issue time (UTC).

    Returns
    -------
    DataFrame or None
        The table known at ``issued_at`` (its ``attrs`` kept), ``None`` when nothing is.

    Raises
    ------
    InputError
        A malformed table (:func:`carbonsched.forecasts.exogenous.check_table`).
    """
    if exogenous is None:
        return None
    table = check_exogenous(exogenous, f"site {site.id}: exogenous forecasts")
    attrs = dict(table.attrs)
    table = table[table["issued_at"] <= issued_at]
    if not len(table):
        return None
    w = table[table["feature"].isin(["temperature_c", "relative_humidity_pct"])]
    if len(w) and "pue" not in set(table["feature"]):
        wide = w.pivot_table(index=["issued_at", "ts"], columns="feature", values="value",
                             aggfunc="last")
        if {"temperature_c", "relative_humidity_pct"} <= set(wide.columns):
            wide = wide.dropna()
            rh = wide["relative_humidity_pct"].to_numpy(float)
            bad = (rh < 0) | (rh > 100)
            if bad.any():
                first = wide.index[int(np.flatnonzero(bad)[0])]
                raise InputError(
                    f"site {site.id}: exogenous relative_humidity_pct forecast {rh[bad][0]} "
                    f"(published {first[0].isoformat()} for {first[1].isoformat()}) is outside "
                    f"0-100 % ({int(bad.sum())} value(s)); give relative humidity in percent")
            p = pue_from_weather(wide["temperature_c"].to_numpy(float), rh, site.pue)
            extra = pd.DataFrame({"feature": "pue",
                                  "issued_at": wide.index.get_level_values(0),
                                  "ts": wide.index.get_level_values(1),
                                  "value": np.asarray(p, float)})
            table = pd.concat([table, extra], ignore_index=True)
    table = table.reset_index(drop=True)
    table.attrs.update(attrs)
    return table


def naive_kept_note(model: SelectedForecaster) -> str | None:
    """Why a green-surplus or PUE choice kept seasonal naive, for the plan's notes; else ``None``.

    Issue 35 item 5: the index and PUE are worth forecasting only where a model beats seasonal
    naive on the validation hours off their bounds by the signal's margin
    (:data:`carbonsched.forecasts.registry.SIGNAL_SETTINGS`); where none does, the plan uses
    naive and says so (the note is of kind "forecast fallback" on screen, counted per plan).
    Carbon intensity is not noted (naive is one of its honest candidates).

    Parameters
    ----------
    model
        A fitted choice.

    Returns
    -------
    str or None
        ``"no model beat seasonal naive ...; used seasonal naive"`` naming the hours it was
        judged on, naive's validation error and the closest other candidate's (an
        ``ens(a+b)`` as "the mean of a and b"), to two significant figures, or ``None``
        (another model chosen, carbon intensity, naive the only candidate validated, or naive
        exact on the validation hours: the signal never left its bounds there, so there was
        nothing to forecast).
    """
    if model.signal == "carbon_intensity_g_per_kwh" or model.chosen_ != NAIVE_MODEL:
        return None
    d = model.describe()
    naive_err = d.get("naive_validation_error")
    if naive_err is None or not np.isfinite(naive_err) or naive_err == 0:
        return None
    others = {k: v for k, v in d["candidates"].items()
              if k != NAIVE_MODEL and v is not None and np.isfinite(v)}
    if not others:
        return None
    best = min(others, key=others.__getitem__)
    settings = SIGNAL_SETTINGS[model.signal]
    lo, hi = settings["clip"]
    what = "the surplus index" if model.signal == "green_surplus_index" else "PUE"
    hours = (f"{what} strictly between {lo:g} and {hi:g}" if np.isfinite(hi)
             else f"{what} above {lo:g}")
    pct = " %" if d["metric"] == "mape" else ""
    members = ensemble_members(best)
    label = f"the mean of {' and '.join(members)}" if len(members) > 1 else best
    return (f"no model beat seasonal naive by {100 * settings['margin']:.0f} % on the "
            f"validation hours with {hours} (naive's {d['metric'].upper()} "
            f"{naive_err:.2g}{pct}; the closest other model, {label}, {others[best]:.2g}{pct}); "
            "used seasonal naive")


def prune_model_cache(cache: dict[Any, Any], issued_at: pd.Timestamp) -> int:
    """Drop the model choices of refit periods that ended before ``issued_at``'s period.

    A sequential replay passes its own ``models`` dict to :func:`forecast_site` run after
    run; the choices are keyed by refit-period start (:func:`select_forecast`), so entries of
    earlier periods are never read again. Pruning by period (instead of emptying the dict every
    so many days) keeps one fit per period: emptying it on a schedule that is not aligned with
    the Monday-anchored periods refitted a period twice.

    Parameters
    ----------
    cache
        The ``models`` dict given to :func:`forecast_site`; keys other than its model-choice
        tuples (an explicit model's ``"ci"``) are kept.
    issued_at
        The next issue time (tz-aware).

    Returns
    -------
    int
        Entries dropped.
    """
    period = DEFAULT_SCHEDULE.period_start(issued_at)
    old = [k for k in list(cache)   # a copy: the service's threads share the cache
           if isinstance(k, tuple) and len(k) >= 3 and isinstance(k[2], pd.Timestamp)
           and k[2] < period]
    return sum(cache.pop(k, None) is not None for k in old)


def _long(site: str, signal: str, fc: pd.DataFrame, issued_at: pd.Timestamp) -> pd.DataFrame:
    out = fc.reset_index().rename(columns={"index": "ts"})
    out.insert(0, "issued_at", issued_at)
    out.insert(0, "model", fc.attrs.get("model", "unknown"))
    out.insert(0, "signal", signal)
    out.insert(0, "site", site)
    return out


PERSISTENCE_DAYS = 7
"""Days back that weather persistence looks for the same hour of day. [d]"""


def _persistence_weather(hist: pd.DataFrame, slots: pd.DatetimeIndex) -> pd.DataFrame:
    """Weather on ``slots``: each slot takes the same UTC hour on the latest earlier day with data.

    Aligned by timestamp (slot - k days, k = 1..:data:`PERSISTENCE_DAYS`), never by position, so
    missing hours near the issue time cannot shift the diurnal cycle. NaN where no day has data.
    """
    cols = ["temperature_c", "relative_humidity_pct"]
    weather = pd.DataFrame(np.nan, index=slots, columns=cols)
    if not set(cols) <= set(hist.columns):   # a history with no weather (docs/signals.md)
        return weather
    for k in range(1, PERSISTENCE_DAYS + 1):
        lagged = hist[cols].reindex(slots - pd.Timedelta(days=k))
        weather = weather.fillna(pd.DataFrame(lagged.to_numpy(), index=slots, columns=cols))
    return weather


def check_history(site: Site, history: Any) -> None:
    """Refuse a history :func:`forecast_site` cannot use, with a message that says why.

    Only ``carbon_intensity_g_per_kwh`` is required (``docs/signals.md``); the other signal
    columns are optional and their absence is noted where they are used.

    Raises
    ------
    InputError
        Not a DataFrame, no carbon-intensity column, or a non-numeric one.
    TimeAxisError
        The index is not a tz-aware DatetimeIndex.
    """
    if not isinstance(history, pd.DataFrame):
        raise InputError(f"site {site.id}: the signal history must be a pandas DataFrame with "
                         "a tz-aware hourly DatetimeIndex and a 'carbon_intensity_g_per_kwh' "
                         f"column (docs/signals.md), got {type(history).__name__}")
    if "carbon_intensity_g_per_kwh" not in history.columns:
        raise InputError(f"site {site.id}: the signal history lacks the column "
                         "'carbon_intensity_g_per_kwh' [g/kWh] (its columns: "
                         f"{', '.join(map(str, history.columns)) or 'none'}); see "
                         "docs/signals.md")
    if not pd.api.types.is_numeric_dtype(history["carbon_intensity_g_per_kwh"]):
        raise InputError(f"site {site.id}: column 'carbon_intensity_g_per_kwh' has dtype "
                         f"{history['carbon_intensity_g_per_kwh'].dtype}, not numbers in g/kWh")
    if not isinstance(history.index, pd.DatetimeIndex):
        raise TimeAxisError(f"site {site.id}: the signal history's index is a "
                            f"{type(history.index).__name__}, not a DatetimeIndex of UTC hours")
    if history.index.tz is None:
        raise TimeAxisError(f"site {site.id}: the signal history's index is naive (no time "
                            "zone); localize it to UTC (docs/signals.md)")


def forecast_site(
    site: Site,
    history: pd.DataFrame,
    issued_at: pd.Timestamp,
    horizon_hours: int = 24,
    meta: dict[str, Any] | None = None,
    future_modelled: pd.DataFrame | None = None,
    ci_model: Forecaster | None = None,
    models: dict[str, Forecaster] | None = None,
    exogenous: pd.DataFrame | None = None,
) -> SiteForecast:
    """Forecast carbon intensity, green surplus and PUE for one site.

    Parameters
    ----------
    site
        The site (its PUE model and green-surplus contract are used).
    history
        Signal frame (docs/signals.md) up to ``issued_at``; rows at or after it are ignored.
    issued_at
        Issue time, tz-aware UTC on the hour.
    horizon_hours
        Number of hourly slots. [h]
    meta
        The signal source's meta (``signal_quality``).
    future_modelled
        For modelled sources only: the model's own weather over the horizon (climatological,
        known ahead); ``None`` for measured sources (PUE history from the past weather).
    ci_model
        An explicit carbon-intensity forecaster instead of the model choice (tests,
        experiments; cached under ``"ci"``); on a failed fit the seasonal-naive baseline is
        used and a note says so. Default: the model chosen on rolling validation.
    models
        Cache of fitted model choices, keyed by site, signal, refit-period start, horizon and a
        hash of the history they were fitted on (:func:`select_forecast`); entries present are
        reused (conditioned on ``history`` at predict time, never refitted). Default: the
        process-wide cache shared by the plan, the service and the backtest.
    exogenous
        Exogenous forecasts (weather, operator and provider forecasts; the long table of
        :mod:`carbonsched.forecasts.exogenous` with its publication times). Only the values
        published at or before ``issued_at`` are read; they become features of the
        carbon-intensity and green-surplus models and, through the site's PUE model on the
        forecast temperature and humidity, a PUE candidate (:func:`select_forecast`). Their
        source's caveat (reanalysis in place of an archived forecast) is put in the notes.
        ``None``: history only.

    Raises
    ------
    ForecastError
        The history has no carbon-intensity observation.
    """
    issued_at = require_aware(issued_at, "issued_at")
    check_history(site, history)
    meta = meta or {}
    quality = meta.get("signal_quality", SignalQuality.MEASURED)
    measured = quality != SignalQuality.MODELLED
    notes: list[str] = []
    if measured:
        # plausibility checks, ages and quarantine (adapters.signals.quality)
        checked = check_signal_history(history, issued_at, site.id,
                                       quarantined=meta.get("quarantined"))
        history = checked.frame
        ages, reasons = checked.age_hours, list(checked.degraded_reasons)
        notes.extend(n for n in checked.notes if plan_uses(n))
    else:
        ages, reasons = signal_age_hours(history, issued_at), []
    hist = history[history.index < issued_at]
    if "carbon_intensity_estimated" in hist and quality == SignalQuality.MEASURED:
        # the share is taken over the hours that exist: hours before a file starts (or inside a
        # gap) carry no provider flag and must not count as "not estimated"
        observed = hist["carbon_intensity_g_per_kwh"].notna()
        flags = hist.loc[observed, "carbon_intensity_estimated"]
        share = float(flags.fillna(False).astype(bool).mean()) if len(flags) else 0.0
        if share > 0.5:
            quality = SignalQuality.ESTIMATED
            notes.append(f"{site.id}: {100 * share:.0f} % of the {len(flags)} observed "
                         "carbon-intensity hours of the history are the provider's estimate "
                         f"({meta.get('source', '?')} {site.zone})")
    if reasons:
        quality = SignalQuality.DEGRADED
        notes.append(f"{site.id}: signal quality degraded: {'; '.join(reasons)}")
    slots = hourly_slots(issued_at, horizon_hours)
    ci = hist["carbon_intensity_g_per_kwh"]
    # the history checks' findings travel with a refusal, so a left-out site says why
    found = "".join(f"; {n.removeprefix(site.id + ': ')}" for n in notes)
    if ci.notna().sum() < 48:
        raise ForecastError(
            f"site {site.id}: fewer than 48 hours of carbon-intensity history before "
            f"{issued_at.isoformat()} in zone {site.zone} ({meta.get('source', '?')}); "
            f"choose a date the data covers{found}")
    last_obs = ci.last_valid_index()
    if last_obs is not None and issued_at - last_obs > pd.Timedelta(hours=48):
        raise ForecastError(
            f"site {site.id}: newest carbon-intensity observation is {last_obs.isoformat()}, "
            f"more than 48 h before the issue time {issued_at.isoformat()}{found}")
    cache = models if models is not None else _MODEL_CACHE
    if models is None:   # the long-running process: earlier refit periods are never read again
        prune_model_cache(cache, issued_at)
    chosen: dict[str, dict[str, Any]] = {}
    exog = known_exogenous(site, exogenous, issued_at)
    if exog is not None and exog.attrs.get("caveat"):
        notes.append(f"{site.id}: exogenous forecasts from {exog.attrs.get('source')}: "
                     f"{exog.attrs['caveat']}")
    if ci_model is not None:  # an explicit model: no choice (kept for tests and experiments)
        if "ci" not in cache:
            cache["ci"], note = fit_with_fallback(ci_model, SeasonalNaive(tz=site.timezone), ci)
            if note:
                notes.append(f"{site.id}: carbon intensity: {note}")
        ci_fc = cache["ci"].predict(issued_at, horizon_hours, y=ci)
        chosen["carbon_intensity_g_per_kwh"] = {"model": ci_fc.attrs.get("model"),
                                                "metric": None, "validation_error": None,
                                                "fallback": "explicit ci_model"}
    else:
        # carbon intensity follows the grid's load, which follows the site's clock: seasonal
        # lags in local wall-clock hours (issue 7 item 5); the model is chosen per period
        ci_fc, chosen["carbon_intensity_g_per_kwh"], note = select_forecast(
            site, "carbon_intensity_g_per_kwh", ci, issued_at, horizon_hours, cache, exog=exog)
        if note:
            notes.append(f"{site.id}: carbon intensity: {note}")

    # green surplus index in [0, 1] -> absorbable kW via the site's contract
    try:
        if "green_surplus_index" in hist and hist["green_surplus_index"].notna().any():
            gsi = hist["green_surplus_index"]
        else:
            gsi = green_surplus_index(hist, reference=surplus_reference(hist, issued_at))
        if gsi.notna().sum() < 48:
            raise ForecastError(f"{int(gsi.notna().sum())} hours of green-surplus index "
                                "history (48 needed)")
        gs_fc, chosen["green_surplus_index"], note = select_forecast(
            site, "green_surplus_index", gsi, issued_at, horizon_hours, cache, (0.0, 1.0),
            exog=exog)
        p_surplus = gs_fc.attrs.get("surplus_probability")
        gs_fc = gs_fc.clip(lower=0.0, upper=1.0)
        if note:
            notes.append(f"{site.id}: green surplus: {note}")
    except (ForecastError, InputError) as exc:
        notes.append(f"{site.id}: green surplus not forecast ({exc}); assumed 0")
        p_surplus = None
        gs_fc = pd.DataFrame(0.0, index=slots.rename("ts"),
                             columns=["mean", "lo_80", "hi_80", "lo_95", "hi_95"])
        gs_fc.attrs["model"] = "none"
        chosen["green_surplus_index"] = {"model": "none", "metric": None,
                                         "validation_error": None, "fallback": str(exc)}

    # PUE: measured sources forecast the PUE series of the site's model on the past weather
    # with the chosen model; modelled sources use the model's own (climatological) weather
    pue_done = False
    if future_modelled is None and {"temperature_c", "relative_humidity_pct"} <= set(hist):
        w = hist[["temperature_c", "relative_humidity_pct"]]
        pue_hist = pue_from_weather(w["temperature_c"], w["relative_humidity_pct"], site.pue)
        newest = pue_hist.last_valid_index()
        if (pue_hist.notna().sum() >= 48 and newest is not None
                and newest >= issued_at - 48 * HOUR):
            try:
                pue_fc, chosen["pue"], note = select_forecast(
                    site, "pue", pue_hist, issued_at, horizon_hours, cache,
                    (site.pue.pue_min, site.pue.pue_max), exog=exog)
                if note:
                    notes.append(f"{site.id}: PUE: {note}")
                pue = pd.Series(pue_fc["mean"].to_numpy(float), index=slots)
                pue_done = True
            except ForecastError as exc:
                notes.append(f"{site.id}: PUE model choice failed ({exc}); used weather "
                             "persistence")
    if pue_done:
        weather = None
    elif future_modelled is not None:
        weather = future_modelled.reindex(slots)[["temperature_c", "relative_humidity_pct"]]
        weather_note = "modelled climatological weather"
    else:
        weather = _persistence_weather(hist, slots)
        weather_note = "weather persistence (same hour, latest day)"
        if weather.isna().any().any():
            weather = None
            weather_note = "no weather: PUE at the model's free-cooling floor"
    if pue_done:
        pass
    elif weather is None or weather.isna().any().any():
        pue = pd.Series(site.pue.pue_min, index=slots)
        notes.append(f"{site.id}: PUE: {weather_note}")
        pue_fc = pd.DataFrame({c: pue.to_numpy() for c in
                               ("mean", "lo_80", "hi_80", "lo_95", "hi_95")},
                              index=slots.rename("ts"))
        pue_fc["hi_80"] = pue_fc["hi_95"] = site.pue.pue_max
    else:
        sigma = 0.0 if future_modelled is not None else PERSISTENCE_TEMPERATURE_ERROR_C
        t = pd.Series(weather["temperature_c"].to_numpy(float), index=slots)
        rh = pd.Series(weather["relative_humidity_pct"].to_numpy(float), index=slots)
        pue = pue_from_weather(t, rh, site.pue)
        pue.index = slots
        cols = {"mean": pue.to_numpy(float)}
        for col, z in (("lo_80", -1.2816), ("hi_80", 1.2816), ("lo_95", -1.96),
                       ("hi_95", 1.96)):
            cols[col] = pue_from_weather(t + z * sigma, rh, site.pue).to_numpy(float)
        pue_fc = pd.DataFrame(cols, index=slots.rename("ts"))
    if not pue_done:
        pue_fc.attrs["model"] = f"pue_from_weather ({weather_note})"
        chosen["pue"] = {"model": pue_fc.attrs["model"], "metric": None,
                         "validation_error": None, "fallback": weather_note}

    signals = pd.DataFrame({
        "carbon_intensity_g_per_kwh": ci_fc["mean"].clip(lower=0.0).to_numpy(),
        "pue": pue.to_numpy(float),
        "pue_hi_95": np.maximum(pue_fc["hi_95"].to_numpy(float), pue.to_numpy(float)),
        "green_surplus_kw": gs_fc["mean"].to_numpy() * site.green_surplus_max_kw,
        "green_surplus_index": gs_fc["mean"].to_numpy(),
    }, index=slots)
    gs_long = _long(site.id, "green_surplus_index", gs_fc, issued_at)
    if p_surplus is not None:
        # P(green-surplus index > 0) [-] of each hour (issue 35 item 5), on the index's rows
        gs_long["p_surplus"] = np.asarray(p_surplus, float)
    long = pd.concat([_long(site.id, "carbon_intensity_g_per_kwh", ci_fc, issued_at),
                      gs_long, _long(site.id, "pue", pue_fc, issued_at)], ignore_index=True)
    return SiteForecast(site.id, signals, long, str(quality), notes, ages, reasons, chosen)


def build_problem(sites: list[Site], workload: Workload, forecasts: dict[str, SiteForecast],
                  slots: pd.DatetimeIndex, running: list[Any] | None = None,
                  slot_minutes: int = 60) -> PlanningProblem:
    """Assemble the planner's input from the sites that have forecasts.

    ``slots`` are ``slot_minutes`` apart (60 by default; 30 or 15); the hourly forecasts hold
    in every slot of their hour.

    Returns
    -------
    PlanningProblem
        ``signals`` indexed by (site, slot) with carbon_intensity_g_per_kwh, pue,
        green_surplus_kw and pue_hi_95 (the PUE facility power caps are planned against).
    """
    use = [s for s in sites if s.id in forecasts]
    frames = []
    for s in use:
        f = forecasts[s.id].signals[["carbon_intensity_g_per_kwh", "pue", "green_surplus_kw",
                                     "pue_hi_95"]]
        f = f.copy()
        f.index = pd.MultiIndex.from_product([[s.id], f.index], names=["site", "slot"])
        frames.append(f)
    if not frames:
        raise InputError("no site has signals for this date; nothing can be planned")
    have = {s.id for s in use}
    return PlanningProblem(sites=use, jobs=list(workload.jobs),
                           inference=list(workload.inference), slots=slots,
                           signals=pd.concat(frames),
                           running=[r for r in running or [] if r.site in have],
                           slot_minutes=slot_minutes)


def result_rows(result: PlanResult) -> dict[str, list[dict[str, Any]]]:
    """Placements, inference and unplaced rows of a result as JSON-ready dicts."""
    return {
        # a placement's domains only for a topology-bound gang (Placement.domains)
        "placements": [{k: v for k, v in jsonable(p).items() if k != "domains" or v}
                       for p in result.placements],
        "inference": [jsonable(i) for i in result.inference],
        "unplaced": [jsonable(u) for u in result.unplaced],
        # jobs left Pending for a later run (also in "unplaced", reason DeferredPastHorizon)
        "deferred": [jsonable(u) for u in result.deferred],
    }


def workload_rows(workload: Workload) -> dict[str, list[dict[str, Any]]]:
    """The work a plan was built for, as JSON-ready rows (read by ``carbonsched.report``).

    ``jobs``: job_id, tenant, kind, gpu_type, gpus, duration_hours, power_per_gpu_kw [kW];
    ``inference_power``: per (area, gpu_type) its power_per_gpu_kw [kW]: one row when the
    power is the same in every hour, else one row per hour (with ``hour``).
    """
    by_hour: dict[tuple[str, str], dict[Any, float]] = {}
    for d in workload.inference:
        by_hour.setdefault((d.area, d.gpu_type), {})[d.hour] = float(d.power_per_gpu_kw)
    power_rows: list[dict[str, Any]] = []
    for (a, g), kws in by_hour.items():
        if len(set(kws.values())) == 1:
            power_rows.append({"area": a, "gpu_type": g, "power_per_gpu_kw": kws.popitem()[1]})
        else:
            power_rows += [{"area": a, "gpu_type": g, "hour": jsonable(h), "power_per_gpu_kw": kw}
                           for h, kw in sorted(kws.items())]
    return {
        "jobs": [{"job_id": j.id, "tenant": j.tenant, "kind": str(j.kind),
                  "gpu_type": j.gpu_type, "gpus": j.gpus, "duration_hours": j.duration_hours,
                  "duration_minutes": j.duration_minutes,
                  "power_per_gpu_kw": float(j.power_per_gpu_kw),
                  **({"gpu_share": j.gpu_share} if j.gpu_share != 1.0 else {})}
                 for j in workload.jobs],
        "inference_power": power_rows,
    }


def site_summary(problem: PlanningProblem, result: PlanResult) -> list[dict[str, Any]]:
    """Per site: job and inference GPU-hours [GPU·h], facility energy [kWh], emissions [kg CO2e].

    ``jobs`` counts the jobs with work at the site: a job in pieces once per site it runs at.
    """
    rows: dict[str, dict[str, Any]] = {
        s.id: {"site": s.id, "role": str(s.role), "job_gpu_hours": 0.0,
               "inference_gpu_hours": 0.0, "energy_kwh": 0.0, "emissions_kg": 0.0, "jobs": 0}
        for s in problem.sites}
    jobs_at: dict[str, set[str]] = {}
    for p in result.placements:
        r = rows[p.site]
        r["job_gpu_hours"] += p.gpus * (p.end - p.start) / HOUR
        r["energy_kwh"] += p.energy_kwh
        r["emissions_kg"] += p.emissions_kg
        jobs_at.setdefault(p.site, set()).add(p.job_id)
    for site, ids in jobs_at.items():
        rows[site]["jobs"] = len(ids)
    for i in result.inference:
        r = rows[i.site]
        r["inference_gpu_hours"] += i.gpus
        r["energy_kwh"] += i.energy_kwh
        r["emissions_kg"] += i.emissions_kg
    return list(rows.values())


def check_workload_fits_catalog(workload: Workload, catalog: Catalog) -> None:
    """Refuse work that names sites or user areas the catalog does not define.

    A jobs file built for another catalog would otherwise plan "successfully" with every job
    unplaced; this names the first offending job or demand and the catalog to use.

    Raises
    ------
    InputError
        A job's ``allowed_sites`` or an inference demand's ``area`` is not in ``catalog``.
    """
    known = set(catalog.site_ids)
    bad_jobs = [j for j in workload.jobs if set(j.allowed_sites) - known]
    if bad_jobs:
        j = bad_jobs[0]
        unknown = sorted(set(j.allowed_sites) - known)
        raise InputError(
            f"{len(bad_jobs)} job(s) name sites that catalog {catalog.name!r} does not define, "
            f"first job {j.id!r}: {', '.join(unknown)}; plan them with the catalog the workload "
            "was built for (--catalog), e.g. `carbonsched workload from-traces --catalog "
            f"{catalog.name}` builds work for this one")
    bad_areas = sorted({d.area for d in workload.inference} - set(catalog.areas))
    if bad_areas:
        raise InputError(
            f"inference demand for user area(s) {', '.join(bad_areas)} that catalog "
            f"{catalog.name!r} does not define (its areas: {', '.join(sorted(catalog.areas))}); "
            "use the catalog the workload was built for (--catalog)")


@dataclass
class DailyPlan:
    """Everything one planning day produced."""

    document: dict[str, Any]
    problem: PlanningProblem
    result: PlanResult
    baseline: PlanResult
    forecasts: pd.DataFrame
    summary: list[dict[str, Any]]


ExogenousLoader = Callable[[Site, pd.Timestamp, int, pd.Timestamp],
                           tuple[pd.DataFrame, dict[str, Any]]]
"""``exogenous(site, issued_at, horizon_hours, history_start) -> (table, info)``: the forecasts
a site's providers publish, with their publication times
(:meth:`carbonsched.adapters.signals.live.LiveSignals.exogenous`)."""

OBSERVED_WEATHER_CAVEAT = (
    "the weather features are trained and validated on the OBSERVED weather of the history, "
    "used as if forecast 24 h ahead (no archive of the provider's past weather forecasts): "
    "optimistic in validation; the plan's hours read the provider's forecast")
"""Caveat of a live exogenous table whose weather history is the observed weather."""


def live_exogenous(site: Site, history: pd.DataFrame, issued_at: pd.Timestamp,
                   published: pd.DataFrame, info: dict[str, Any]) -> pd.DataFrame | None:
    """The exogenous table of a live plan: what the providers published, plus a weather history.

    Parameters
    ----------
    site
        The site.
    history
        The site's signal frame (the weather columns of its hours before ``issued_at`` are
        read; nothing at or after it).
    issued_at
        The issue time (UTC).
    published
        :meth:`carbonsched.adapters.signals.live.LiveSignals.exogenous`'s table: each value
        with its publication time.
    info
        Its ``info`` (``sources`` names the providers).

    Returns
    -------
    DataFrame or None
        The long table of :mod:`carbonsched.forecasts.exogenous` (``attrs["source"]`` names the
        providers; ``attrs["caveat"]`` :data:`OBSERVED_WEATHER_CAVEAT` when a weather forecast
        came with a weather history), ``None`` when nothing was published. Where the provider
        published a weather forecast, the history's observed weather of each weather feature
        the ridges regress on (temperature, wind speed, cloud cover, irradiance) is added as if
        published 24 h before its hour (hours before ``issued_at`` only), so the models have a
        past to learn the feature on. Not the humidity: with it, the PUE model on the observed
        weather would become a "published PUE" equal to the PUE history it is validated on;
        the PUE model on the provider's forecast weather is offered only with an archive of
        past forecasts (named in ``forecast_models`` otherwise).

    Raises
    ------
    InputError
        A malformed table (an unknown feature, naive times).
    """
    from carbonsched.forecasts.exogenous import SIGNAL_FEATURES, check_table, from_issue_layout

    if published is None or not len(published):
        return None
    table = check_table(published, f"site {site.id}: provider forecasts")
    parts = [table]
    caveat = None
    # the regressors of the ridges only: relative humidity feeds the PUE model alone, and the
    # PUE model on the OBSERVED weather is the PUE history itself, so a "published PUE" on it
    # would be validated against its own target (zero error)
    regressors = {f for s in ("carbon_intensity_g_per_kwh", "green_surplus_index")
                  for f in SIGNAL_FEATURES[s]}
    weather = [f for f in ("temperature_c", "wind_speed_m_per_s", "cloud_cover_pct",
                           "irradiance_w_per_m2")
               if f in set(table["feature"]) and f in history and f in regressors]
    if weather:
        past = history.loc[history.index < issued_at, weather]
        parts.append(from_issue_layout(past, {c: c for c in weather}, 24, source="history"))
        caveat = OBSERVED_WEATHER_CAVEAT
    out = check_table(pd.concat(parts, ignore_index=True), f"site {site.id}: exogenous")
    names = [f"{s['provider']} {s['what']}" for s in info.get("sources", [])]
    out.attrs.update(source="providers: " + ", ".join(names), caveat=caveat)
    return out


def exogenous_note(rows: dict[str, dict[str, Any]]) -> str | None:
    """One note that counts and names the provider forecasts a live plan could not use.

    Parameters
    ----------
    rows
        Per site, :meth:`carbonsched.adapters.signals.live.LiveSignals.exogenous`'s ``info``.

    Returns
    -------
    str or None
        ``None`` when every provider forecast asked for was read.
    """
    bad = [(sid, u) for sid, i in rows.items() for u in i.get("unavailable", [])]
    late = [(sid, u) for sid, i in rows.items() for u in i.get("not_used", [])]
    if not bad and not late:
        return None
    parts = []
    if bad:
        parts.append(f"{len(bad)} provider forecast(s) UNAVAILABLE, so those models ran on "
                     "history: " + "; ".join(f"{sid} {u['provider']} {u['what']} "
                                             f"({u['reason']})" for sid, u in bad))
    if late:
        parts.append(f"{len(late)} not used: " + "; ".join(
            f"{sid} {u['provider']} {u['what']} ({u['why']})" for sid, u in late))
    return "exogenous forecasts: " + "; ".join(parts)


SignalLoader = Callable[..., tuple[pd.DataFrame, dict[str, Any]]]
"""``loader(site, data_dir, start, end) -> (frame, meta)`` with the contract of
:func:`carbonsched.adapters.signals.load_site_signals` (the default, reading files);
:meth:`carbonsched.adapters.signals.live.LiveSignals.load_site_signals` reads providers."""


def gather_forecasts(catalog: Catalog, data_dir: Path | None, issued_at: pd.Timestamp,
                     horizon_hours: int, progress: Progress = _quiet,
                     loader: SignalLoader | None = None,
                     provenance: dict[str, Any] | None = None,
                     exogenous: ExogenousLoader | None = None,
                     ) -> tuple[dict[str, SiteForecast], list[str], set[str]]:
    """Load each site's history and forecast it; sites without usable data are left out.

    ``loader`` replaces the file-based :func:`load_site_signals` (the provider seam); when
    ``provenance`` is a dict, the loader's ``meta["degraded"]`` entries (with the planned hours)
    are appended to ``provenance["degraded"]`` and each site's freshness (``origin``,
    ``newest_value_at``, ``signal_age_hours``, ``providers``) goes to ``provenance["sites"]``.
    ``exogenous`` (the live plan: :meth:`~carbonsched.adapters.signals.live.LiveSignals.
    exogenous`) fetches the forecasts each site's providers publish; they become the models'
    exogenous table (:func:`live_exogenous`), and what was asked, read and unavailable goes to
    ``provenance["exogenous"]`` per site.

    Returns
    -------
    (dict, list, set)
        Forecasts by site id, notes, and the signal qualities seen.
    """
    forecasts: dict[str, SiteForecast] = {}
    notes: list[str] = []
    qualities: set[str] = set()
    start = issued_at - pd.Timedelta(days=FORECAST_HISTORY_DAYS)
    end = issued_at + horizon_hours * HOUR
    for site in catalog.sites:
        progress(f"forecasting {site.id} ({site.zone})")
        frame, meta = (loader or load_site_signals)(site, data_dir, start, end)
        if provenance is not None:
            provenance.setdefault("degraded", []).extend(
                _degraded_rows(meta.get("degraded", []), issued_at, horizon_hours))
            provenance.setdefault("sites", {})[site.id] = {
                k: meta.get(k) for k in ("origin", "newest_value_at", "signal_age_hours",
                                         "providers")}
            notes.extend(n for n in meta.get("notes", []) if n.startswith("DEGRADED "))
        # what the readers noted (missing hours, invalid values, quarantined rows) reaches the plan
        notes.extend(f"{site.id}: {n}" for n in meta.get("notes", [])
                     if not n.startswith("DEGRADED ") and plan_uses(n))
        modelled = meta.get("signal_quality") == SignalQuality.MODELLED
        future = frame[frame.index >= issued_at] if modelled else None
        exog = None
        if exogenous is not None:
            published, info = exogenous(site, issued_at, horizon_hours, start)
            exog = live_exogenous(site, frame, issued_at, published, info)
            if provenance is not None:
                provenance.setdefault("exogenous", {})[site.id] = info
        try:
            fc = forecast_site(site, frame, issued_at, horizon_hours, meta, future,
                               exogenous=exog)
        except ForecastError as exc:
            notes.append(f"site {site.id} left out: {exc}")
            continue
        forecasts[site.id] = fc
        notes.extend(fc.notes)
        qualities.add(fc.signal_quality)
    return forecasts, notes, qualities


def stale_signals_note(degraded: list[dict[str, Any]]) -> str | None:
    """One note that counts and names the sites planned on stale cached signals.

    Parameters
    ----------
    degraded : list of dict
        The loader's ``meta["degraded"]`` entries of every site (``site``, ``signal``,
        ``provider``, ``last_good``, ``stale_age_hours``, ``reason``).

    Returns
    -------
    str or None
        ``None`` when every provider answered.
    """
    if not degraded:
        return None
    sites = list(dict.fromkeys(d["site"] for d in degraded))

    def one(d: dict[str, Any]) -> str:
        age = d.get("stale_age_hours")
        newest = d.get("last_good")
        cached = "nothing cached" if newest is None else (
            f"newest cached {newest}" + (f", {age:.1f} h old" if age is not None else ""))
        return f"{d['site']} {d['signal']} ({d['provider']}: {cached})"

    return (f"signals: STALE for {len(sites)} site(s) ({len(degraded)} signal group(s)): a "
            "provider failed or could not be reached in time, so these are planned on the "
            "cached signals: " + "; ".join(one(d) for d in degraded))


def _degraded_rows(rows: list[dict[str, Any]], issued_at: pd.Timestamp,
                   horizon_hours: int) -> list[dict[str, Any]]:
    """A loader's degraded groups with the plan hours that rest on them."""
    end = issued_at + horizon_hours * HOUR
    return [{**r, "planned_from": issued_at.isoformat(), "planned_to": end.isoformat()}
            for r in rows]


def history_baselines(cat: Any, events: list[Any],
                      load_history: Callable[[str, pd.Timestamp, pd.Timestamp], pd.Series]
                      | None) -> tuple[dict[Any, float], dict[str, Any], list[str]]:
    """Baselines from recorded load for the events at sites whose agreement names one.

    Per site: :func:`carbonsched.pipeline.flex.event_baselines` on the site's time zone
    (``Site.timezone``) over the recorded load of the ``BASELINE_LOOKBACK_DAYS`` (and one day
    more: a prior local day across a daylight-saving change lies up to an hour further back
    in UTC) before its first event. A site without history (no
    ``load_history``, a store that fails, too few days) falls back to the plan's own
    uncommitted load, with a note naming the site, the method and why.

    Returns
    -------
    baselines, methods, notes
        As for :func:`~carbonsched.pipeline.flex.commit_events` (``baselines``,
        ``baseline_methods``) and the notes for the plan.
    """
    from carbonsched.errors import CarbonschedError
    from carbonsched.flex import BASELINE_LOOKBACK_DAYS, BaselineMethod
    from carbonsched.pipeline.flex import event_baselines

    agreements = {s.id: s.meta["grid_agreement"] for s in cat.sites
                  if s.meta.get("grid_agreement") is not None}
    zones = {s.id: s.timezone for s in cat.sites}
    baselines: dict[Any, float] = {}
    methods: dict[str, Any] = {}
    notes: list[str] = []
    sites = sorted({ev.site for ev in events if ev.site in agreements
                    and agreements[ev.site].baseline_method
                    is not BaselineMethod.PLAN_UNCOMMITTED})
    for site in sites:
        evs = [ev for ev in events if ev.site == site]
        method = agreements[site].baseline_method.value
        try:
            if load_history is None:
                raise CarbonschedError("no recorded load was given to compute it from")
            t0 = min(ev.start for ev in evs) - pd.Timedelta(days=BASELINE_LOOKBACK_DAYS + 1)
            series = load_history(site, t0, max(ev.start for ev in evs))
            b, m, n = event_baselines({site: series}, evs, agreements, zones)
        except CarbonschedError as exc:
            notes.append(f"grid events at {site}: the agreement's {method} baseline could not "
                         f"be computed ({exc}); its events are measured against the plan's "
                         "own uncommitted load (plan-uncommitted) instead")
            continue
        baselines.update(b)
        methods.update(m)
        notes.extend(n)
    return baselines, methods, notes


def run_daily_plan(
    date: str,
    catalog: str | Path = "china-eastdata-westcompute",
    workload: Workload | None = None,
    data_dir: Path | None = None,
    solver: str = "highs",
    time_limit_s: float = 60.0,
    horizon_hours: int = 24,
    progress: Progress = _quiet,
    signal_loader: SignalLoader | None = None,
    running: list[Any] | None = None,
    slot_minutes: int = 60,
    replay_from: str | None = None,
    grid_events: list[Any] | None = None,
    power_caps: bool | None = None,
    fairness: float | None = None,
    issued_at: pd.Timestamp | None = None,
    warm_start: Any = None,
    exogenous_loader: ExogenousLoader | None = None,
    load_history: Callable[[str, pd.Timestamp, pd.Timestamp], pd.Series] | None = None,
) -> DailyPlan:
    """Run one planning day and return the plan document and its parts.

    Parameters
    ----------
    date
        The day planned, ``YYYY-MM-DD``; issued at its 00:00 UTC.
    catalog
        Catalog name or TOML path.
    workload
        Jobs and inference demand; ``None`` uses the catalog's deterministic demo workload.
    data_dir
        Folder of the real public data (for measured catalogs); ``None`` uses the settings
        (``CARBONSCHED_DATA_DIR``, default ``../shared/data``).
    solver
        ``highs`` (default) or ``cbc``.
    time_limit_s
        Solver time limit. [s]
    horizon_hours
        Slots planned. [h]
    progress
        Callable receiving status lines.
    signal_loader
        Replaces the file readers (e.g. ``LiveSignals(...).load_site_signals``); the plan then
        lists ``degraded`` sites, signals and hours (empty when every provider answered) and
        ``provider_signals`` (per site: newest value, its age in hours, providers asked).
    running
        Work already running or committed (:class:`~carbonsched.domain.RunningWork`) that holds
        GPUs and power in the horizon (the rolling runner's committed pieces).
    slot_minutes
        The planner's slot grid: 60 (default), 30 or 15 minutes
        (:attr:`~carbonsched.plan.sets.PlanningProblem.slot_minutes`); the document records
        it as ``slot_minutes``.
    replay_from
        A past day (``YYYY-MM-DD``) whose real signals and work are planned as if they were
        ``date``'s (:mod:`carbonsched.pipeline.replayed`): the history is moved forward by the
        whole days from it to ``date``, the workload (the source day's; ``None``: its demo
        day) by the same; the document's ``signal_quality`` is ``replayed`` and its ``replay``
        block and first note say from which day. ``None`` (default): no replay.
    grid_events
        Announced grid events (:class:`carbonsched.flex.GridEvent`): the plan commits a
        reduction for each within its flexibility band and re-plans with it reserved
        (:func:`carbonsched.pipeline.flex.commit_events`); the document's ``flexibility``
        block accounts for it per event and hour, and every planned shortfall is a note.
    load_history
        ``(site, t0, t1) -> Series``: the site's recorded hourly facility power in
        ``[t0, t1)`` [kW] (:func:`carbonsched.pipeline.flex.recorded_site_load`), for the
        events at sites whose grid agreement names a ``prior-days-*`` baseline
        (:func:`carbonsched.pipeline.flex.event_baselines`). Without it, or with too little
        history, those events are measured against the plan's own uncommitted load and a
        note says why.
    power_caps
        Run jobs whose window has room at a GPU power cap
        (:func:`carbonsched.plan.caps.choose_power_caps`); ``None``: the setting
        ``power_caps``.
    issued_at
        The issue time (tz-aware, a whole hour of ``date`` in UTC): the horizon starts there and
        the forecasts use only observations before it. ``None`` (default): ``date`` 00:00 UTC.
        A rolling service that runs every few hours issues its runs at other hours.
    warm_start
        A plan to start the solver from (:class:`~carbonsched.plan.solve.WarmStart`: the
        previous rolling run's placements); ``None``: a cold start. The document's
        ``solver.warm_start`` says which, and why a warm start was not used (the rolling step
        also notes it).
    fairness
        Tenants' fair shares against carbon, 0..1 (:attr:`carbonsched.config.Settings.
        fairness`; :mod:`carbonsched.plan.fairness`); ``None``: the setting. [-]
    exogenous_loader
        The forecasts the providers publish (``LiveSignals(...).exogenous``, with
        ``signal_loader``): features and candidates of the carbon-intensity, green-surplus and
        PUE models (:func:`gather_forecasts`); per site, what was read and what was unavailable
        is in ``provider_signals[site]["exogenous"]`` and one note counts and names the
        unavailable ones (those models ran on history). Not used with ``replay_from`` (the
        providers' forecasts are of today, not of the replayed day; a note says so).

    Returns
    -------
    DailyPlan
        ``document`` has the keys of the ``--out`` JSON (see README).

    Raises
    ------
    InputError
        Unknown catalog, no site with data for the date, malformed workload, a horizon outside
        1..:data:`MAX_HORIZON_HOURS`, a time limit that is not > 0 or a slot length other than
        60, 30 or 15 minutes, grid events on a grid finer than an hour (checked before any
        forecasting); with ``replay_from``: a day not
        before ``date``, a catalog of modelled signals, or a workload with no work on that day.
    PlanningError
        The solver is unavailable.
    """
    from carbonsched.workload.files import demo_workload

    if not 1 <= horizon_hours <= MAX_HORIZON_HOURS:
        raise InputError(f"horizon of {horizon_hours} h is outside 1..{MAX_HORIZON_HOURS} h; "
                         "the daily plan is day-ahead: use --hours 24 (the default)")
    if not time_limit_s > 0:
        raise InputError(f"solver time limit must be > 0 s, got {time_limit_s}; "
                         "e.g. --time-limit 60")
    slot_minutes = check_slot_minutes(slot_minutes)
    if grid_events and slot_minutes != 60:
        # each event hour's baseline, band and commitment are read per hour of the hourly grid
        raise InputError(f"grid events are committed on the hourly grid; this plan's grid is "
                         f"{slot_minutes}-minute: plan the {len(grid_events)} grid event(s) "
                         "with --slot-minutes 60 (the default), or drop --grid-events")
    if data_dir is None:
        from carbonsched.config import get_settings

        data_dir = get_settings().data_dir
    day0 = day_start_utc(date)
    if issued_at is None:
        issued_at = day0
    else:
        issued_at = require_aware(issued_at, "issued_at").tz_convert("UTC")
        if issued_at.floor("h") != issued_at or issued_at.floor("D") != day0:
            raise InputError(f"issue time {issued_at.isoformat()} is not a whole hour of "
                             f"{date} (UTC); a run is issued on the hour, e.g. "
                             f"{date}T06:00:00Z")
    cat = load_catalog(catalog)
    replay = ReplayShift.between(replay_from, issued_at.date()) if replay_from else None
    if replay is not None and cat.signal_quality == SignalQuality.MODELLED:
        raise InputError(f"catalog {cat.name!r} has modelled signals, which plan any date: "
                         "plan the day itself (drop --replay-from); a replay is for catalogs "
                         "of real data that ends in the past, e.g. --catalog global")
    is_demo = workload is None
    if workload is None:
        workload = demo_workload(cat, (replay.source if replay else issued_at).strftime(
            "%Y-%m-%d"))
    if replay is not None:
        workload = shift_workload(workload, replay, horizon_hours,
                                  "the demo day" if is_demo else "the workload (--jobs)")
    check_workload_fits_catalog(workload, cat)
    # templates are the catalog's: applied (and an unknown name refused) before any solve
    workload = Workload(apply_templates(workload.jobs, cat.templates), workload.inference)
    slots = hourly_slots(issued_at, horizon_hours) if slot_minutes == 60 else pd.date_range(
        issued_at, periods=horizon_hours * 60 // slot_minutes, freq=f"{slot_minutes}min",
        name="slot")
    # a tiny real solve before any forecasting: a solver that cannot run is known at once
    progress(f"probing the {solver} solver")
    solver_used, solver_note = resolve_solver(solver)
    provenance: dict[str, Any] = {"degraded": [], "sites": {}}
    loader = signal_loader
    if replay is not None:
        loader = ReplayedSignals(replay, signal_loader).load_site_signals
    exo_loader = exogenous_loader if replay is None else None
    forecasts, notes, qualities = gather_forecasts(
        cat, data_dir, issued_at, horizon_hours, progress, loader,
        provenance if signal_loader is not None else None, exo_loader)
    if not forecasts:
        left = [n for n in notes if n.startswith("site ") and " left out: " in n] or notes
        why = left[0] if left else "no site was forecast"
        more = f" (and {len(left) - 1} more site(s) alike)" if len(left) > 1 else ""
        day = f"{issued_at:%Y-%m-%d}" + (
            f" (replaying {replay.source:%Y-%m-%d})" if replay is not None else "")
        fix = ("; give --replay-from a day the data covers (the README's coverage table)"
               if replay is not None else "")
        raise InputError(f"no site has signals for {day}; nothing can be "
                         f"planned: {why}{more}{fix}")
    if signal_loader is not None and (stale := stale_signals_note(provenance["degraded"])):
        notes.insert(0, stale)  # counted and named where the user reads the plan
    if exo_loader is not None and (exo := exogenous_note(provenance.get("exogenous", {}))):
        notes.insert(0, exo)
    elif exogenous_loader is not None and replay is not None:
        notes.insert(0, "exogenous forecasts: not used on a replayed day (the providers "
                        "publish today's forecasts, not the replayed day's); the models ran "
                        "on history")
    from carbonsched.config import get_settings
    from carbonsched.plan.caps import load_power_caps

    settings = get_settings()
    cap_table = load_power_caps()
    cap_choices: dict[str, Any] = {}
    use_caps = power_caps if power_caps is not None else settings.power_caps
    problem = build_problem(cat.sites, workload, forecasts, slots, running, slot_minutes)
    if fairness is None:
        from carbonsched.config import get_settings

        fairness = get_settings().fairness
    if cat.tenants and fairness > 0:
        # tenants share binding capacity by weighted DRF (carbonsched.plan.fairness)
        problem = dataclasses.replace(problem, tenants=dict(cat.tenants), fairness=fairness)
    grid = f"{len(slots)} h" if slot_minutes == 60 else \
        f"{len(slots)} slots of {slot_minutes} min"
    progress(f"solving: {len(problem.jobs)} jobs, {len(problem.inference)} inference demands, "
             f"{len(problem.sites)} sites x {grid} with {solver}")
    if use_caps:
        from carbonsched.pipeline.flex import plan_with_caps

        problem, result, cap_choices, cap_notes = plan_with_caps(
            problem, cap_table,
            lambda q: solve_plan(q, solver=solver, time_limit_s=time_limit_s,
                                 start=warm_start))
        notes.extend(cap_notes)
    else:
        result = solve_plan(problem, solver=solver, time_limit_s=time_limit_s,
                            start=warm_start)
    flexibility = None
    if grid_events:
        from carbonsched.pipeline.flex import commit_events, flexibility_block

        progress(f"committing {len(grid_events)} grid event(s) and re-planning")
        baselines, methods, base_notes = history_baselines(cat, list(grid_events),
                                                           load_history)
        notes.extend(base_notes)
        cp = commit_events(problem, list(grid_events),
                           lambda q: solve_plan(q, solver=solver, time_limit_s=time_limit_s,
                                                start=warm_start),
                           caps=cap_table, capped=set(cap_choices), baseline_result=result,
                           baselines=baselines, baseline_methods=methods)
        problem, result = cp.problem, cp.result
        flexibility = flexibility_block(cp)
        notes.extend(cp.notes)
    from carbonsched.plan.flex import flex_band

    band = flex_band(problem, result, settings.flex_notice_hours, settings.flex_event_hours,
                     caps=cap_table, capped=set(cap_choices))
    progress("scoring the carbon-agnostic baseline")
    baseline = agnostic_plan(problem)
    plan_score = score_plan(problem, result, flex=band)
    if plan_score.flex_overpromise:
        notes.append(f"flexibility: the stated band is more than the jobs' own terms can shed "
                     f"in {plan_score.flex_overpromise} site-hour(s) (recount); do not commit "
                     "those hours")
    base_score = score_plan(problem, baseline)
    if solver_note:
        notes.insert(0, f"solver: {solver_note}")
    if is_demo:
        notes.insert(0, "workload: the catalog's generated DEMO day, not real jobs (give "
                     "--jobs FILE to plan real work)")
    if slot_minutes != 60:
        notes.append(f"slots: a {slot_minutes}-minute grid; starts are decided on it, each "
                     "slot takes its hour's forecast (carbon intensity, PUE, surplus) and "
                     "hourly inference demand holds in every slot of its hour")
    notes.extend(result.notes)  # horizon end: continued signals, deferrals, running work
    if result.solver.method == "greedy":
        left = result.solver.greedy_unplaced
        notes.append(f"solver: no incumbent within --time-limit {time_limit_s:g} s; the plan is "
                     "the greedy fallback's (no optimality claimed)"
                     + (f"; it left {left} job(s) unplaced that passed the pre-check (an exact "
                        "solve with a longer --time-limit may place them)" if left else "")
                     + (f"; it deferred {len(result.deferred)} job(s) to a later run, as the "
                        "MILP's objective would" if result.deferred else ""))
    # the plan is as good as its weakest site's signals:
    # modelled < degraded < estimated < measured
    quality = next((q for q in (SignalQuality.MODELLED, SignalQuality.DEGRADED,
                                SignalQuality.ESTIMATED) if q in qualities),
                   SignalQuality.MEASURED)
    replay_block = None
    if replay is not None:  # stated first, in words, where the user reads the plan
        replay_block = {**replay.describe(), "underlying_signal_quality": str(quality)}
        notes.insert(0, replay_sentence(replay_block))
    doc: dict[str, Any] = {
        "plan_id": uuid.uuid4().hex,
        "date": issued_at.strftime("%Y-%m-%d"),
        "catalog": cat.name,
        "signal_quality": SIGNAL_QUALITY_REPLAYED if replay is not None else str(quality),
        "site_signal_quality": {sid: f.signal_quality for sid, f in forecasts.items()},
        "site_signal_age_hours": {sid: f.signal_age_hours for sid, f in forecasts.items()},
        "issued_at": jsonable(issued_at),
        "horizon_hours": horizon_hours,
        "slot_minutes": slot_minutes,
        # source (demo or file), then the work itself: jobs and inference power per area
        "workload": {"source": "demo" if is_demo else "file", **workload_rows(workload)},
        "sites": [s.id for s in problem.sites],
        "site_roles": {s.id: str(s.role) for s in problem.sites},
        "solver": {
            "name": result.solver.name,
            "status": str(result.status),
            "mip_gap": None if result.solver.mip_gap is None or
            not np.isfinite(result.solver.mip_gap) else float(result.solver.mip_gap),
            "seconds": float(result.solver.seconds),
            "objective": result.solver.objective,
            "bound": result.solver.bound,
            "method": getattr(result.solver, "method", None),
            "infeasible_family": getattr(result.solver, "infeasible_family", None),
            "note": result.solver.note,
            "violations": result.solver.violations,
            "greedy_unplaced": result.solver.greedy_unplaced,
            "requested": solver,
        },
        **result_rows(result),
        "totals": {
            "energy_kwh": float(plan_score.energy_kwh),
            "emissions_kg": float(plan_score.emissions_kg),
            "baseline_emissions_kg": float(base_score.emissions_kg),
            "surplus_absorbed_kwh": float(plan_score.surplus_absorbed_kwh),
            "baseline_energy_kwh": float(base_score.energy_kwh),
            **{k: float(result.totals[k]) for k in ("carbon_only_emissions_kg",
                                                    "fairness_cost_kg") if k in result.totals},
            **({"fairness_not_applied_tenants": int(result.totals[
                "fairness_not_applied_tenants"])}
               if "fairness_not_applied_tenants" in result.totals else {}),
        },
        **({"tenants": result.tenants} if result.tenants else {}),
        "site_hours": site_hour_power(problem, result, band),
        "running": [{"job_id": r.job_id, "site": r.site, "gpu_type": r.gpu_type,
                     "gpus": int(r.gpus), "it_power_kw": float(r.it_power_kw),
                     "start": None if r.start is None else jsonable(r.start),
                     "end": jsonable(r.end), "gpu_index": r.gpu_index}
                    for r in problem.running],
        "baseline": {
            "policy": "agnostic",
            "definition": BASELINE_DEFINITION,
            "placed": len(baseline.placements),
            **result_rows(baseline),  # placements, inference, unplaced (read by the report)
        },
        "baseline_unplaced": [jsonable(u) for u in baseline.unplaced],
        "notes": notes,
        # per site and signal: the model chosen on rolling validation and its error
        "forecast_models": {sid: f.models for sid, f in forecasts.items()},
    }
    if replay_block is not None:
        doc["replay"] = replay_block
    if flexibility is not None:
        doc["flexibility"] = flexibility
    if signal_loader is not None:  # the provider seam (issue 10)
        doc["degraded"] = [{**d, "site_planned": d["site"] in forecasts}
                           for d in provenance["degraded"]]
        doc["provider_signals"] = provenance["sites"]
        for sid, info in provenance.get("exogenous", {}).items():
            doc["provider_signals"].setdefault(sid, {})["exogenous"] = info
    # each placement carries its job's own deadline, for the backend (Slurm --deadline,
    # Kubernetes activeDeadlineSeconds); dispatch falls back to the planned end + slack without it
    deadlines = {j.id: jsonable(j.deadline) for j in workload.jobs}
    # and its payload (what it runs, templates applied), for the backend; absent: no payload
    payloads = {j.id: j.payload.to_dict() for j in workload.jobs if j.payload is not None}
    # a topology-bound gang's span, for the backend (Slurm --switches, Kueue TAS)
    spans = {j.id: j.max_domains for j in workload.jobs if j.max_domains is not None}
    for p in doc["placements"]:
        p["deadline"] = deadlines.get(p["job_id"])
        if p["job_id"] in spans:
            p["max_domains"] = spans[p["job_id"]]
        if p["job_id"] in payloads:
            p["payload"] = payloads[p["job_id"]]
    summary = site_summary(problem, result)
    fc_long = (pd.concat([f.long for f in forecasts.values()], ignore_index=True)
               if forecasts else pd.DataFrame())
    document = jsonable(doc)
    read_plan_document(document, "the plan document built")  # the documented shape, always
    return DailyPlan(document, problem, result, baseline, fc_long, summary)
