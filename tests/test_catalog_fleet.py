"""Bring your own fleet (issue 34, item 1): ``catalog init`` -> ``catalog check`` -> a plan.

The round trip goes through the real commands and the real shared data; the plannable range
``check`` prints is held against real plans at its first day and the days just outside it.
"""

from __future__ import annotations

import json
import tomllib

import pandas as pd
import pytest
from typer.testing import CliRunner

from carbonsched.adapters.signals.providers import load_providers
from carbonsched.catalog import fibre_rtt_ms, load_catalog
from carbonsched.cli.app import app
from carbonsched.errors import ForecastError, InputError
from carbonsched.pipeline.daily import run_daily_plan
from carbonsched.pipeline.fleet import check_fleet, fleet_catalog_toml

runner = CliRunner()

HEADER = "id,role,name,latitude,longitude,timezone,zone,gpus,backend,aliases,provider\n"
TOR = ("tor,green-hub,Toronto hub,43.69,-79.41,America/Toronto,CA-ON,A100:16;V100:4,"
       "slurm:ontario:gpu,canadacentral,\n")
LON = ("lon,edge,London edge,51.5,-0.12,Europe/London,GB,A100:6+T4:28:75,"
       "kubernetes:eu-london/carbonsched,uksouth westeurope,electricitymaps:GB\n")


def _flat(text: str) -> str:
    return " ".join(text.split())


def _init(tmp_path, csv_text: str, *extra: str):
    src = tmp_path / "fleet.csv"
    src.write_text(csv_text)
    return runner.invoke(app, ["catalog", "init", str(tmp_path / "mine.toml"), "--from",
                               str(src), *extra], terminal_width=200)


def test_init_writes_a_catalog_load_catalog_accepts_with_every_value(tmp_path):
    r = _init(tmp_path, HEADER + TOR + LON)
    assert r.exit_code == 0, r.output
    assert "catalog 'mine' with 2 site(s) written to" in _flat(r.output)
    text = (tmp_path / "mine.toml").read_text()
    assert "# ASSUMPTIONS to review" in text           # commented, as promised
    cat = load_catalog(tmp_path / "mine.toml")
    assert [s.id for s in cat.sites] == ["tor", "lon"]
    tor, lon = cat.sites
    assert (tor.role, tor.zone, tor.timezone, tor.signal_source) == (
        "green-hub", "CA-ON", "America/Toronto", "electricitymaps")
    assert {k: (p.count, p.board_power_w) for k, p in tor.gpus.items()} == {
        "A100": (16, 400.0), "V100": (4, 300.0)}
    assert {k: (p.count, p.board_power_w) for k, p in lon.gpus.items()} == {
        "A100": (6, 400.0), "T4": (28, 75.0)}
    # the shipped catalogs' sizing rule: 0.8 x (16 x 0.8125 + 4 x 0.4375) kW
    assert tor.it_power_cap_kw == pytest.approx(0.8 * (16 * 0.8125 + 4 * 0.4375))
    assert (tor.backend.kind, tor.backend.cluster, tor.backend.partition) == (
        "slurm", "ontario", "gpu")
    assert (lon.backend.kind, lon.backend.context, lon.backend.namespace) == (
        "kubernetes", "eu-london", "carbonsched")
    assert lon.aliases == ("uksouth", "westeurope") and tor.aliases == ("canadacentral",)
    # no area rows: the edge is the user area; latency by the fibre rule
    assert list(cat.areas) == ["lon"]
    assert tor.latency_ms["lon"] == round(fibre_rtt_ms(43.69, -79.41, 51.5, -0.12), 1)
    # the row with a provider has a providers file the loader accepts
    cfg = load_providers(tmp_path / "providers-mine.toml")
    assert list(cfg.sites) == ["lon"]
    b = cfg.site("lon")["carbon_intensity"]
    assert (b.provider, b.zone) == ("electricitymaps", "GB")


def test_init_from_site_flags_and_area_rows(tmp_path):
    r = runner.invoke(app, [
        "catalog", "init", str(tmp_path / "f.toml"), "--name", "flags",
        "--site", "id=hub role=green-hub latitude=37.5 longitude=105.2 timezone=Asia/Shanghai "
                  "zone=CN-NX signal_source=modelled-china province=CN-NX gpus=A100:8 "
                  "backend=slurm:zw it_power_cap_kw=7.5",
        "--site", "id=bj role=area 'name=Bei jing' latitude=39.9 longitude=116.4 "
                  "timezone=Asia/Shanghai demand_weight=2"])
    assert r.exit_code == 0, r.output
    cat = load_catalog(tmp_path / "f.toml")
    assert cat.name == "flags" and str(cat.signal_quality) == "modelled"
    assert cat.areas["bj"].name == "Bei jing" and cat.areas["bj"].demand_weight == 2.0
    assert cat.sites[0].it_power_cap_kw == 7.5 and cat.sites[0].province == "CN-NX"
    assert not (tmp_path / "providers-flags.toml").exists()


