"""Site backtest: the daily plan's own forecasting path, scored on every site of a catalog.

For each day of a period and each site, the forecasts are issued at 00:00 UTC from the data
strictly before it, exactly as :func:`carbonsched.pipeline.daily.forecast_site` issues them for a
daily plan (the model of each site and signal is chosen and fitted once per refit period,
:mod:`carbonsched.forecasts.registry`, and cached). Each hour is then compared with what happened:

``carbon_intensity_g_per_kwh``
    the provider's actual hourly carbon intensity [g/kWh];
``green_surplus_index``
    the index computed from the actual data on the same reference window as the forecast [-];
``pue``
    the PUE of the site's model on the actual weather [-].

Scores per site and signal: MAPE [%] and MAE (in the signal's unit), the same for the seasonal
naive forecast (the same hour the day before issue; Hyndman & Athanasopoulos, FPP3 §5.2), skill
``1 − MAPE/MAPE_naive`` (for the green-surplus index, whose actual is often 0 and whose MAPE is
undefined, ``1 − MAE/MAE_naive``), and the empirical coverage of the 80 % and 95 % intervals.
The green-surplus index also gets the Brier score of "surplus hour" (index > 0; issue 35 item
5): the forecast's probability read from its quantiles (:func:`surplus_probability`) against
seasonal naive's yes/no (``surplus_brier``; ``brier_skill = 1 − BS/BS_naive``).

The days run through :func:`carbonsched.evaluate.executor.map_in_order`, locally or on Dask.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.adapters.signals import load_site_signals
from carbonsched.catalog import load_catalog
from carbonsched.domain import SignalQuality
from carbonsched.errors import ForecastError, InputError
from carbonsched.evaluate.executor import map_in_order, parse_executor
from carbonsched.evaluate.provider_forecast import read_provider_forecast, score_against
from carbonsched.evaluate.replay import actual_signals
from carbonsched.forecasts.decision import start_regret
from carbonsched.forecasts.exogenous import DAY_AHEAD_AUCTIONS
from carbonsched.forecasts.registry import DEFAULT_SCHEDULE
from carbonsched.pipeline.daily import FORECAST_HISTORY_DAYS, forecast_site, surplus_reference
from carbonsched.timeaxis import HOUR, day_start_utc, hourly_slots

SIGNALS = ("carbon_intensity_g_per_kwh", "green_surplus_index", "pue")
"""The signals scored, as named in the plan's stored forecasts."""
MAE_SKILL_SIGNALS = frozenset({"green_surplus_index"})
OFF_BOUND_SIGNALS = frozenset({"green_surplus_index", "pue"})
"""Signals also scored on the hours off their bounds (``off_bounds``: MAE and skill where the
actual index is strictly between 0 and 1, or PUE is above the lowest value of the sample, the
site's floor where it is reached), the hours where a forecast can be wrong."""
"""Signals whose skill is taken on MAE (their actual is often 0, so MAPE is undefined)."""
NAIVE_MODEL = "seasonal-naive-24h"
LEAD_BUCKETS: tuple[tuple[int, int], ...] = ((0, 24), (24, 48), (48, 72), (72, 96), (96, 168))
"""Lead buckets [h] the scores are also given by (``by_lead``), up to the horizon."""
FORECAST_COLUMNS = ("site", "signal", "model", "chosen", "issued_at", "ts", "mean", "lo_80",
                    "hi_80", "lo_95", "hi_95", "p_surplus")
"""Columns of ``--forecasts-out`` (UTC times, units as in the plan; ``p_surplus``, the
probability of a surplus hour [-], on the green-surplus rows that have one, else empty)."""


def _quiet(_: str) -> None:
    return None


