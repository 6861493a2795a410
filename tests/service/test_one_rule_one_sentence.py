"""One rule, one sentence, at every entry point: grid events and inference demand names.

A grid event is read by ``carbonsched grid-event add`` (Typer's CliRunner), by
``POST /v1/grid-events`` (a real ``carbonsched serve``) and from an event file
(:func:`carbonsched.flex.read_grid_events`, what ``plan --grid-events`` reads); the store takes
only a :class:`carbonsched.flex.GridEvent`, built under the same rules. Before, the CLI and the
API said ``target_kw=0`` and an ``end`` not after ``start`` in other words, the CLI and a file
took years past 2200 that the API refused, and a notice over a year reached Typer's words at the
CLI and pydantic's at the API. Each rule is checked with a known-bad value (the same sentence at
every entry point: after ``error:`` at the CLI, exit 2; in the API's 422 ``message``; in the
file's error after its file and row) and a value just at the limit (accepted by each).

An inference demand's ``area`` and ``gpu_type`` in a workload file are read with the API's
inference query types: before, a file took any length and control characters in them.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from carbonsched.cli.app import app
from carbonsched.errors import InputError
from carbonsched.flex import GridEvent, read_grid_events
from carbonsched.store import Store
from carbonsched.store.grid_events import event_rows
from carbonsched.workload.files import read_workload
from tests.service.conftest import AS_OF, CATALOG, Server, copy_db

pytestmark = pytest.mark.shared_data

ADMIN = "one-rule-one-sentence-admin-5b2e"
SITE = "cn-gz-guian"
"""A site of CATALOG (the service's and the CLI's)."""
START, END = "2026-07-01T17:00:00Z", "2026-07-01T18:00:00Z"
STAMP = "2026-07-01T17:00:00+00:00"
YEARS = "is outside the supported years 1970..2200; give a time in the years 1970..2200"
NOTICE = ("notice_minutes [min] (how long before the start the event was announced, at most a "
          "year) must be a finite number >= 0 and <= 527040")
runner = CliRunner()

# rule -> (the known-bad fields, its sentence; the fields just at the limit)
GRID_RULES: dict[str, tuple[dict, str, dict]] = {
    "target_kw above 0": (
        {"target_kw": 0}, "target_kw [kW] must be a finite number > 0, got 0.0",
        {"target_kw": 5e-324}),
    "end after start": (
        {"target_kw": 5, "end": START},
        f"end {STAMP} is not after start {STAMP}; give an end at least an hour after the "
        "start (the window is start to end, end excluded)",
        {"target_kw": 6}),
    "years to 2200": (
        {"target_kw": 5, "start": "2201-01-01T00:00:00Z", "end": "2201-01-01T01:00:00Z"},
        f"start '2201-01-01T00:00:00Z' {YEARS}",
        {"target_kw": 5, "start": "2200-12-31T22:00:00Z", "end": "2200-12-31T23:00:00Z"}),
    "years to 2200 in UTC": (
        {"target_kw": 5, "start": "2200-12-31T23:00:00-05:00", "end": "2201-01-01T00:00:00Z"},
        f"start '2200-12-31T23:00:00-05:00' (2201-01-01T04:00:00+00:00 in UTC) {YEARS}",
        {"target_kw": 5, "start": "2200-12-31T17:00:00-05:00",
         "end": "2200-12-31T18:00:00-05:00"}),
    "notice at most a year": (
        {"target_kw": 5, "notice_minutes": 527_041}, f"{NOTICE}, got 527041.0",
        {"target_kw": 7, "notice_minutes": 527_040}),
}


def _event(fields: dict) -> dict:
    return {"site": SITE, "start": START, "end": END} | fields


def _flat(text: str) -> str:
    """``text`` on one line (Rich wraps the CLI's error line at the terminal's width)."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def api(plan_db, tmp_path_factory) -> httpx.Client:
    d = tmp_path_factory.mktemp("one-sentence")
    srv = Server(copy_db(plan_db, d), ["--no-cron", "--as-of", AS_OF, "--catalog", CATALOG],
                 {"CARBONSCHED_BOOTSTRAP_ADMIN_TOKEN": ADMIN}, d / "serve.log")
    try:
        srv.wait_ready(90, "/readyz")
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {ADMIN}"},
                          timeout=60) as c:
            yield c
        assert "Traceback" not in srv.logs()
    finally:
        srv.stop()


# --- grid events ------------------------------------------------------------------------------

def _cli_add(ev: dict):
    args = ["grid-event", "add", "--site", ev["site"], "--start", ev["start"], "--end",
            ev["end"], "--catalog", CATALOG, "--json"]
    for key, option in (("target_kw", "--target-kw"), ("target_fraction", "--target-fraction"),
                        ("notice_minutes", "--notice-minutes")):
        if key in ev:
            args += [option, str(ev[key])]
    return runner.invoke(app, args)


def _file(tmp_path: Path, ev: dict) -> Path:
    row = {k: v for k, v in ev.items() if k != "notice_minutes"}
    if "notice_minutes" in ev:
        row["notice_hours"] = ev["notice_minutes"] / 60
    p = tmp_path / "events.json"
    p.write_text(json.dumps([row]))
    return p