@pytest.mark.parametrize(("row", "expected"), [
    ("tor,green-hub,T,43.69,-79.41,America/Toronto,CA-ON,,slurm:x,,",
     "row 2, column 'gpus': is empty; a site row needs id, role, latitude"),
    ("tor,green-hub,T,north,-79.41,America/Toronto,CA-ON,A100:1,slurm:x,,",
     "row 2, column 'latitude': 'north' is not a number"),
    ("tor,green-hub,T,43.69,-79.41,America/Toronto,CA-ON,A100:many,slurm:x,,",
     "row 2, column 'gpus': count 'many' of A100 is not a whole number"),
    ("tor,green-hub,T,43.69,-79.41,America/Toronto,CA-ON,H100:8,slurm:x,,",
     "column 'gpus': GPU type 'H100' has no known board power; give it as H100:8:WATTS"),
    ("tor,green-hub,T,43.69,-79.41,America/Toronto,CA-ON,A100:1,pbs:x,,",
     "column 'backend': 'pbs:x' is not a backend; write slurm:CLUSTER[:PARTITION] or "
     "kubernetes:CONTEXT/NAMESPACE"),
    ("tor,hub,T,43.69,-79.41,America/Toronto,CA-ON,A100:1,slurm:x,,",
     "column 'role': unknown role 'hub'"),
    ("tor,green-hub,T,43.69,-79.41,America/Toronto,,A100:1,slurm:x,,",
     "column 'zone': is empty"),
    ("tor,green-hub,T,43.69,-79.41,America/Toronto,CA-ON,A100:1,slurm:x,,nowhere",
     "column 'provider': unknown provider kind 'nowhere'"),
    # a catalog-level violation, found by the catalog's own validator, names the input row
    ("tor,green-hub,T,43.69,-79.41,Mars/Olympus,CA-ON,A100:1,slurm:x,,",
     "row 2 (the user area made from this site's position): catalog 'mine': area 'tor': "
     "field 'timezone' 'Mars/Olympus' is not an IANA time zone; give a name such as"),
    ("tor,green-hub,T,90.01,-79.41,America/Toronto,CA-ON,A100:1,slurm:x,,",
     "field 'latitude' 90.01 is outside -90..90; give degrees north"),
    ("tor,green-hub,T,43.69,-79.41,America/Toronto,CA-ON,A100:1000001:400,slurm:x,,",
     "field 'count' = 1e+06 [GPUs] is above the largest accepted 1e+06 GPUs"),
])
def test_init_errors_name_the_row_the_column_and_the_fix(tmp_path, row, expected):
    r = _init(tmp_path, HEADER + row + "\n")
    assert r.exit_code == 2, r.output
    assert expected in _flat(r.output)
    assert str(tmp_path / "fleet.csv") in _flat(r.output)
    assert not (tmp_path / "mine.toml").exists()      # nothing half-written


def test_init_just_at_the_limits_is_accepted(tmp_path):
    row = "pole,green-hub,P,90,-180,UTC,CA-ON,A100:1000000:400,slurm:x,,\n"
    r = _init(tmp_path, HEADER + row)
    assert r.exit_code == 0, r.output
    site = load_catalog(tmp_path / "mine.toml").sites[0]
    assert (site.latitude, site.longitude, site.gpus["A100"].count) == (90.0, -180.0, 1_000_000)


def test_init_refuses_other_input_with_a_fix(tmp_path):
    bad_header = _init(tmp_path, "id,role,colour\nx,edge,red\n")
    assert bad_header.exit_code == 2
    assert "row 1: unknown column(s) 'colour'; known columns: id, role" in _flat(
        bad_header.output)
    flag = runner.invoke(app, ["catalog", "init", str(tmp_path / "f.toml"), "--site", "id"])
    assert flag.exit_code == 2 and "--site #1: 'id' is not key=value" in _flat(flag.output)
    none = runner.invoke(app, ["catalog", "init", str(tmp_path / "f.toml")])
    assert none.exit_code == 2 and "no site given; give --from FILE.csv" in _flat(none.output)
    assert _init(tmp_path, HEADER + TOR).exit_code == 0
    again = _init(tmp_path, HEADER + TOR)
    assert again.exit_code == 2 and "exists; give --force" in _flat(again.output)
    assert _init(tmp_path, HEADER + TOR, "--force").exit_code == 0