def _actual_frame(site: Any, frame: pd.DataFrame, slots: pd.DatetimeIndex,
                  reference: pd.Series | None) -> pd.DataFrame:
    """The actual signals on ``slots``; hours without a real observation are NaN (not scored).

    :func:`carbonsched.evaluate.replay.actual_signals` interpolates missing carbon intensity and
    puts PUE at the model's floor without weather (right for scoring a plan's emissions); a
    forecast is scored only against hours that were really observed.
    """
    act = actual_signals(site, frame, slots, reference)
    f = frame.reindex(slots)
    ci = act["carbon_intensity_g_per_kwh"].where(f["carbon_intensity_g_per_kwh"].notna())
    weather = f[["temperature_c", "relative_humidity_pct"]].notna().all(axis=1)
    return pd.DataFrame({"carbon_intensity_g_per_kwh": ci,
                         "green_surplus_index": act["green_surplus_index"],
                         "pue": act["pue"].where(weather)}, index=slots)


EXOGENOUS_MODES = ("none", "reanalysis", "day-ahead-price", "reanalysis+day-ahead-price")
"""``exogenous`` choices of the site backtest: history only; the site's weather file used as if
it had been forecast 24 h ahead (no archived day-ahead forecast exists for the catalog's sites;
the caveat is in the results and the notes); the zone's day-ahead auction prices, each day's
published the day before delivery (:data:`carbonsched.forecasts.exogenous.DAY_AHEAD_AUCTIONS`;
zones without a known day-ahead auction get none); or both."""
REANALYSIS_CAVEAT = ("the site's observed/reanalysis weather used as if forecast 24 h ahead (no "
                     "archived day-ahead forecast exists for this site): optimistic, an upper "
                     "bound on what a real weather forecast would give")


def site_exogenous(frame: pd.DataFrame, mode: str, zone: str = "") -> pd.DataFrame | None:
    """The exogenous forecasts a site backtest offers (:data:`EXOGENOUS_MODES`).

    ``reanalysis``: the frame's ``temperature_c`` and ``relative_humidity_pct`` (the site's
    weather file) as a table published 24 h before each hour
    (:func:`carbonsched.forecasts.exogenous.from_issue_layout`), with :data:`REANALYSIS_CAVEAT`.
    ``day-ahead-price``: the frame's ``price_usd_per_mwh`` where ``zone`` has a day-ahead
    auction (:func:`carbonsched.forecasts.exogenous.from_day_ahead_auction`), else nothing.

    Returns
    -------
    DataFrame or None
        The table (``attrs["source"]`` and ``attrs["caveat"]`` name its parts); ``None`` when
        the mode offers the site nothing.

    Raises
    ------
    InputError
        Unknown ``mode``.
    """
    from carbonsched.forecasts.exogenous import (
        check_table,
        from_day_ahead_auction,
        from_issue_layout,
    )

    if mode not in EXOGENOUS_MODES:
        raise InputError(f"--exogenous must be one of {', '.join(EXOGENOUS_MODES)}, got "
                         f"{mode!r}")
    parts: list[pd.DataFrame] = []
    if "reanalysis" in mode:
        cols = {c: c for c in ("temperature_c", "relative_humidity_pct") if c in frame}
        parts.append(from_issue_layout(frame, cols, 24, source="site weather file",
                                       caveat=REANALYSIS_CAVEAT))
    if "day-ahead-price" in mode and zone in DAY_AHEAD_AUCTIONS and "price_usd_per_mwh" in frame:
        parts.append(from_day_ahead_auction(frame["price_usd_per_mwh"], DAY_AHEAD_AUCTIONS[zone],
                                            source=f"{zone} price file"))
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    out = check_table(pd.concat(parts, ignore_index=True))
    out.attrs.update(source=" + ".join(p.attrs["source"] for p in parts),
                     caveat="; ".join(p.attrs["caveat"] for p in parts if p.attrs.get("caveat"))
                     or None)
    return out


