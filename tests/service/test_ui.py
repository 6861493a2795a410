"""``GET /ui`` of a real `carbonsched serve` process, in headless Chromium and over HTTP, and
``plans show --jobs`` against the same stored plan."""

from __future__ import annotations

import re
from html import unescape

import httpx
import pandas as pd
import pytest

from carbonsched.api.routes.ui import (
    MAX_PLAN_REF_CHARS,
    MAX_QUERY_CHARS,
    render_page,
)
from carbonsched.notes import group_notes
from carbonsched.store import Store
from tests.report.chromium import artefact_dir
from tests.service.cdp import open_with_headers
from tests.service.conftest import AS_OF, CATALOG, Server, cli, copy_db, mint

pytestmark = pytest.mark.shared_data


class Ui:
    def __init__(self, server: Server, url: str, tokens: dict[str, str]) -> None:
        self.server, self.db_url, self.tokens = server, url, tokens
        self.client = httpx.Client(base_url=server.url, timeout=60)
        store = Store(url)
        self.plan_id = store.latest_plan_id()
        self.doc = store.get_plan(self.plan_id)
        store.engine.dispose()

    def get(self, role: str | None = "read", **params) -> httpx.Response:
        h = {"Authorization": f"Bearer {self.tokens[role]}"} if role else {}
        return self.client.get("/ui", params=params, headers=h)


@pytest.fixture(scope="module")
def ui(plan_db, tmp_path_factory) -> Ui:
    d = tmp_path_factory.mktemp("ui")
    url = copy_db(plan_db, d)
    tokens = {"read": mint(url, "read")}
    srv = Server(url, ["--no-cron", "--as-of", AS_OF, "--catalog", CATALOG], {},
                 d / "serve.log")
    try:
        srv.wait_ready(180, "/readyz")
        yield Ui(srv, url, tokens)
    finally:
        srv.stop()


def _text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


def test_page_in_chromium_shows_the_plan(ui, record_property):
    out = artefact_dir("ui-plan-page")
    png = out / "ui.png"
    page = open_with_headers(f"{ui.server.url}/ui",
                             {"Authorization": f"Bearer {ui.tokens['read']}"}, png)
    (out / "ui.html").write_text(page.dom)
    print(f"\nartefact: screenshot {png}")
    record_property("artefact", f"screenshot {png}")
    assert page.status == 200
    assert page.console_errors == []
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    doc, dom = ui.doc, page.dom
    assert f'data-plan-id="{doc["plan_id"]}"' in dom
    # every site of the plan has its timeline
    for site in doc["sites"]:
        assert f'<svg class="timeline" data-site="{site}"' in dom, site
    # a placement is drawn in its own site's timeline
    p = doc["placements"][0]
    svg = re.search(rf'<svg class="timeline" data-site="{p["site"]}".*?</svg>', dom, re.S)
    assert svg and f'data-job="{p["job_id"]}"' in svg.group(0)
    # the savings are the plan document's
    t = doc["totals"]
    saved = t["baseline_emissions_kg"] - t["emissions_kg"]
    assert saved > 0
    m = re.search(r'id="saved-kg" data-kg="([^"]+)">([^<]+)<', dom)
    assert m and float(m.group(1)) == pytest.approx(saved, abs=1e-6)
    assert m.group(2) == f"{saved:,.1f}"
    m = re.search(r'id="baseline-kg" data-kg="([^"]+)"', dom)
    assert float(m.group(1)) == pytest.approx(t["baseline_emissions_kg"], abs=1e-6)
    # inference per hour: one site-hour's GPUs as the document has them
    i = doc["inference"][0]
    gpus = sum(x["gpus"] for x in doc["inference"]
               if x["site"] == i["site"] and x["hour"] == i["hour"])
    svg = re.search(rf'<svg class="timeline" data-site="{i["site"]}".*?</svg>', dom, re.S)
    assert f'data-hour="{i["hour"][:13]}" data-gpus="{gpus}"' in svg.group(0)
    # the forecast's interval is drawn for every site
    assert dom.count('class="band95"') == len(doc["sites"])
    # every note once, grouped by kind
    assert f'id="notes" data-count="{len(doc["notes"])}"' in dom
    counts = [int(c) for c in re.findall(r'class="note-kind" data-count="(\d+)"', dom)]
    assert sum(counts) == len(doc["notes"]) and len(counts) < len(doc["notes"])


def test_without_a_token_401_as_the_api(ui, tmp_path):
    r = ui.get(role=None)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert "token create --role read" in r.json()["detail"]
    r = ui.client.get("/ui", headers={"Authorization": "Bearer not-a-token"})
    assert r.status_code == 401
    r = ui.get()
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    # a browser without the token gets the same 401
    page = open_with_headers(f"{ui.server.url}/ui", {}, tmp_path / "401.png")
    assert page.status == 401 and "missing bearer token" in page.dom