def test_check_refuses_an_invalid_catalog_naming_file_site_and_field(tmp_path):
    assert _init(tmp_path, HEADER + TOR).exit_code == 0
    path = tmp_path / "mine.toml"
    path.write_text(path.read_text().replace("count = 16", "count = -1"))
    r = runner.invoke(app, ["catalog", "check", str(path)], terminal_width=200)
    assert r.exit_code == 2
    assert (f"{path}: site 'tor' (sites[0]), field 'gpus.A100': count is negative (-1); give "
            "a count >= 0") in _flat(r.output)


def test_check_names_a_site_without_history_and_how_to_fix_it(tmp_path, shared_data):
    row = "nowhere,edge,N,0,0,UTC,XX-NONE,T4:4,kubernetes:a/b,,\n"
    assert _init(tmp_path, HEADER + TOR + row).exit_code == 0
    r = runner.invoke(app, ["catalog", "check", str(tmp_path / "mine.toml"), "--data-dir",
                            str(shared_data)], terminal_width=250)
    assert r.exit_code == 2, r.output
    text = _flat(r.output)
    assert ("error: site nowhere cannot be planned: no carbon-intensity history for zone "
            "'XX-NONE': add the zone's files under") in text
    assert "or feed it from a provider (--providers, docs/providers.md)" in text
    assert "plannable: 2022-01-03 .. 2024-01-02" in text      # tor is still reported


def test_check_says_where_each_signal_comes_from(tmp_path, shared_data):
    assert _init(tmp_path, HEADER + TOR + LON).exit_code == 0
    r = runner.invoke(app, ["catalog", "check", str(tmp_path / "mine.toml"), "--data-dir",
                            str(shared_data), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    tor = doc["sites"][0]
    sig = {s["group"]: s for s in tor["signals"]}
    assert sig["carbon intensity"]["status"] == "measured"
    assert sig["carbon intensity"]["detail"].startswith(
        "CA-ON_2022_hourly.csv, CA-ON_2023_hourly.csv (sustain-cluster/carbon_intensity/)")
    assert sig["weather (PUE)"]["status"] == "partial"          # 2023 only in the shared data
    assert "CA-ON_2023.json: 2023-01-01 .. 2023-12-31, 50 % of hours" in sig[
        "weather (PUE)"]["detail"]
    assert sig["price"]["status"] == "not used"
    assert (tor["first_date"], tor["last_date"]) == ("2022-01-03", "2024-01-02")
    assert (doc["common_first_date"], doc["common_last_date"]) == ("2022-01-03", "2024-01-02")
    # with the providers file init wrote, lon's signals are live, from the named zone
    r = runner.invoke(app, ["catalog", "check", str(tmp_path / "mine.toml"), "--data-dir",
                            str(shared_data), "--providers",
                            str(tmp_path / "providers-mine.toml"), "--json"])
    lon = json.loads(r.output)["sites"][1]
    assert lon["source"] == "providers file"
    assert {s["group"]: (s["status"], s["detail"]) for s in lon["signals"]} == {
        "carbon intensity": ("live", "provider electricitymaps, zone GB (cached in the store)"),
        "weather (PUE)": ("live", "provider open-meteo, zone 51.5, -0.12 (cached in the store)"),
        "price": ("not used", "a carbon plan does not use electricity prices")}


def test_the_plannable_range_check_prints_is_exact(tmp_path, shared_data):
    """A plan on the first day ``check`` names works; the days just outside are refused."""
    text = fleet_catalog_toml([{**dict(zip(HEADER.strip().split(","),
                                           TOR.strip().split(","), strict=True)),
                                "_where": "test"}], "edge-of-range")
    path = tmp_path / "edge.toml"
    path.write_text(text)
    cat = load_catalog(path)
    (chk,) = check_fleet(cat, shared_data)
    first, last = pd.Timestamp(chk.first_date), pd.Timestamp(chk.last_date)
    doc = run_daily_plan(chk.first_date, path, data_dir=shared_data, time_limit_s=30).document
    assert doc["date"] == chk.first_date and doc["sites"] == ["tor"]
    for outside in (first - pd.Timedelta(days=1), last + pd.Timedelta(days=1)):
        with pytest.raises((ForecastError, InputError)) as exc:
            run_daily_plan(f"{outside:%Y-%m-%d}", path, data_dir=shared_data, time_limit_s=30)
        assert "nothing can be planned" in str(exc.value) or "48" in str(exc.value)
    assert tomllib.loads(text)["name"] == "edge-of-range"