def _site_chunk(catalog: str | Path, data_dir: Path, site_id: str, days: list[str],
                horizon_hours: int = 24, exogenous: str = "none",
                ) -> tuple[pd.DataFrame, list[str]]:
    """Forecast and score one site on ``days``; models chosen once per refit period (cached)."""
    cat = load_catalog(catalog)
    site = cat.site(site_id)
    d0, d1 = day_start_utc(days[0]), day_start_utc(days[-1])
    frame, meta = load_site_signals(site, data_dir,
                                    d0 - pd.Timedelta(days=FORECAST_HISTORY_DAYS + 1),
                                    d1 + pd.Timedelta(hours=horizon_hours + 24))
    rows: list[pd.DataFrame] = []
    notes: list[str] = []
    exog = site_exogenous(frame, exogenous, site.zone)
    for label in days:
        day = day_start_utc(label)
        slots = hourly_slots(day, horizon_hours)
        hist = frame[(frame.index < day)
                     & (frame.index >= day - pd.Timedelta(days=FORECAST_HISTORY_DAYS))]
        ref = surplus_reference(hist, day)
        try:
            fc = forecast_site(site, hist, day, horizon_hours, meta, exogenous=exog)
            act = _actual_frame(site, frame, slots, ref)
            # seasonal naive at every lead: the last observed day, repeated
            last_day = _actual_frame(site, frame, hourly_slots(day - pd.Timedelta(days=1), 24),
                                     ref).to_numpy()
            naive = pd.DataFrame(last_day[np.arange(horizon_hours) % 24], index=slots,
                                 columns=act.columns)
        except (ForecastError, InputError) as exc:
            notes.append(f"{label}: site {site.id} not scored: {exc}")
            continue
        notes.extend(f"{label}: {n}" for n in fc.notes)
        long = fc.long.copy()
        long["ts"] = pd.to_datetime(long["ts"], utc=True)
        long = long[long["signal"].isin(SIGNALS)]
        long["chosen"] = True
        long["actual"] = [act.at[t, s] for t, s in zip(long["ts"], long["signal"], strict=True)]
        nv = (naive.set_axis(slots).rename_axis("ts").reset_index()
              .melt(id_vars="ts", var_name="signal", value_name="mean"))
        nv["actual"] = [act.at[t, s] for t, s in zip(nv["ts"], nv["signal"], strict=True)]
        for col in ("lo_80", "hi_80", "lo_95", "hi_95"):
            nv[col] = np.nan
        nv["model"], nv["chosen"], nv["issued_at"], nv["site"] = NAIVE_MODEL, False, day, site.id
        rows.append(pd.concat([long, nv], ignore_index=True))
    out = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=[*FORECAST_COLUMNS, "actual"])
    return out, notes


SURPLUS_QUANTILES = (("lo_95", 0.025), ("lo_80", 0.10), ("mean", 0.50), ("hi_80", 0.90),
                     ("hi_95", 0.975))
"""The forecast's quantiles read for the probability of a surplus hour (column, level [-]); the
mean taken as the median (the conformal bounds are quantiles of the residuals around it)."""


def surplus_probability(f: pd.DataFrame) -> np.ndarray:
    """Forecast probability that an hour is a surplus hour (green-surplus index > 0). [-]

    The forecast's calibrated probability ``p_surplus`` where it has one
    (:mod:`carbonsched.forecasts.surplus_probability`, issue 35 item 5). Otherwise (a fallback
    forecast, or before issue 35) it is read from the quantiles. The index is clipped at 0, so
    a lower quantile at 0 means at least that level's mass at 0: ``P(index > 0) = 1 - q`` with
    ``q`` the highest level of :data:`SURPLUS_QUANTILES` whose value is 0 (``1 - 0.975`` when
    every quantile is 0, ``1`` when none is). Rows without bounds (seasonal naive) give 0 or 1
    from the mean.

    Parameters
    ----------
    f
        Rows with ``mean`` and, where known, ``lo_95, lo_80, hi_80, hi_95`` and ``p_surplus``;
        shape ``(n, k)``.

    Returns
    -------
    ndarray
        Shape ``(n,)``, in [0, 1].
    """
    if "p_surplus" in f:
        # the calibrated event probability (issue 35 item 5) where the forecast has one
        p = f["p_surplus"].to_numpy(float)
        return np.where(np.isfinite(p), np.clip(p, 0.0, 1.0), _from_quantiles(f))
    return _from_quantiles(f)


def _from_quantiles(f: pd.DataFrame) -> np.ndarray:
    at0 = np.zeros(len(f))
    for col, level in SURPLUS_QUANTILES:
        v = f[col].to_numpy(float)
        at0 = np.where(np.isfinite(v) & (v <= 1e-9), level, at0)
    bounds = f[["lo_95", "hi_95"]].notna().all(axis=1).to_numpy()
    point = (f["mean"].to_numpy(float) > 1e-9).astype(float)
    return np.where(bounds, 1.0 - at0, point)