def test_job_search(ui):
    p = ui.doc["placements"][3]
    r = ui.get(job=p["job_id"].upper())  # case-insensitive
    assert r.status_code == 200
    rows = re.findall(r'<tr data-job="([^"]+)">', r.text)
    assert rows == [x["job_id"] for x in ui.doc["placements"] if x["job_id"] == p["job_id"]]
    row = re.search(rf'<tr data-job="{p["job_id"]}">(.*?)</tr>', r.text).group(1)
    cells = [_text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
    assert cells[3] == p["site"] and cells[4] == p["start"][5:16].replace("T", " ")
    assert cells[8] == f"{p['emissions_kg']:,.2f}"
    assert "1 job row(s) with job id containing" in _text(r.text)
    # by tenant: every job of that tenant, nothing else
    tenants = {j["job_id"]: j["tenant"] for j in ui.doc["workload"]["jobs"]}
    tenant = tenants[p["job_id"]]
    rows = re.findall(r'<tr data-job="([^"]+)">', ui.get(tenant=tenant).text)
    assert sorted(rows) == sorted(x["job_id"] for x in ui.doc["placements"]
                                  if tenants[x["job_id"]] == tenant)
    # an unknown job says none
    r = ui.get(job="no-such-job-xyz")
    assert r.status_code == 200 and "<tr data-job" not in r.text
    assert f"no job in plan {ui.plan_id[:12]} with job id containing “no-such-job-xyz”" in \
        _text(r.text)


def test_search_and_plan_limits(ui):
    at = ui.get(job="j" * MAX_QUERY_CHARS)
    assert at.status_code == 200 and "no job in plan" in _text(at.text)
    over = ui.get(tenant="t" * (MAX_QUERY_CHARS + 1))
    assert over.status_code == 422
    assert (f"?tenant= is {MAX_QUERY_CHARS + 1} characters; at most {MAX_QUERY_CHARS}"
            in _text(over.text))
    r = ui.get(plan="a" * MAX_PLAN_REF_CHARS)
    assert r.status_code == 404 and "no plan" in _text(r.text)
    assert ui.get(plan="a" * (MAX_PLAN_REF_CHARS + 1)).status_code == 422


def test_plan_by_prefix_and_unknown_plan(ui):
    r = ui.get(plan=ui.plan_id[:12])
    assert r.status_code == 200 and f'data-plan-id="{ui.plan_id}"' in r.text
    assert ui.get(plan="latest").status_code == 200
    r = ui.get(plan="ffffffffffff")
    assert r.status_code == 404
    assert "no plan 'ffffffffffff'" in _text(r.text) and 'id="message"' in r.text
    r = ui.get(plan="abc")
    assert r.status_code == 404 and "at least 6 characters" in _text(r.text)


def test_plans_show_jobs_rows_are_the_documents(ui):
    env = {"CARBONSCHED_DATABASE_URL": ui.db_url, "COLUMNS": "200"}
    r = cli("plans", "show", ui.plan_id[:12], "--jobs", env=env)
    assert r.returncode == 0, r.stderr
    rows = {}
    for line in r.stdout.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) == 7 and cells[0] in {p["job_id"] for p in ui.doc["placements"]}:
            rows.setdefault(cells[0], []).append(cells)
    assert sum(len(v) for v in rows.values()) == len(ui.doc["placements"])
    for p in ui.doc["placements"]:
        job, start, end, site, gpus, kwh, kg = rows[p["job_id"]][p.get("piece", 0)]
        assert start == p["start"][:16].replace("T", " ")
        assert end == p["end"][:16].replace("T", " ")
        assert site == p["site"] and gpus == f"{p['gpus']}× {p['gpu_type']}"
        assert kg == f"{p['emissions_kg']:,.3f}" and kwh == f"{p['energy_kwh']:,.1f}"
    # quiet by default: without --jobs no job row
    r = cli("plans", "show", ui.plan_id[:12], env=env)
    assert r.returncode == 0 and ui.doc["placements"][0]["job_id"] not in r.stdout


def test_notes_grouped_by_kind_keep_every_note():
    # the page groups by the same kinds as the terminal (carbonsched.notes.NOTE_KINDS)
    sites = ["a-site", "b-site"]
    notes = ["workload: DEMO day",
             "a-site: 2022: fossil must-run floor 65.8% of demand",
             "b-site: 2022: fossil must-run floor 38.8% of demand",
             "a-site: no price in any of the 8952 hour(s) loaded", "solver: greedy fallback",
             "b-site: no price in any of the 10 hour(s) loaded", "something without a topic"]
    groups = group_notes(notes, sites)
    assert [g["kind"] for g in groups] == ["workload", "grid-model calibration", "missing data",
                                          "solver", "other"]
    assert [g["sites"] for g in groups] == [[], sites, sites, [], []]
    assert [len(g["notes"]) for g in groups] == [1, 2, 2, 1, 1]
    assert sorted(n for g in groups for n in g["notes"]) == sorted(notes)


def test_sites_without_a_forecast_are_counted_on_the_page(plan_db):
    store = Store(f"sqlite:///{plan_db}")
    doc = store.get_plan(store.latest_plan_id())
    store.engine.dispose()
    html = render_page(doc, pd.DataFrame(), [])
    m = re.search(r'id="missing-forecasts">([^<]+)<', html)
    assert m and m.group(1).startswith(f"{len(doc['sites'])} site(s) without a stored "
                                       "carbon-intensity forecast")
    assert html.count("no stored carbon-intensity forecast for this site") == len(doc["sites"])


def test_no_plan_yet_is_a_page_saying_what_to_do(start_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'empty.sqlite'}"
    token = mint(url, "read")
    srv = start_server(url, "--no-cron", "--as-of", AS_OF, "--catalog", CATALOG)
    r = httpx.get(f"{srv.url}/ui", headers={"Authorization": f"Bearer {token}"}, timeout=60)
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    assert (f"no plan yet for catalog '{CATALOG}': run `carbonsched plan`" in _text(r.text))