@pytest.mark.parametrize("rule", list(GRID_RULES))
def test_a_grid_event_rule_says_one_sentence_at_the_cli_the_api_and_a_file(
        rule, api, tmp_path, private_store):
    bad, sentence, at_limit = GRID_RULES[rule]
    bad, at_limit = _event(bad), _event(at_limit)
    # the CLI: the sentence after "error:", exit 2 (bad input)
    r = _cli_add(bad)
    assert r.exit_code == 2, r.output
    assert sentence in _flat(r.output), r.output
    assert "Traceback" not in r.output
    # the API: the sentence in its 422
    r = api.post("/v1/grid-events", json=bad)
    assert r.status_code == 422, r.text
    assert sentence in r.json()["message"], r.text
    # an event file: the sentence after the file and the event (notice_hours: the rule in hours)
    with pytest.raises(InputError) as info:
        read_grid_events(_file(tmp_path, bad))
    said = str(info.value)
    if "notice_minutes" in bad:
        assert "notice_hours [h] (how long before the start the event was announced, at most a " \
               "year) must be a finite number >= 0 and <= 8784, got 8784.01" in said, said
    else:
        assert f"events.json, event 1: grid event at site {SITE}: {sentence}" in said, said

    # just at the limit: accepted by each, and stored as what the store reads back
    r = _cli_add(at_limit)
    assert r.exit_code == 0, r.output
    added = json.loads(r.output)
    r = api.post("/v1/grid-events", json=at_limit)
    assert r.status_code == 201, r.text
    assert {k: r.json()[k] for k in ("site", "start", "end", "target_kw", "notice_s")} == \
        {k: added[k] for k in ("site", "start", "end", "target_kw", "notice_s")}
    (ev,) = read_grid_events(_file(tmp_path, at_limit))
    assert ev.start.isoformat().replace("+00:00", "Z") == added["start"]
    # the store's rows are events under the same rules (as the grid loop rebuilds them)
    from carbonsched.config import get_settings

    for row in event_rows(Store(get_settings().resolved_database_url())):
        GridEvent(site=row.site, start=row.start, end=row.end, target_kw=row.target_kw,
                  target_fraction=row.target_fraction, id=row.event_id)


# --- inference demand -------------------------------------------------------------------------

DEMAND = {"area": "shanghai", "hour": "2023-07-15T08:00:00Z", "gpu_type": "A100", "gpus": 0,
          "slo_ms": 30, "power_per_gpu_kw": 0.5}
"""A workload file's inference demand (0 GPUs: generated files carry hours without demand)."""
QUERY = {"kind": "inference", "area": "shanghai", "slo_ms": 30, "gpu_type": "A100", "gpus": 1,
         "start": "2023-07-15T08:00:00Z", "power_per_gpu_kw": 0.5}
"""The API's inference query of the same demand."""
LONG_AREA = ("area is 101 characters long, the store keeps at most 100; use the id of one of "
             "the catalog's areas")
LONG_GPU = ("GPU type is 41 characters long, the store keeps at most 40; use the catalog's GPU "
            "type name")
# field -> [(known-bad value, its sentence)], the value just at the limit, the API's answer then
NAME_RULES: dict[str, tuple[list[tuple[str, str]], str, int]] = {
    "area": ([("a" * 101, LONG_AREA),
              ("shang\x01hai", r"'shang\x01hai' contains a control character (tab, newline, "
                               "...); remove it")],
             "a" * 100, 404),                       # a name the catalog lacks: not found
    "gpu_type": ([("g" * 41, LONG_GPU),
                  ("A1\x0b00", r"'A1\x0b00' contains a control character (tab, newline, ...); "
                               "remove it")],
                 "g" * 40, 200),                    # a type no site has: not placed, said why
}


def _csv(tmp_path: Path, demand: dict) -> Path:
    p = tmp_path / "w.csv"
    row = {"kind": "inference"} | demand
    p.write_text(",".join(row) + "\n" + ",".join(f'"{v}"' for v in row.values()) + "\n")
    return p


@pytest.mark.parametrize("field", list(NAME_RULES))
def test_an_inference_name_says_one_sentence_in_a_file_and_at_the_api(field, api, tmp_path):
    bads, at_limit, answer = NAME_RULES[field]
    for value, sentence in bads:
        p = tmp_path / "w.json"
        p.write_text(json.dumps({"inference": [DEMAND | {field: value}]}))
        with pytest.raises(InputError) as info:
            read_workload(p)
        assert f"inference[0], field '{field}': {sentence} (see docs/workload.md)" in \
            str(info.value), info.value
        with pytest.raises(InputError) as info:
            read_workload(_csv(tmp_path, DEMAND | {field: value}))
        assert f"line 2, field '{field}': {sentence}" in str(info.value), info.value
        r = api.post("/v1/placements", json=QUERY | {field: value})
        assert r.status_code == 422, r.text
        assert f"body.inference.{field}: {sentence}" in r.json()["message"], r.text
    p = tmp_path / "ok.json"
    p.write_text(json.dumps({"inference": [DEMAND | {field: at_limit}]}))
    assert getattr(read_workload(p).inference[0], field) == at_limit
    assert getattr(read_workload(_csv(tmp_path, DEMAND | {field: at_limit})).inference[0],
                   field) == at_limit
    r = api.post("/v1/placements", json=QUERY | {field: at_limit})
    assert r.status_code == answer, r.text