def _brier(chosen: pd.DataFrame, naive: pd.DataFrame) -> dict[str, Any] | None:
    """Brier scores of "surplus hour" (actual index > 0): the forecast, naive and the base rate.

    ``brier_skill`` is ``1 - BS / BS_naive`` (naive: yesterday's same hour was a surplus hour,
    0 or 1); ``brier_skill_climatology`` is against the sample's own surplus frequency (known
    only afterwards: a stricter, in-sample reference). ``None`` without surplus hours.
    """
    keys = ["issued_at", "ts"]
    m = chosen.merge(naive[[*keys, "mean"]].rename(columns={"mean": "naive_mean"}), on=keys)
    if not len(m):
        return None
    event = (m["actual"].to_numpy(float) > 1e-9).astype(float)
    if not event.any():
        return None
    p = surplus_probability(m)
    pn = (m["naive_mean"].to_numpy(float) > 1e-9).astype(float)
    bs, bn = float(np.mean((p - event) ** 2)), float(np.mean((pn - event) ** 2))
    bc = float(np.mean((event.mean() - event) ** 2))
    return {"hours": int(len(m)), "surplus_hours": int(event.sum()), "brier": bs,
            "naive_brier": bn, "climatology_brier": bc,
            "brier_skill": None if not bn > 0 else 1.0 - bs / bn,
            "brier_skill_climatology": None if not bc > 0 else 1.0 - bs / bc}


def _scores(g: pd.DataFrame, signal: str) -> dict[str, Any]:
    # hours without a real actual (or a real naive value) are not scored, for either model
    ok = g.groupby(["issued_at", "ts"])["actual"].transform("count") == 2
    ok &= g.groupby(["issued_at", "ts"])["mean"].transform("count") == 2
    unscored = int((~ok & g["chosen"]).sum())
    g = g[ok]
    chosen, naive = g[g["chosen"]], g[~g["chosen"]]

    def mape(d: pd.DataFrame) -> float | None:
        ok = d["actual"].abs() > 1e-9
        if not ok.any():
            return None
        return float(100.0 * ((d["mean"] - d["actual"]).abs()[ok] / d["actual"].abs()[ok]).mean())

    def mae(d: pd.DataFrame) -> float:
        return float((d["mean"] - d["actual"]).abs().mean())

    by_lead = _by_lead(g, signal)
    off = None
    if signal in OFF_BOUND_SIGNALS and len(chosen):
        act = chosen["actual"]
        lo = 0.0 if signal == "green_surplus_index" else float(act.min())
        keep = ((act > lo + 1e-9) & (act < 1.0 - 1e-9) if signal == "green_surplus_index"
                else act > lo + 1e-9).to_numpy()
        keys = chosen[["issued_at", "ts"]][keep]
        nk = naive.merge(keys, on=["issued_at", "ts"])
        if keep.any() and len(nk):
            a_off, an_off = mae(chosen[keep]), mae(nk)
            off = {"hours": int(keep.sum()), "mae": a_off, "naive_mae": an_off,
                   "skill": None if not an_off > 0 else 1.0 - a_off / an_off}
    brier = _brier(chosen, naive) if signal == "green_surplus_index" else None
    m, mn = mape(chosen), mape(naive)
    a, an = mae(chosen), mae(naive)
    if signal in MAE_SKILL_SIGNALS:
        skill = None if an <= 0 else 1.0 - a / an
        basis = "mae"
    else:
        skill = None if m is None or not mn else 1.0 - m / mn
        basis = "mape"
    cov = {}
    for level in (80, 95):
        lo, hi = chosen[f"lo_{level}"], chosen[f"hi_{level}"]
        inside = (chosen["actual"] >= lo - 1e-9) & (chosen["actual"] <= hi + 1e-9)
        cov[f"coverage_{level}"] = float(inside.mean()) if len(chosen) else None
    return {"hours": int(len(chosen)), "unscored_hours": unscored, "mape_pct": m, "mae": a,
            "naive_mape_pct": mn,
            "naive_mae": an, "skill": skill, "skill_basis": basis, **cov,
            "models": dict(Counter(chosen["model"]).most_common()), "by_lead": by_lead,
            "off_bounds": off, "surplus_brier": brier}


