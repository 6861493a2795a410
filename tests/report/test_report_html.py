"""The HTML report opened in headless Chromium (the small hand-worked fleet; fast)."""

from __future__ import annotations

import re

import pytest

from carbonsched.report import build_report, render, to_dict

from .builders import plan_doc
from .chromium import artefact_dir, open_page

pytestmark = pytest.mark.shared_data


def test_html_in_chromium_shows_charts_and_totals(fixtures_dir, shared_data, record_property):
    fx = fixtures_dir / "report"
    doc = plan_doc(
        "2023-07-03", "two-markets",
        [("J-DE", "tenant-a", "de-site", "2023-07-03T10:00:00Z", "2023-07-03T14:00:00Z", 4, 0.5),
         ("J-GB", "tenant-b", "gb-site", "2023-07-03T10:00:00Z", "2023-07-03T12:00:00Z", 2, 1.0)],
        baseline=[
         ("J-DE", "tenant-a", "de-site", "2023-07-03T06:00:00Z", "2023-07-03T10:00:00Z", 4, 0.5),
         ("J-GB", "tenant-b", "gb-site", "2023-07-03T06:00:00Z", "2023-07-03T08:00:00Z", 2, 1.0)])
    rep = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                       instruments=fx / "instruments.toml", plans=[doc])
    out = artefact_dir("report-html-small")
    page = out / "report.html"
    html = render(rep, "html").decode()
    page.write_text(html)
    # self-contained: no scripts, no external fetches
    assert "<script" not in html
    assert not re.search(r'(src|href)="https?:', html)
    png = out / "report.png"
    dom = open_page(page, png, height=2400)
    print(f"\nartefact: screenshot {png}\nartefact: page {page}")
    record_property("artefact", f"screenshot {png}")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    for cid in ("chart-hourly-ci", "chart-site", "chart-tenant", "chart-scope2",
                "chart-savings", "totals", "table-jobs", "notes"):
        assert f'id="{cid}"' in dom, cid
    assert dom.count('class="site-hourly"') == 2
    # the totals shown are the JSON's
    t = to_dict(rep)["totals"]
    for key, digits in (("location_based_kg", 1), ("market_based_kg", 1),
                        ("market_based_hourly_kg", 1), ("facility_energy_kwh", 1)):
        row = re.search(rf'data-total="{key}"><th>[^<]*</th><td class="num">([^<]*)</td>', dom)
        assert row, key
        assert row.group(1) == f"{t[key]:,.{digits}f}"
    assert "5.9" in dom  # hourly market-based total of the hand-worked example, 5.89 kg
