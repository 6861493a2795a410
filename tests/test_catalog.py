from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from carbonsched.catalog import (
    Catalog,
    fibre_rtt_ms,
    great_circle_km,
    list_catalogs,
    load_catalog,
)
from carbonsched.domain import PueModel, SignalQuality, SiteRole
from carbonsched.errors import CatalogError, UnknownSiteError

CHINA = "china-eastdata-westcompute"
CHINA_SITES = ["cn-nm-horinger", "cn-gz-guian", "cn-gs-qingyang", "cn-nx-zhongwei",
               "cn-he-zhangjiakou", "cn-sh-qingpu", "cn-gd-shaoguan", "cn-sc-tianfu"]
GLOBAL_SITES = ["ca-on-toronto", "br-sp-saopaulo", "gb-london", "us-ny-newyork",
                "us-pjm-ashburn", "jp-tk-tokyo", "sg-singapore", "de-frankfurt"]


@pytest.fixture()
def minimal_text(fixtures_dir: Path) -> str:
    return (fixtures_dir / "catalog" / "minimal.toml").read_text()


def write(tmp_path: Path, text: str, name: str = "bad.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# --- the minimal fixture ---------------------------------------------------------------------

def test_minimal_fixture_loads_with_defaults(fixtures_dir: Path) -> None:
    cat = load_catalog(fixtures_dir / "catalog" / "minimal.toml")
    assert isinstance(cat, Catalog)
    assert cat.name == "minimal"
    assert cat.signal_quality == SignalQuality.MEASURED
    assert cat.site_ids == ["hub-a", "edge-b"]
    assert list(cat.areas) == ["metro", "far"]
    assert cat.areas["metro"].demand_weight == 2.0
    assert cat.areas["far"].demand_weight == 1.0  # default
    hub, edge = cat.sites
    assert hub.role == SiteRole.GREEN_HUB and edge.role == SiteRole.EDGE
    assert hub.pue == PueModel(pue_min=1.1)
    assert edge.pue == PueModel()  # empty table: all defaults
    assert edge.green_surplus_max_kw == 0.0
    assert hub.backend.kind == "slurm" and hub.backend.cluster == "hub-a"
    assert hub.backend.partition == "gpu"
    assert edge.backend.context == "edge-b" and edge.backend.namespace == "carbonsched"
    assert edge.gpu_count("T4") == 16 and hub.gpu_count("T4") == 0
    assert hub.meta == {"residency_group": "north"}
    assert edge.meta == {"weather_file": "sustain-cluster/weather/SG_2023.json"}
    assert cat.gpu_types() == ["A100", "T4"]
    assert [s.id for s in cat.sites_with_role("edge")] == ["edge-b"]


def test_unknown_site_lists_known_ids(fixtures_dir: Path) -> None:
    cat = load_catalog(fixtures_dir / "catalog" / "minimal.toml")
    with pytest.raises(UnknownSiteError, match=r"unknown site 'nope'; known sites: edge-b, hub-a"):
        cat.site("nope")


# --- validation: each error names file, site, field and the fix --------------------------------

BAD = [
    # (description, old, new, expected message fragment)
    ("missing field", 'zone = "SG"\n', "",
     r"bad\.toml: site 'edge-b' \(sites\[1\]\): missing field 'zone'; add zone ="),
    ("wrong type", "it_power_cap_kw = 10.0", 'it_power_cap_kw = "ten"',
     r"site 'hub-a' \(sites\[0\]\): field 'it_power_cap_kw' has type str"),
    ("bool is not a number", "latitude = 10.0", "latitude = true",
     r"site 'hub-a' \(sites\[0\]\): field 'latitude' has type bool"),
    ("unknown role", 'role = "edge"', 'role = "core"',
     r"site 'edge-b' \(sites\[1\]\): unknown role 'core'; give role = 'green-hub' or 'edge'"),
    ("unknown source", 'signal_source = "electricitymaps"\nlatitude = 10.0',
     'signal_source = "watttime"\nlatitude = 10.0',
     r"site 'hub-a' \(sites\[0\]\): unknown signal_source 'watttime'; give one of "
     r"'electricitymaps', 'eia930', 'modelled-china'"),
    ("unknown backend", 'kind = "kubernetes"', 'kind = "nomad"',
     r"site 'edge-b' \(sites\[1\]\), field 'backend': unknown backend kind 'nomad'"),
    ("slurm without cluster", 'cluster = "hub-a"\n', "",
     r"site 'hub-a' \(sites\[0\]\), field 'backend': missing field 'cluster'"),
    ("negative gpu count", "count = 8", "count = -8",
     r"site 'hub-a' \(sites\[0\]\), field 'gpus.A100': count is negative \(-8\)"),
    ("negative power cap", "it_power_cap_kw = 5.0", "it_power_cap_kw = -5.0",
     r"site 'edge-b' \(sites\[1\]\): field 'it_power_cap_kw' must be > 0, got -5.0"),
    ("negative surplus", "green_surplus_max_kw = 5.0", "green_surplus_max_kw = -1.0",
     r"site 'hub-a' \(sites\[0\]\): field 'green_surplus_max_kw' must be >= 0"),
    ("latency to unknown area", "far = 2.6", "moon = 2.6",
     r"site 'edge-b' \(sites\[1\]\): field 'latency_ms' names unknown area 'moon'; define "
     r"\[areas.moon\] or use one of far, metro"),
    ("negative latency", "far = 2.6", "far = -2.6",
     r"site 'edge-b' \(sites\[1\]\): field 'latency_ms.far' is negative"),
    ("duplicate id", 'id = "edge-b"', 'id = "hub-a"',
     r"site 'hub-a' \(sites\[1\]\): duplicate site id \(also sites\[0\]\); give every site a "
     r"unique id"),
    ("edge without latency", "metro = 1.0\nfar = 2.6\n", "",
     r"site 'edge-b' \(sites\[1\]\): an edge site has no latency table; add \[sites.latency_ms\]"),
    ("bad timezone", 'timezone = "Asia/Singapore"', 'timezone = "Asia/Atlantis"',
     r"site 'edge-b' \(sites\[1\]\): field 'timezone' 'Asia/Atlantis' is not an IANA time zone"),
    ("latitude out of range", "latitude = 10.0", "latitude = 100.0",
     r"site 'hub-a' \(sites\[0\]\): field 'latitude' 100.0 is outside -90..90"),
    ("unknown field (typo)", "it_power_cap_kw = 5.0", "it_power_cap_kw = 5.0\nit_power_kw = 5.0",
     r"site 'edge-b' \(sites\[1\]\): unknown field\(s\) 'it_power_kw'; remove or rename them"),
    ("pue below 1", "pue_min = 1.1", "pue_min = 0.9",
     r"site 'hub-a' \(sites\[0\]\), field 'pue': pue_min 0.9 is below 1"),
    ("unknown pue field", "pue_min = 1.1", "pue_minimum = 1.1",
     r"site 'hub-a' \(sites\[0\]\), field 'pue': unknown field\(s\) 'pue_minimum'"),
    ("modelled source without province", 'signal_source = "electricitymaps"\nlatitude = 10.0',
     'signal_source = "modelled-china"\nlatitude = 10.0',
     r"site 'hub-a' \(sites\[0\]\): signal_source 'modelled-china' needs field 'province'"),
    ("area without timezone", 'timezone = "UTC"\n', "",
     r"area 'metro': missing field 'timezone'"),
    ("unknown kubernetes workload", 'namespace = "carbonsched"',
     'namespace = "carbonsched"\nworkload = "mpijob"',
     r"site 'edge-b' \(sites\[1\]\), field 'backend': unknown workload 'mpijob'; give "
     r"workload = one of 'job', 'kueue', 'jobset', 'volcano'"),
    ("kueue without queue", 'namespace = "carbonsched"',
     'namespace = "carbonsched"\nworkload = "kueue"',
     r"field 'backend': workload 'kueue' needs field 'queue'; add queue = the name of the Kueue "
     r"LocalQueue"),
    ("queue on a plain job", 'namespace = "carbonsched"',
     'namespace = "carbonsched"\nqueue = "team-a"',
     r"field 'backend': field 'queue' applies to workload 'kueue' or 'volcano', not 'job'"),
    ("queue name not DNS-1123", 'namespace = "carbonsched"',
     'namespace = "carbonsched"\nworkload = "volcano"\nqueue = "Team_A"',
     r"field 'backend': field 'queue' 'Team_A' is not a queue name \(6 characters\)"),
    ("queue name of 64 characters", 'namespace = "carbonsched"',
     'namespace = "carbonsched"\nworkload = "kueue"\nqueue = "' + "q" * 64 + '"',
     r"field 'queue' 'q{64}' is not a queue name \(64 characters\); give at most 63"),
    ("workload on a slurm site", 'cluster = "hub-a"\n', 'cluster = "hub-a"\nworkload = "kueue"\n',
     r"site 'hub-a' \(sites\[0\]\), field 'backend': unknown field\(s\) 'workload'"),
    ("unknown signal quality", 'signal_quality = "measured"', 'signal_quality = "great"',
     r"top level: unknown signal_quality 'great'; give 'measured' or 'modelled'"),
]


@pytest.mark.parametrize(("what", "old", "new", "message"), BAD, ids=[b[0] for b in BAD])
def test_validation_errors(tmp_path: Path, minimal_text: str, what: str, old: str, new: str,
                           message: str) -> None:
    assert old in minimal_text, f"fixture lacks {old!r}"
    path = write(tmp_path, minimal_text.replace(old, new, 1))
    with pytest.raises(CatalogError, match=message) as info:
        load_catalog(path)
    assert str(path) in str(info.value)
    assert "regions/schema.md" in str(info.value)


def test_measured_catalog_with_modelled_site_is_refused(tmp_path: Path, minimal_text: str) -> None:
    text = minimal_text.replace('signal_source = "electricitymaps"\nlatitude = 10.0',
                                'signal_source = "modelled-china"\nprovince = "CN-NX"\n'
                                'latitude = 10.0', 1)
    with pytest.raises(CatalogError, match=r"signal_quality is 'measured' but a site uses "
                                           r"signal_source 'modelled-china'; set signal_quality"):
        load_catalog(write(tmp_path, text))
    ok = load_catalog(write(tmp_path, text.replace('"measured"', '"modelled"'), "ok.toml"))
    assert ok.site("hub-a").province == "CN-NX"


def test_toml_syntax_error_names_file(tmp_path: Path) -> None:
    path = write(tmp_path, "name = \n")
    with pytest.raises(CatalogError, match=r"bad\.toml: not valid TOML .*line 1"):
        load_catalog(path)


def test_missing_file_and_unknown_name() -> None:
    with pytest.raises(CatalogError, match=r"nowhere\.toml: catalog file not found"):
        load_catalog("nowhere.toml")
    with pytest.raises(CatalogError, match=r"unknown catalog 'atlantis'; shipped catalogs: "
                                           r"china-eastdata-westcompute, global"):
        load_catalog("atlantis")


def test_no_sites_refused(tmp_path: Path, minimal_text: str) -> None:
    head = minimal_text.split("[[sites]]")[0]
    with pytest.raises(CatalogError, match=r"top level: missing key 'sites'; add at least one "
                                           r"\[\[sites\]\] table"):
        load_catalog(write(tmp_path, head))
    empty = head.replace('signal_quality = "measured"\n', 'signal_quality = "measured"\n'
                         'sites = []\n')
    with pytest.raises(CatalogError, match=r"top level: no sites; add at least one"):
        load_catalog(write(tmp_path, empty, "empty.toml"))


# --- the latency rule ------------------------------------------------------------------------

def test_great_circle_and_rtt_hand_computed() -> None:
    # 1 degree of longitude on the equator: R * pi / 180 = 111.1951 km
    assert great_circle_km(0, 0, 0, 1) == pytest.approx(111.1951, abs=1e-3)
    # RTT = 2 * 111.1951 * 1.5 / 204 + 1 = 2.6352 ms
    assert fibre_rtt_ms(0, 0, 0, 1) == pytest.approx(2.6352, abs=1e-3)
    assert fibre_rtt_ms(10, 20, 10, 20) == pytest.approx(1.0)


@pytest.mark.parametrize("name", [CHINA, "global", "us-2022"])
def test_shipped_latencies_follow_the_rule(name: str) -> None:
    cat = load_catalog(name)
    for s in cat.sites:
        assert set(s.latency_ms) == set(cat.areas), s.id
        for aid, ms in s.latency_ms.items():
            a = cat.areas[aid]
            assert ms == pytest.approx(fibre_rtt_ms(s.latitude, s.longitude, a.latitude,
                                                    a.longitude), abs=0.051), (s.id, aid)


# --- shipped catalogs ------------------------------------------------------------------------

def test_list_catalogs() -> None:
    # exactly the catalogs: the providers files beside them are not catalogs
    assert list_catalogs() == [CHINA, "global", "us-2022"]
    for name in list_catalogs():
        load_catalog(name)


def test_catalog_list_command_shows_every_catalog() -> None:
    from typer.testing import CliRunner

    from carbonsched.cli.app import app

    r = CliRunner().invoke(app, ["catalog", "list"])
    assert r.exit_code == 0, r.output
    assert "global" in r.output and "us-2022" in r.output and "providers" not in r.output


def test_china_catalog_contents() -> None:
    cat = load_catalog(CHINA)
    assert cat.name == CHINA
    assert cat.signal_quality == SignalQuality.MODELLED
    assert cat.site_ids == CHINA_SITES
    assert list(cat.areas) == ["beijing", "shanghai", "guangzhou", "chengdu"]
    roles = {s.id: s.role for s in cat.sites}
    assert [i for i, r in roles.items() if r == SiteRole.GREEN_HUB] == CHINA_SITES[:4]
    for s in cat.sites:
        assert s.signal_source == "modelled-china"
        assert s.timezone == "Asia/Shanghai"
        assert s.zone == s.province
        if s.role == SiteRole.GREEN_HUB:
            assert s.backend.kind == "slurm" and s.backend.cluster
            assert s.green_surplus_max_kw > 0
        else:
            assert s.backend.kind == "kubernetes" and s.backend.namespace == "carbonsched"
    assert cat.site("cn-sc-tianfu").annual_emission_factor_g_per_kwh == 156.4
    assert cat.site("cn-nx-zhongwei").gpus["A100"].count == 12
    assert cat.site("cn-he-zhangjiakou").latency_ms["beijing"] == 3.4


@pytest.mark.shared_data
def test_china_emission_factors_are_the_official_ones(shared_data: Path) -> None:
    doc = json.loads((shared_data / "china" /
                      "codecarbon-3.3.2_china_provincial_emissions_2023.json").read_text())
    for s in load_catalog(CHINA).sites:
        assert s.annual_emission_factor_g_per_kwh == doc["data"][s.province]["emission_factor"]
        assert "2025 No. 47" in s.meta["emission_factor_source"]


def test_kubernetes_workload_fields_parse_and_a_63_character_queue_is_accepted(
        tmp_path: Path, minimal_text: str) -> None:
    assert load_catalog(write(tmp_path, minimal_text, "plain.toml")).site("edge-b").backend \
        .workload == "job"
    queue = "q" * 63  # the label-value limit exactly
    text = minimal_text.replace('namespace = "carbonsched"',
                                f'namespace = "carbonsched"\nworkload = "kueue"\nqueue = "{queue}"')
    b = load_catalog(write(tmp_path, text)).site("edge-b").backend
    assert (b.workload, b.queue) == ("kueue", queue)
    text = minimal_text.replace('namespace = "carbonsched"',
                                'namespace = "carbonsched"\nworkload = "volcano"')
    b = load_catalog(write(tmp_path, text, "v.toml")).site("edge-b").backend
    assert (b.workload, b.queue) == ("volcano", None)


def test_global_catalog_shows_every_kubernetes_workload_kind() -> None:
    kinds = {s.id: (s.backend.workload, s.backend.queue) for s in load_catalog("global").sites
             if s.backend.kind == "kubernetes"}
    assert kinds == {"us-ny-newyork": ("job", None), "us-pjm-ashburn": ("kueue", "gpu-batch"),
                     "jp-tk-tokyo": ("jobset", None), "sg-singapore": ("volcano", "default"),
                     "de-frankfurt": ("job", None)}


def test_global_catalog_contents() -> None:
    cat = load_catalog("global")
    assert cat.signal_quality == SignalQuality.MEASURED
    assert cat.site_ids == GLOBAL_SITES
    assert list(cat.areas) == ["new-york", "washington", "toronto", "london", "frankfurt",
                               "tokyo", "singapore"]
    assert {s.zone for s in cat.sites_with_role("green-hub")} == {"CA-ON", "BR-SP", "GB"}
    assert all(s.signal_source == "electricitymaps" for s in cat.sites)


@pytest.mark.shared_data
def test_global_zones_have_2023_history_and_weather(shared_data: Path) -> None:
    for s in load_catalog("global").sites:
        ci = shared_data / "sustain-cluster" / "carbon_intensity" / f"{s.zone}_2023_hourly.csv"
        assert ci.is_file(), s.id
        # weather is found by zone, every year (issue 7 item 11), not pinned in the catalog
        assert (shared_data / "sustain-cluster" / "weather" / f"{s.zone}_2023.json").is_file()


@pytest.mark.parametrize("name", [CHINA, "global", "us-2022"])
def test_every_area_has_an_inference_edge_within_slo(name: str) -> None:
    cat = load_catalog(name)
    for aid in cat.areas:
        edges = [s for s in cat.sites_with_role("edge")
                 if s.latency_ms.get(aid, math.inf) <= 20.0 and s.gpu_count("T4") > 0]
        assert edges, aid


@pytest.mark.parametrize("name", [CHINA, "global", "us-2022"])
def test_power_caps_are_80pct_of_full_load(name: str) -> None:
    per_gpu_kw = {"A100": 0.8125, "V100": 0.4375, "T4": 0.14}
    for s in load_catalog(name).sites:
        full = sum(p.count * per_gpu_kw[t] for t, p in s.gpus.items())
        assert s.it_power_cap_kw == pytest.approx(0.8 * full, abs=0.05), s.id


def test_us_2022_catalog_contents() -> None:
    cat = load_catalog("us-2022")
    assert cat.site_ids == ["us-bpat-seattle", "us-ciso-sanjose", "us-azps-phoenix",
                            "us-erco-dallas"]
    assert list(cat.areas) == ["san-francisco", "los-angeles", "phoenix", "dallas", "houston"]
    assert all(s.signal_source == "eia930" for s in cat.sites)


@pytest.mark.shared_data
def test_us_2022_zones_have_2022_history_and_epw(shared_data: Path) -> None:
    for s in load_catalog("us-2022").sites:
        assert (shared_data / "eia930-sustaindc" / f"{s.zone}_NG_avgCI_2022.csv").is_file()
        assert s.meta["weather_file"].endswith(".epw")
        assert (shared_data / s.meta["weather_file"]).is_file(), s.id


@pytest.mark.parametrize(("value", "message"), [
    ("nan", r"field 'facility_power_cap_kw' is nan \[kW\], not a finite number"),
    ("inf", r"field 'facility_power_cap_kw' is inf \[kW\], not a finite number"),
    ("1e8", r"field 'facility_power_cap_kw' = 1e\+08 \[kW\] is above the largest accepted "
            r"1e\+07 kW"),
    ("0.0", r"field 'facility_power_cap_kw' must be > 0, got 0.0"),
    ("-130.0", r"field 'facility_power_cap_kw' must be > 0, got -130.0"),
    ('"130"', r"field 'facility_power_cap_kw' has type str"),
])
def test_facility_power_cap_is_validated(tmp_path: Path, minimal_text: str, value: str,
                                         message: str) -> None:
    text = minimal_text.replace("it_power_cap_kw = 10.0",
                                f"it_power_cap_kw = 10.0\nfacility_power_cap_kw = {value}", 1)
    with pytest.raises(CatalogError, match=r"site 'hub-a' \(sites\[0\]\): " + message):
        load_catalog(write(tmp_path, text))


def test_facility_power_cap_is_optional_and_read(tmp_path: Path, minimal_text: str) -> None:
    # just above zero is accepted; a site without the field has none
    text = minimal_text.replace("it_power_cap_kw = 10.0",
                                "it_power_cap_kw = 10.0\nfacility_power_cap_kw = 0.001", 1)
    cat = load_catalog(write(tmp_path, text))
    assert cat.sites[0].facility_power_cap_kw == 0.001
    assert cat.sites[1].facility_power_cap_kw is None


# --- aliases (the Carbon Aware SDK's location names) ------------------------------------------

def _with_aliases(minimal_text: str, hub: str, edge: str | None = None) -> str:
    text = minimal_text.replace('id = "hub-a"', f'id = "hub-a"\naliases = {hub}', 1)
    if edge is not None:
        text = text.replace('id = "edge-b"', f'id = "edge-b"\naliases = {edge}', 1)
    return text


def test_aliases_are_read_and_found_case_insensitively(tmp_path: Path, minimal_text: str) -> None:
    longest = "w" * 100  # just at the limit (MAX_NAME_CHARS)
    cat = load_catalog(write(tmp_path, _with_aliases(
        minimal_text, f'["westus", "us-west-1", "{longest}"]', '["UKSouth"]')))
    assert cat.sites[0].aliases == ("westus", "us-west-1", longest)
    assert cat.sites[1].aliases == ("UKSouth",)
    assert cat.names() == ["hub-a", "edge-b", "westus", "us-west-1", longest, "UKSouth"]
    for name, site in [("westus", "hub-a"), ("WestUS", "hub-a"), ("US-WEST-1", "hub-a"),
                       ("uksouth", "edge-b"), ("UKSOUTH", "edge-b"), ("hub-a", "hub-a"),
                       ("HUB-A", "hub-a"), (longest.upper(), "hub-a")]:
        assert cat.find_site(name).id == site, name
    with pytest.raises(UnknownSiteError, match=r"unknown site 'eastus'; known sites: .*westus"):
        cat.find_site("eastus")
    # a site without the field has none
    assert load_catalog(write(tmp_path, minimal_text, "plain.toml")).sites[0].aliases == ()


@pytest.mark.parametrize(("hub", "edge", "message"), [
    # unique across sites, case-insensitively
    ('["westus"]', '["WestUS"]', r"site 'edge-b' \(sites\[1\]\), field 'aliases': alias "
                                 r"'WestUS' is already an alias of site 'hub-a' \(names are "
                                 r"compared case-insensitively\); give every alias once"),
    # twice on one site
    ('["westus", "westus"]', None, r"alias 'westus' is already an alias of site 'hub-a'"),
    # another site's id (or its own)
    ('["Edge-B"]', None, r"alias 'Edge-B' is already the id of site 'edge-b'"),
    ('["hub-a"]', None, r"alias 'hub-a' is already the id of site 'hub-a'"),
    # not a name
    ('["west us"]', None, r"field 'aliases\[0\]': alias 'west us' is not a name; use letters"),
    ('[""]', None, r"field 'aliases\[0\]': alias '' is not a name"),
    ('["-westus"]', None, r"alias '-westus' is not a name"),
    ('[7]', None, r"field 'aliases\[0\]': is a int \(7\); give each alias as a string"),
    ('"westus"', None, r"field 'aliases' has type str \('westus'\); give a list"),
    # one character over the limit
    ('["' + "w" * 101 + '"]', None, r"field 'aliases\[0\]': alias 'w{20}'\.\.\. is 101 "
                                    r"characters long; give at most 100"),
])
def test_alias_validation(tmp_path: Path, minimal_text: str, hub: str, edge: str | None,
                          message: str) -> None:
    with pytest.raises(CatalogError, match=message) as err:
        load_catalog(write(tmp_path, _with_aliases(minimal_text, hub, edge)))
    assert str(err.value).startswith(str(tmp_path / "bad.toml"))
    assert str(err.value).endswith("(see regions/schema.md)")


@pytest.mark.parametrize(("name", "alias", "site"), [
    ("us-2022", "westus", "us-ciso-sanjose"), ("global", "uksouth", "gb-london"),
    ("global", "EastUS", "us-pjm-ashburn"), (CHINA, "chinaeast2", "cn-sh-qingpu")])
def test_shipped_catalogs_carry_cloud_region_aliases(name: str, alias: str, site: str) -> None:
    assert load_catalog(name).find_site(alias).id == site


# --- node shapes (issue 33 item 2) -------------------------------------------------------------

def _shaped(minimal_text: str, extra: str, count: int = 8) -> str:
    return minimal_text.replace("count = 8\nboard_power_w = 400.0",
                                f"count = {count}\nboard_power_w = 400.0\n{extra}", 1)


@pytest.mark.parametrize(("count", "extra", "message"), [
    (12, "gpus_per_node = 8",
     r"field 'gpus.A100': count 12 is not a whole number of nodes of gpus_per_node = 8 GPUs; "
     r"give a count that is a multiple of 8 \(such as 8 or 16\)"),
    (9, "gpus_per_node = 8", r"count 9 is not a whole number of nodes"),     # one above 8
    (7, "gpus_per_node = 8", r"count 7 is not a whole number of nodes .* \(such as 8\)"),
    (8, "gpus_per_node = 0", r"gpus_per_node must be >= 1, got 0"),
    (8, "gpus_per_node = 2000", r"'gpus_per_node' = 2000 \[GPUs\] is above the largest"),
    (8, 'gpus_per_node = "8"', r"field 'gpus_per_node' has type str"),
    (8, "gpus_per_node = 8.0", r"field 'gpus_per_node' has type float"),
    (8, "gpus_per_node = 8\nnodes_per_domain = 0", r"nodes_per_domain must be >= 1, got 0"),
    (8, "nodes_per_domain = 4", r"nodes_per_domain is given without gpus_per_node; add "
                                r"gpus_per_node"),
    (8, "gpu_per_node = 8", r"unknown field\(s\) 'gpu_per_node'"),
])
def test_node_shape_is_validated(tmp_path: Path, minimal_text: str, count: int, extra: str,
                                 message: str) -> None:
    with pytest.raises(CatalogError, match=r"site 'hub-a' \(sites\[0\]\).*" + message) as info:
        load_catalog(write(tmp_path, _shaped(minimal_text, extra, count)))
    assert "regions/schema.md" in str(info.value)


@pytest.mark.parametrize(("count", "extra", "per_node", "domain"), [
    (16, "gpus_per_node = 8", 8, None),             # two whole nodes
    (8, "gpus_per_node = 8\nnodes_per_domain = 1", 8, 1),   # just at the limits
    (0, "gpus_per_node = 8", 8, None),               # no GPUs is zero nodes
    (1024, "gpus_per_node = 1024", 1024, None),      # the largest accepted shape
])
def test_node_shape_is_read(tmp_path: Path, minimal_text: str, count: int, extra: str,
                            per_node: int, domain: int | None) -> None:
    pool = load_catalog(write(tmp_path, _shaped(minimal_text, extra, count))).sites[0].gpus["A100"]
    assert (pool.count, pool.gpus_per_node, pool.nodes_per_domain) == (count, per_node, domain)


def test_a_pool_without_node_shape_is_one_node(fixtures_dir: Path) -> None:
    pool = load_catalog(fixtures_dir / "catalog" / "minimal.toml").sites[0].gpus["A100"]
    assert (pool.gpus_per_node, pool.node_gpus, pool.gang_nodes(8)) == (None, 8, 1)


@pytest.mark.parametrize("name", ["global", "us-2022", CHINA])
def test_shipped_catalogs_declare_node_shapes(name: str) -> None:
    for site in load_catalog(name).sites:
        for gpu_type, pool in site.gpus.items():
            assert pool.gpus_per_node is not None, (site.id, gpu_type)
            assert pool.count % pool.gpus_per_node == 0
            if gpu_type == "A100" and pool.count % 8 == 0:
                assert pool.gpus_per_node == 8, (site.id, "HGX A100 8-GPU board")


def test_catalog_show_prints_node_shapes_and_counts_unshaped_pools(fixtures_dir: Path) -> None:
    from typer.testing import CliRunner

    from carbonsched.cli.app import app

    r = CliRunner().invoke(app, ["catalog", "show", "global"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "16×A100 (2×8)" in r.output and "28×T4 (7×4)" in r.output
    assert "declare no gpus_per_node" not in r.output
    r = CliRunner().invoke(app, ["catalog", "show", str(fixtures_dir / "catalog/minimal.toml")],
                           env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "8×A100 (one node)" in r.output
    assert "3 GPU pool(s) declare no gpus_per_node and count as one node each" in r.output


def test_a_grid_agreement_parses_and_a_bad_one_names_site_and_fix(
        tmp_path: Path, minimal_text: str) -> None:
    table = ('namespace = "carbonsched"\n\n[sites.grid_agreement]\ntarget_fraction = 1.0\n'
             'notice_hours = 4\nbaseline_method = "prior-days-mean"\n'
             'shortfall_penalty_per_kwh = 0.5\n')
    ag = load_catalog(write(tmp_path, minimal_text.replace('namespace = "carbonsched"', table),
                            "ok.toml")).site("edge-b").meta["grid_agreement"]
    assert (ag.site, ag.target_fraction, ag.notice_hours, str(ag.baseline_method)) == (
        "edge-b", 1.0, 4.0, "prior-days-mean")
    bad = table.replace("target_fraction = 1.0", "target_fraction = 1.5")
    with pytest.raises(CatalogError, match=r"edge-b.*grid_agreement.*target_fraction.*"
                                           r"docs/grid-flexibility.md"):
        load_catalog(write(tmp_path, minimal_text.replace('namespace = "carbonsched"', bad)))