def _bucket_scores(chosen: pd.DataFrame, naive: pd.DataFrame, signal: str) -> dict[str, Any]:
    """MAPE, MAE, skill and coverage of one lead bucket's scored hours (chosen and naive)."""
    def mape(d: pd.DataFrame) -> float | None:
        ok = d["actual"].abs() > 1e-9
        if not ok.any():
            return None
        return float(100.0 * ((d["mean"] - d["actual"]).abs()[ok] / d["actual"].abs()[ok]).mean())

    m, mn = mape(chosen), mape(naive)
    a = float((chosen["mean"] - chosen["actual"]).abs().mean())
    an = float((naive["mean"] - naive["actual"]).abs().mean())
    if signal in MAE_SKILL_SIGNALS:
        skill = None if not an > 0 else 1.0 - a / an
    else:
        skill = None if m is None or not mn else 1.0 - m / mn
    out: dict[str, Any] = {"hours": int(len(chosen)), "mape_pct": m, "naive_mape_pct": mn,
                           "mae": a, "naive_mae": an, "skill": skill}
    for level in (80, 95):
        inside = ((chosen["actual"] >= chosen[f"lo_{level}"] - 1e-9)
                  & (chosen["actual"] <= chosen[f"hi_{level}"] + 1e-9))
        out[f"coverage_{level}"] = float(inside.mean()) if len(chosen) else None
    return out


