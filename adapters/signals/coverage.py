"""Which zones and hours the data folder covers, computed from the files (never written by hand).

``python -m carbonsched.adapters.signals.coverage --data-dir ../shared/data`` prints the Markdown
table that README.md holds between ``<!-- coverage:start -->`` and ``<!-- coverage:end -->``;
``tests/trust/test_catalog_years.py`` regenerates it and fails when the README differs, so adding a
year or a zone means adding files and re-running this command.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

PATTERNS: tuple[tuple[str, str, str], ...] = (
    ("electricitymaps", "sustain-cluster/carbon_intensity",
     r"^(?P<zone>.+)_(?P<year>\d{4})_hourly\.csv$"),
    ("weather (Open-Meteo)", "sustain-cluster/weather", r"^(?P<zone>.+)_(?P<year>\d{4})\.json$"),
    ("prices", "sustain-cluster/electricity_prices_usd_utc",
     r"^(?P<zone>.+)_electricity_prices_(?P<year>\d{4})\.csv$"),
    ("eia930", "eia930-sustaindc", r"^(?P<zone>[A-Z]+)_NG_avgCI_(?P<year>\d{4})\.csv$"),
)
"""(source, folder under the data dir, file-name pattern with ``zone`` and ``year`` groups)."""

START = "<!-- coverage:start -->"
END = "<!-- coverage:end -->"


def coverage(data_dir: str | Path) -> dict[str, dict[str, list[int]]]:
    """Source -> zone -> sorted years with a file, from the file names under ``data_dir``."""
    out: dict[str, dict[str, list[int]]] = {}
    for source, folder, pattern in PATTERNS:
        rx = re.compile(pattern)
        zones: dict[str, set[int]] = {}
        base = Path(data_dir) / folder
        for p in sorted(base.glob("*")) if base.is_dir() else []:
            m = rx.match(p.name)
            if m:
                zones.setdefault(m["zone"], set()).add(int(m["year"]))
        out[source] = {z: sorted(y) for z, y in sorted(zones.items())}
    return out


def _years(ys: list[int]) -> str:
    runs: list[str] = []
    start = prev = ys[0]
    for y in ys[1:] + [None]:  # type: ignore[list-item]
        if y is not None and y == prev + 1:
            prev = y
            continue
        runs.append(str(start) if start == prev else f"{start}–{prev}")
        if y is not None:
            start = prev = y
    return ", ".join(runs)


def coverage_markdown(data_dir: str | Path) -> str:
    """The README table: one row per source and set of years, zones listed."""
    lines = ["| source | years | zones |", "|---|---|---|"]
    for source, zones in coverage(data_dir).items():
        by_years: dict[str, list[str]] = {}
        for zone, ys in zones.items():
            by_years.setdefault(_years(ys), []).append(zone)
        for years, zs in sorted(by_years.items()):
            lines.append(f"| {source} | {years} | {' '.join(zs)} |")
    return "\n".join(lines)


def main() -> None:  # pragma: no cover - thin CLI
    """Print :func:`coverage_markdown` for ``--data-dir``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default="../shared/data")
    print(coverage_markdown(ap.parse_args().data_dir))


if __name__ == "__main__":  # pragma: no cover
    main()
