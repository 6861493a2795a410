"""Score the site-signal models on the real 2023 zones (issue 3 item 5).

Data: the Electricity Maps 2023 exports, day-ahead prices and Open-Meteo weather of
``$CARBONSCHED_SHARED_DATA/sustain-cluster`` (read by path with the adapters of
``carbonsched.adapters.signals``; see ``docs/signals.md`` for the columns).

Protocol (the DACF paper's day-ahead protocol, Maji et al. 2022, doi:10.1145/3538637.3538849):
at 00:00 UTC of each test day forecast the 24 hourly values of that day from data strictly
before the issue time. Test weeks: 11 weeks of 2023, starting on days ``7·w`` for
``w = 9, 13, ..., 49`` (every 4th week from early March), so every season is held out; each
test week's models are fitted on the 8 weeks (56 days) before it.

* :func:`evaluate_ci` — carbon intensity: MAPE [%], MAE [g/kWh] and the empirical coverage of
  the 80 % / 95 % intervals, per zone and model.
* :func:`evaluate_surplus` — the green-surplus index (:func:`~carbonsched.forecasts.
  green_surplus.green_surplus_index` with the zone's **2022** renewable shares as reference,
  so the target uses no 2023 information beyond its own hour): Brier score of the forecast index
  read as the probability of a surplus hour (Brier, *Monthly Weather Review* 78(1), 1950,
  doi:10.1175/1520-0493(1950)078<0001:VOFEIT>2.0.CO;2), MSE of the index, and precision /
  recall of surplus hours, an hour being a surplus hour when its index is >= ``threshold``
  (0.5).
* :func:`evaluate_pue` — the PUE model over the year's real hourly weather per zone.

Run: ``OMP_NUM_THREADS=1 python -m carbonsched.forecasts.signal_eval`` writes
``bench/results/signal_eval.json`` and ``bench/results/signal_eval.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.domain import PueModel
from carbonsched.errors import InputError
from carbonsched.forecasts.base import Forecaster
from carbonsched.forecasts.baselines import Climatology, SeasonalNaive
from carbonsched.forecasts.carbon_intensity import LeadRegression
from carbonsched.forecasts.green_surplus import (
    GreenSurplusForecaster,
    SurplusSeasonalNaive,
    green_surplus_index,
)
from carbonsched.forecasts.pue import free_cooling_hours, pue_from_weather

YEAR = 2023
TEST_WEEKS = tuple(range(9, 50, 4))
TRAIN_DAYS = 56
SURPLUS_THRESHOLD = 0.5

CI_MODELS: dict[str, Callable[[], Forecaster]] = {
    "seasonal-naive-24h": lambda: SeasonalNaive(24),
    "seasonal-naive-168h": lambda: SeasonalNaive(168),
    "climatology-7d": lambda: Climatology(7),
    "ci-lead-ols": lambda: LeadRegression(),
}
SURPLUS_MODELS: dict[str, Callable[[], Forecaster]] = {
    "surplus-seasonal-naive-24h": lambda: SurplusSeasonalNaive(24),
    "green-surplus-lead-ols": lambda: GreenSurplusForecaster(),
}


# --- reading --------------------------------------------------------------------------------
def _readers() -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """The signal adapters ``read_electricitymaps``, ``read_open_meteo``, ``read_prices``."""
    from carbonsched.adapters.signals import read_electricitymaps, read_open_meteo, read_prices

    return read_electricitymaps, read_open_meteo, read_prices


def sustain_dir(data_dir: str | Path) -> Path:
    """``<data_dir>/sustain-cluster``, or :class:`InputError` saying how to fix it."""
    d = Path(data_dir) / "sustain-cluster"
    if not (d / "carbon_intensity").is_dir():
        raise InputError(f"{d}/carbon_intensity not found; pass the shared data folder "
                         "(CARBONSCHED_SHARED_DATA, the one holding sustain-cluster/)")
    return d


def available_zones(data_dir: str | Path, year: int = YEAR) -> list[str]:
    """Zones with an Electricity Maps export for ``year``, sorted."""
    files = (sustain_dir(data_dir) / "carbon_intensity").glob(f"*_{year}_hourly.csv")
    return sorted(p.name[: -len(f"_{year}_hourly.csv")] for p in files)


def zone_frame(data_dir: str | Path, zone: str, year: int = YEAR) -> pd.DataFrame:
    """The zone's hourly signal frame for ``year`` (columns of ``docs/signals.md``).

    Carbon intensity and shares from the Electricity Maps export, ``price_usd_per_mwh`` and the
    weather joined where their files exist (missing hours are NaN).

    Raises
    ------
    InputError
        If the zone has no Electricity Maps export for ``year``.
    """
    read_em, read_om, read_pr = _readers()
    d = sustain_dir(data_dir)
    ci_path = d / "carbon_intensity" / f"{zone}_{year}_hourly.csv"
    if not ci_path.exists():
        raise InputError(f"{ci_path} not found; zones available: "
                         f"{', '.join(available_zones(data_dir, year))}")
    frame, _ = read_em(ci_path)
    hours = pd.date_range(f"{year}-01-01", f"{year + 1}-01-01", freq="h", tz="UTC",
                          inclusive="left", name="ts")
    frame = frame.reindex(hours)
    price_path = d / "electricity_prices_usd_utc" / f"{zone}_electricity_prices_{year}.csv"
    if price_path.exists():
        frame = frame.join(read_pr(price_path)[0][["price_usd_per_mwh"]])
    weather_path = d / "weather" / f"{zone}_{year}.json"
    if weather_path.exists():
        w = read_om(weather_path)[0][["temperature_c", "relative_humidity_pct"]]
        frame = frame.join(w)
    return frame


# --- backtest loop --------------------------------------------------------------------------
def backtest_day_ahead(
    y: pd.Series,
    make_model: Callable[[], Forecaster],
    weeks: Iterable[int] = TEST_WEEKS,
    train_days: int = TRAIN_DAYS,
) -> tuple[pd.DataFrame, list[float]]:
    """Day-ahead forecasts at 00:00 UTC over the test weeks, refitting before each week.

    Parameters
    ----------
    y
        Hourly UTC series of one year, shape ``(8760,)`` (NaN allowed).
    make_model
        Factory of an unfitted forecaster.
    weeks
        Test weeks ``w``: days ``7·w .. 7·w+6`` of the year are issue days.
    train_days
        Days before each test week the model is fitted on. [d]

    Returns
    -------
    (DataFrame, list of float)
        Long frame (``issued_at``, ``ts``, ``lead``, ``actual`` and the five forecast
        columns) and the fit durations [s].
    """
    start = y.index[0].floor("D")
    rows, fit_s = [], []
    for w in weeks:
        week0 = start + pd.Timedelta(days=7 * w)
        train = y[(y.index >= week0 - pd.Timedelta(days=train_days)) & (y.index < week0)]
        model = make_model()
        t0 = time.perf_counter()
        model.fit(train)
        fit_s.append(time.perf_counter() - t0)
        for d in range(7):
            issued = week0 + pd.Timedelta(days=d)
            if issued + pd.Timedelta(hours=23) > y.index[-1]:
                break
            fc = model.predict(issued, 24, y=y[y.index < issued])
            fc = fc.assign(actual=y.reindex(fc.index).to_numpy(), lead=np.arange(24),
                           issued_at=issued)
            rows.append(fc.reset_index())
    return pd.concat(rows, ignore_index=True), fit_s


def point_scores(bt: pd.DataFrame) -> dict[str, float]:
    """MAPE [%], MAE and 80/95 % interval coverage of a backtest frame (hours with actuals).

    MAPE = mean(|forecast - actual| / |actual|) × 100 over hours with ``actual != 0`` (the
    DACF paper's definition).
    """
    b = bt.dropna(subset=["actual"])
    nz = b[b["actual"] != 0]
    return {
        "mape_pct": float((nz["mean"] - nz["actual"]).abs().div(nz["actual"].abs()).mean() * 100),
        "mae": float((b["mean"] - b["actual"]).abs().mean()),
        "coverage_80": float(((b["actual"] >= b["lo_80"]) & (b["actual"] <= b["hi_80"])).mean()),
        "coverage_95": float(((b["actual"] >= b["lo_95"]) & (b["actual"] <= b["hi_95"])).mean()),
        "n_hours": int(len(b)),
    }


def surplus_scores(bt: pd.DataFrame, threshold: float = SURPLUS_THRESHOLD) -> dict[str, float]:
    """Brier score, index MSE, precision and recall of surplus hours (index >= threshold).

    Brier = mean((p - o)^2) with ``p`` the forecast index and ``o = 1[actual >= threshold]``.
    Precision = TP / (TP + FP), recall = TP / (TP + FN) for the event "index >= threshold";
    NaN when undefined (no predicted / no actual surplus hour).
    """
    b = bt.dropna(subset=["actual"])
    p = b["mean"].to_numpy(float)
    a = b["actual"].to_numpy(float)
    o = (a >= threshold).astype(float)
    pred = p >= threshold
    tp = float((pred & (o == 1)).sum())
    fp = float((pred & (o == 0)).sum())
    fn = float((~pred & (o == 1)).sum())
    return {
        "brier": float(np.mean((p - o) ** 2)),
        "mse_index": float(np.mean((p - a) ** 2)),
        "precision": tp / (tp + fp) if tp + fp else float("nan"),
        "recall": tp / (tp + fn) if tp + fn else float("nan"),
        "surplus_share": float(o.mean()),
        "n_hours": int(len(b)),
    }


# --- evaluations ----------------------------------------------------------------------------
def evaluate_ci(data_dir: str | Path, zones: list[str] | None = None,
                models: dict[str, Callable[[], Forecaster]] | None = None,
                weeks: Iterable[int] = TEST_WEEKS) -> pd.DataFrame:
    """Day-ahead carbon-intensity scores per zone and model (module docstring protocol).

    Returns
    -------
    DataFrame
        One row per (zone, model): ``mape_pct`` [%], ``mae`` [g/kWh], ``coverage_80``,
        ``coverage_95`` [-], ``n_hours``, ``fit_seconds`` (mean per fit) [s].
    """
    zones = zones or available_zones(data_dir)
    models = models or CI_MODELS
    out = []
    for zone in zones:
        y = zone_frame(data_dir, zone)["carbon_intensity_g_per_kwh"]
        for name, make in models.items():
            bt, fit_s = backtest_day_ahead(y, make, weeks)
            out.append({"zone": zone, "model": name, **point_scores(bt),
                        "fit_seconds": float(np.mean(fit_s))})
    return pd.DataFrame(out)


def surplus_target(data_dir: str | Path, zone: str, frame: pd.DataFrame | None = None
                   ) -> pd.Series:
    """The zone's 2023 green-surplus index with its 2022 renewable shares as reference."""
    frame = zone_frame(data_dir, zone) if frame is None else frame
    ref = None
    ref_path = sustain_dir(data_dir) / "carbon_intensity" / f"{zone}_{YEAR - 1}_hourly.csv"
    if ref_path.exists():
        ref = _readers()[0](ref_path)[0]["renewable_pct"]
    return green_surplus_index(frame, reference=ref)


def evaluate_surplus(data_dir: str | Path, zones: list[str] | None = None,
                     threshold: float = SURPLUS_THRESHOLD,
                     models: dict[str, Callable[[], Forecaster]] | None = None,
                     weeks: Iterable[int] = TEST_WEEKS) -> pd.DataFrame:
    """Day-ahead green-surplus scores per zone and model (module docstring protocol).

    Returns
    -------
    DataFrame
        One row per (zone, model): ``brier``, ``mse_index``, ``precision``, ``recall``,
        ``surplus_share`` (share of test hours with actual index >= ``threshold``), ``n_hours``,
        ``price_hours`` (hours with a price in the zone's frame).
    """
    zones = zones or available_zones(data_dir)
    models = models or SURPLUS_MODELS
    out = []
    for zone in zones:
        frame = zone_frame(data_dir, zone)
        y = surplus_target(data_dir, zone, frame)
        has_price = int(frame["price_usd_per_mwh"].notna().sum()) if (
            "price_usd_per_mwh" in frame) else 0
        for name, make in models.items():
            bt, _ = backtest_day_ahead(y, make, weeks)
            out.append({"zone": zone, "model": name, **surplus_scores(bt, threshold),
                        "price_hours": has_price})
    return pd.DataFrame(out)


def evaluate_pue(data_dir: str | Path, zones: list[str] | None = None,
                 params: PueModel | None = None) -> pd.DataFrame:
    """The PUE model over each zone's real 2023 hourly weather.

    Returns
    -------
    DataFrame
        One row per zone: ``pue_min``, ``pue_median``, ``pue_mean`` (= the annual PUE for a
        constant IT load), ``pue_max`` [-], ``free_cooling_hours`` [h], ``weather_hours`` [h],
        ``temperature_c_median`` [°C], and the model parameters (prefixed ``param_``).
    """
    zones = zones or available_zones(data_dir)
    params = params or PueModel()
    read_om = _readers()[1]
    out = []
    for zone in zones:
        path = sustain_dir(data_dir) / "weather" / f"{zone}_{YEAR}.json"
        if not path.exists():
            continue
        w = read_om(path)[0]
        w = w[(w.index.year == YEAR)]
        pue = pue_from_weather(w["temperature_c"], w["relative_humidity_pct"], params).dropna()
        out.append({
            "zone": zone,
            "pue_min": float(pue.min()), "pue_median": float(pue.median()),
            "pue_mean": float(pue.mean()), "pue_max": float(pue.max()),
            "free_cooling_hours": free_cooling_hours(w["temperature_c"], params),
            "weather_hours": int(w["temperature_c"].notna().sum()),
            "temperature_c_median": float(w["temperature_c"].median()),
            **{f"param_{k}": v for k, v in asdict(params).items()},
        })
    return pd.DataFrame(out)


# --- report ---------------------------------------------------------------------------------
def _md_table(df: pd.DataFrame, floatfmt: str = "{:.3f}") -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        cells = [floatfmt.format(v) if isinstance(v, float) else str(v) for v in r]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run(data_dir: str | Path, out_dir: str | Path, zones: list[str] | None = None
        ) -> dict[str, Any]:
    """Run the three evaluations and write ``signal_eval.json`` and ``signal_eval.md``."""
    t0 = time.perf_counter()
    ci = evaluate_ci(data_dir, zones)
    sur = evaluate_surplus(data_dir, zones)
    pue = evaluate_pue(data_dir, zones)
    seconds = time.perf_counter() - t0
    machine = (f"{os.cpu_count()} cores ({platform.machine()}, {platform.system()}), "
               f"Python {platform.python_version()}, OMP_NUM_THREADS="
               f"{os.environ.get('OMP_NUM_THREADS', 'unset')}")
    when = pd.Timestamp.now(tz="UTC").strftime("%Y-%m-%d %H:%M UTC")
    ci_mean = ci.groupby("model")[["mape_pct", "coverage_80", "coverage_95", "fit_seconds"]].mean()
    ci_wins = (ci.pivot(index="zone", columns="model", values="mape_pct")
               .idxmin(axis=1).value_counts().to_dict())
    sur_mean = sur.groupby("model")[["brier", "mse_index", "precision", "recall"]].mean()
    result = {
        "date": when, "machine": machine, "seconds": seconds,
        "protocol": {"year": YEAR, "test_weeks": list(TEST_WEEKS), "train_days": TRAIN_DAYS,
                     "issue": "00:00 UTC, 24 h", "surplus_threshold": SURPLUS_THRESHOLD},
        "ci": ci.to_dict(orient="records"),
        "ci_mean_by_model": ci_mean.reset_index().to_dict(orient="records"),
        "ci_zone_wins": ci_wins,
        "surplus": sur.to_dict(orient="records"),
        "surplus_mean_by_model": sur_mean.reset_index().to_dict(orient="records"),
        "pue": pue.to_dict(orient="records"),
    }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "signal_eval.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    ci_wide = ci.pivot(index="zone", columns="model", values="mape_pct").reset_index()
    sur_wide = sur.pivot(index="zone", columns="model", values="brier").reset_index()
    pue_cols = ["zone", "pue_min", "pue_median", "pue_mean", "pue_max", "free_cooling_hours",
                "weather_hours", "temperature_c_median"]
    md = [
        "# Site-signal models on the 2023 Electricity Maps zones",
        "",
        f"Run {when} on {machine}; {seconds:.0f} s. Command: "
        "`OMP_NUM_THREADS=1 python -m carbonsched.forecasts.signal_eval`.",
        "",
        f"Protocol: day-ahead issues at 00:00 UTC (24 h) on the days of 2023 weeks "
        f"{list(TEST_WEEKS)} (77 days), each week's models fitted on the {TRAIN_DAYS} days "
        "before it; forecasts use only data before the issue time.",
        "",
        "## Carbon intensity: mean over zones",
        "",
        _md_table(ci_mean.reset_index()),
        "",
        f"Zones won (lowest MAPE): {ci_wins}",
        "",
        "## Carbon intensity: MAPE [%] by zone",
        "",
        _md_table(ci_wide, "{:.2f}"),
        "",
        f"## Green-surplus index (threshold {SURPLUS_THRESHOLD}): mean over zones",
        "",
        "Target: `green_surplus_index` (price <= 0 -> 1, linear to 0 at 10 USD/MWh; renewable "
        "share above the zone's 2022 90th percentile), max of the two. Precision/recall are "
        "averaged over the zones where they are defined.",
        "",
        _md_table(sur_mean.reset_index()),
        "",
        "## Green-surplus index: Brier score by zone",
        "",
        _md_table(sur_wide),
        "",
        "## PUE model over the real 2023 weather (default PueModel)",
        "",
        f"Parameters: {asdict(PueModel())}",
        "",
        _md_table(pue[pue_cols]),
        "",
    ]
    (out / "signal_eval.md").write_text("\n".join(md))
    return result


def main(argv: list[str] | None = None) -> None:
    """Command line: ``python -m carbonsched.forecasts.signal_eval [--data-dir] [--out]``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.environ.get("CARBONSCHED_SHARED_DATA",
                                                         "../shared/data"))
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--zones", nargs="*", default=None)
    args = ap.parse_args(argv)
    res = run(args.data_dir, args.out, args.zones)
    print(json.dumps({"ci_mean_by_model": res["ci_mean_by_model"],
                      "surplus_mean_by_model": res["surplus_mean_by_model"]}, indent=1))


if __name__ == "__main__":
    main()
