"""A Carbon Aware SDK forecast names its own fallbacks, not only the plan-fallback one.

Before, a forecast issued on request dropped every note the pipeline made of it (a model that
fell back to seasonal naive, degraded or stale carbon-intensity signals): an SDK client could
not tell it from a forecast made on clean data. The notes about the site's carbon-intensity
forecast now go in the ``X-Carbonsched-Fallback`` header, spelled in Latin-1 as HTTP headers
must be.
"""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
from starlette.responses import Response

from carbonsched.api.routes.carbon_aware import _forecast_headers, header_text
from carbonsched.service.carbon_aware import ForecastAnswer, ci_notes
from carbonsched.service.metrics import ServiceMetrics

NOTES = [
    "de-fra: carbon intensity: no model beat seasonal naive by 5 % ...; used seasonal naive",
    "de-fra: signal quality degraded: flat line of 7 h",
    "DEGRADED de-fra: electricitymaps carbon_intensity for DE failed (HTTP 500); planned on "
    "STALE cached signals",
    "DEGRADED de-fra: open-meteo weather for DE failed (timeout)",   # not the CI's
    "de-fra: green surplus: used seasonal naive",                    # not the CI's
    "de-fra: PUE: persistence weather",                              # not the CI's
    "de-fra2: carbon intensity: used seasonal naive",                # another site, same prefix
    # the readers' and history checks' notes on the signal (before: left out of the header)
    "de-fra: carbon_intensity_g_per_kwh: 3 of 8952 hour(s) NaN",
    "de-fra: 62 % of the 720 observed carbon-intensity hours of the history are the provider's "
    "estimate (electricitymaps DE)",
    "de-fra: carbon_intensity_lca_g_per_kwh: 5 hour(s) NaN",        # life-cycle: not the CI's
]


def test_ci_notes_keep_only_the_sites_carbon_intensity_notes():
    assert ci_notes("de-fra", NOTES) == (*NOTES[:3], NOTES[7], NOTES[8])
    assert ci_notes("de-fra2", NOTES) == (NOTES[6],)
    assert ci_notes("de-fra", []) == ()


def test_header_text_is_latin_1_and_keeps_the_meaning():
    assert header_text("plain ASCII, Zürich") == "plain ASCII, Zürich"       # Latin-1 kept
    assert header_text("a – b … c ≥ 5 % ≤ 6") == "a - b ... c >= 5 % <= 6"
    assert header_text("Ω") .encode("latin-1")                               # never raises
    assert header_text("→") == "?"


def test_the_forecasts_notes_reach_the_header():
    state = SimpleNamespace(metrics=ServiceMetrics())
    t = pd.Timestamp("2023-07-15T00:00Z")
    answer = ForecastAnswer("de-fra", t, t, t, t, 60, [], [], "issued_now", "",
                            ci_notes("de-fra", NOTES) + ("range 5–9 …",))
    resp = Response()
    _forecast_headers(resp, state, [answer])
    said = resp.headers["X-Carbonsched-Fallback"]
    assert said == header_text(" | ".join([*NOTES[:3], NOTES[7], NOTES[8], "range 5–9 …"]))
    assert said.endswith("range 5-9 ...")
    # an answer without notes sets no header (at the limit: nothing to say)
    quiet = Response()
    _forecast_headers(quiet, state, [ForecastAnswer("de-fra", t, t, t, t, 60, [], [],
                                                    "issued_now")])
    assert "X-Carbonsched-Fallback" not in quiet.headers