def _by_lead(g: pd.DataFrame, signal: str) -> dict[str, dict[str, Any]]:
    """Scores per lead bucket (:data:`LEAD_BUCKETS`) of one site and signal.

    ``g`` holds the chosen and the naive rows of every issue (scored hours only). Besides the
    scores of :func:`_bucket_scores`, carbon intensity gets the start regret [%] of each model
    (:func:`carbonsched.forecasts.decision.start_regret`: 1- and 3-hour jobs arriving at every
    hour of the bucket, 24-hour waiting window inside the horizon) on the issues whose
    forecasts of both models are complete.
    """
    lead = ((pd.to_datetime(g["ts"], utc=True) - pd.to_datetime(g["issued_at"], utc=True))
            // HOUR).astype(int)
    g = g.assign(lead=lead.to_numpy())
    H = int(g["lead"].max()) + 1 if len(g) else 0
    out: dict[str, dict[str, Any]] = {}
    regret_tabs = None
    if signal == "carbon_intensity_g_per_kwh" and H >= 3:
        tabs = {c: g[g["chosen"] == c].pivot_table(index="issued_at", columns="lead",
                                                   values=["mean", "actual"], aggfunc="first")
                for c in (True, False)}
        idx = tabs[True].index.intersection(tabs[False].index)
        fm = {c: tabs[c]["mean"].reindex(index=idx, columns=range(H)).to_numpy(float)
              for c in tabs}
        act = tabs[True]["actual"].reindex(index=idx, columns=range(H)).to_numpy(float)
        keep = np.isfinite(fm[True]).all(axis=1) & np.isfinite(fm[False]).all(axis=1)
        regret_tabs = (fm[True][keep], fm[False][keep], act[keep])
    for a, e in LEAD_BUCKETS:
        if a >= H:
            break
        sub = g[(g["lead"] >= a) & (g["lead"] < e)]
        r = _bucket_scores(sub[sub["chosen"]], sub[~sub["chosen"]], signal)
        if regret_tabs is not None and len(regret_tabs[0]):
            f_c, f_n, act = regret_tabs
            arrivals = [s for s in range(a, min(e, H - 2))]
            for key, f in (("start_regret_pct", f_c), ("naive_start_regret_pct", f_n)):
                excess, ideal = start_regret(f, act, arrivals=arrivals)
                r[key] = 100.0 * excess / ideal if ideal > 0 else None
        out[f"{a}-{e}h"] = r
    return out


def run_site_backtest(catalog: str | Path, data_dir: Path, start: str, end: str, *,
                      sites: list[str] | None = None, chunk_days: int = 7,
                      every_days: int = 1, horizon_hours: int = 24,
                      executor: str = "local", workers: int = 1,
                      scheduler_address: str | None = None,
                      progress: Callable[[str], None] = _quiet,
                      against: str | Path | None = None, exogenous: str = "none",
                      ) -> tuple[dict[str, Any], pd.DataFrame]:
    """Backtest the daily forecasting path on every site of a catalog over ``[start, end]``.

    Parameters
    ----------
    catalog
        Catalog name or TOML path (measured signals).
    data_dir
        Folder laid out like ``../shared/data``.
    start, end
        First and last issue day, ``YYYY-MM-DD`` (inclusive); issued at 00:00 UTC.
    sites
        Site ids to score (default: every site of the catalog).
    chunk_days
        Most days per chunk of work; chunks are also cut at the refit periods' starts
        (:class:`carbonsched.forecasts.registry.ModelSchedule`), where models are refitted. [d]
    every_days
        Score every ``every_days``-th day from ``start`` (a stratified sample; 1 = every
        day). [d]
    horizon_hours
        Hours forecast from each issue (1..168) [h]; the scores are also given per lead
        bucket (:data:`LEAD_BUCKETS`, ``by_lead``), with the start regret for carbon
        intensity. Seasonal naive repeats the last observed day at every lead.
    executor, workers, scheduler_address
        Where the chunks run (:func:`carbonsched.evaluate.executor.map_in_order`).
    progress
        Callable receiving status lines.
    against
        A provider's published carbon-intensity forecast CSV
        (:func:`carbonsched.evaluate.provider_forecast.read_provider_forecast`), read and
        checked before any forecast is made, then scored next to the product's on the same
        hours (``against`` in the results, :func:`~carbonsched.evaluate.provider_forecast.
        score_against`).
    exogenous
        One of :data:`EXOGENOUS_MODES` (:func:`site_exogenous`): ``none`` (history only),
        ``reanalysis`` (the caveat is in the results' ``exogenous`` and the notes),
        ``day-ahead-price`` (the zones that have one are listed in the results' ``exogenous``),
        or ``reanalysis+day-ahead-price``.

    Returns
    -------
    (dict, DataFrame)
        Results (``sites`` {site: {signal: scores, with ``by_lead`` {bucket: scores}}},
        ``mean_skill`` and ``mean_skill_by_lead`` per signal, ``surplus_brier_skill`` {site:
        Brier skill of "surplus hour" over seasonal naive, sites with surplus hours},
        ``notes``, ``seconds``) and the
        hourly forecasts with :data:`FORECAST_COLUMNS` plus ``actual``.

    Raises
    ------
    InputError
        ``end`` before ``start``, an unknown site or executor, a catalog with modelled signals.
    DataFormatError
        A bad ``against`` file (the message names its line and column).
    """
    kind = parse_executor(executor)
    if chunk_days < 1:
        raise InputError(f"chunk_days must be >= 1, got {chunk_days}")
    if every_days < 1:
        raise InputError(f"--every must be >= 1 day, got {every_days}")
    if not 1 <= horizon_hours <= 168:
        raise InputError(f"--horizon must be 1..168 hours (the forecasts' longest), got "
                         f"{horizon_hours}")
    d0, d1 = day_start_utc(start), day_start_utc(end)
    if d1 < d0:
        raise InputError(f"--to {end} is before --from {start}")
    cat = load_catalog(catalog)
    site_ids = sites or [s.id for s in cat.sites]
    for sid in site_ids:
        cat.site(sid)  # UnknownSiteError with the catalog's ids
    if cat.signal_quality == SignalQuality.MODELLED:
        raise InputError(f"catalog {cat.name} has modelled signals; a backtest scores forecasts "
                         "on actual measurements — use a measured catalog such as 'global'")
    provider = read_provider_forecast(against, cat) if against is not None else None
    if exogenous not in EXOGENOUS_MODES:
        raise InputError(f"--exogenous must be one of {', '.join(EXOGENOUS_MODES)}, got "
                         f"{exogenous!r}")
    days = [d.strftime("%Y-%m-%d") for d in pd.date_range(d0, d1, freq="D")]
    days = days[::every_days]
    # every day: chunks never straddle a refit period (a period's models are fitted once per
    # site, in one process); a sample: chunk_days sampled days per chunk (one load of the data)
    chunks: list[list[str]] = []
    key = ((lambda d: DEFAULT_SCHEDULE.period_start(day_start_utc(d))) if every_days == 1
           else (lambda d: 0))
    for _, grp in itertools.groupby(days, key=key):
        g = list(grp)
        chunks += [g[i:i + chunk_days] for i in range(0, len(g), chunk_days)]
    args = [(catalog, data_dir, sid, c, horizon_hours, exogenous) for sid in site_ids
            for c in chunks]
    t0 = time.perf_counter()
    parts: list[pd.DataFrame] = []
    notes: list[str] = []
    for n, (fc, nts) in enumerate(map_in_order(_site_chunk, args, executor=kind,
                                               workers=workers,
                                               scheduler_address=scheduler_address), 1):
        parts.append(fc)
        notes.extend(nts)
        progress(f"{n}/{len(args)} site-chunks")
    forecasts = pd.concat(parts, ignore_index=True)
    results: dict[str, dict[str, Any]] = {}
    for (sid, signal), g in forecasts.groupby(["site", "signal"], sort=False):
        results.setdefault(str(sid), {})[str(signal)] = _scores(g, str(signal))
    mean_skill = {}
    for signal in SIGNALS:
        vals = [r[signal]["skill"] for r in results.values()
                if signal in r and r[signal]["skill"] is not None]
        mean_skill[signal] = float(np.mean(vals)) if vals else None
    mean_by_lead: dict[str, dict[str, float | None]] = {}
    for signal in SIGNALS:
        for r in results.values():
            for b, sc in (r.get(signal, {}).get("by_lead") or {}).items():
                mean_by_lead.setdefault(signal, {}).setdefault(b, [])  # type: ignore[arg-type]
                if sc["skill"] is not None:
                    mean_by_lead[signal][b].append(sc["skill"])  # type: ignore[union-attr]
    mean_by_lead = {sg: {b: (float(np.mean(v)) if v else None) for b, v in d.items()}
                    for sg, d in mean_by_lead.items()}
    brier = {sid: r["green_surplus_index"]["surplus_brier"]["brier_skill"]
             for sid, r in results.items()
             if (r.get("green_surplus_index") or {}).get("surplus_brier")}
    out = {"catalog": cat.name, "from": days[0], "to": days[-1], "days": len(days),
           "issue_time_utc": "00:00", "horizon_hours": horizon_hours, "chunk_days": chunk_days,
           "every_days": every_days, "days_scored": len(days),
           "exogenous": {"mode": exogenous,
                         "caveat": REANALYSIS_CAVEAT if "reanalysis" in exogenous else None,
                         "day_ahead_price_zones": sorted(
                             {cat.site(s).zone for s in site_ids}
                             & set(DAY_AHEAD_AUCTIONS)) if "price" in exogenous else []},
           "schedule": asdict(DEFAULT_SCHEDULE), "executor": str(kind),
           "sites": results, "mean_skill": mean_skill,
           "mean_skill_by_lead": mean_by_lead, "surplus_brier_skill": brier, "notes": notes,
           "seconds": round(time.perf_counter() - t0, 1)}
    if provider is not None:
        out["against"] = {"file": str(against), **score_against(forecasts, provider)}
    return out, forecasts


def write_forecasts_csv(forecasts: pd.DataFrame, path: Path) -> None:
    """Write the hourly forecasts with :data:`FORECAST_COLUMNS` (UTC ISO 8601 times)."""
    from carbonsched.fileio import atomic_path

    f = forecasts.reindex(columns=list(FORECAST_COLUMNS)).copy()
    for col in ("issued_at", "ts"):
        f[col] = pd.to_datetime(f[col], utc=True).dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    with atomic_path(path) as tmp:
        f.to_csv(tmp, index=False)


__all__ = ["FORECAST_COLUMNS", "SIGNALS", "run_site_backtest", "write_forecasts_csv", "HOUR"]
