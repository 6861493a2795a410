"""Schemathesis with all its checks against the app in-process (ASGI): every response matches the
OpenAPI document, and every request the document calls valid is accepted.

Accepted means a 2xx, 3xx, 401, 403, 404, 409, 429 or 5xx (Schemathesis' default), except on the
operations of :data:`REFUSES_VALID`: rules there span fields or depend on the data (an end before
its start, a name no site answers to, hours not observed yet), so no schema states them; those
operations also accept their documented 4xx, and only with a message of a rule listed there (each
is named in the operation's 4xx response in the document).

Names the service knows (locations, sites, the plan's date and a job of it) replace the generated
ones in about half the cases (:func:`with_known_names`), so that answers from data are checked as
well as the refusals of random names. The cases are Schemathesis' positive ones (requests the
document calls valid). Bounded: MAX_EXAMPLES generated cases per operation, an
admin token (the bootstrap token) so that handlers run, the session's plan in a private SQLite
store, the clock pinned."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.config import PositiveDataAcceptanceConfig, SchemathesisConfig
from starlette.testclient import TestClient

from carbonsched.api.app import create_app
from carbonsched.catalog import load_catalog
from carbonsched.clock import FixedClock, parse_as_of
from carbonsched.config import Settings
from tests.conftest import shared_data_dir
from tests.service.conftest import AS_OF, CATALOG, PLAN_DATE, copy_db

pytestmark = pytest.mark.shared_data

MAX_EXAMPLES = 15
TOKEN = "cst_conformance-" + "x" * 30

_IDENTIFIER = ("holds the non-printable character U\\+", "is a path component")
_JOB = ("deadline .* is before earliest_start \\+ duration",
        "h disagrees with duration_minutes",
        # payload rules (issue 33), named in JOB_RULES of the operations' 422
        "unknown template ", "are both given", "is given with pod_template",
        "args without command or image", "asks for one slice of one GPU",
        "is not one of the GPU type's", "the pod template has no spec.containers",
        "the pod template's ",
        "the script starts with", "is not a shell name", "is set by carbonsched for every piece",
        "is not NAME=value", "cannot parse .* as JSON", "names .* sources",
        "appears twice", "contains a control character", "contains a NUL character",
        "has Windows line ends",
        "is not an absolute path", "the script is .* bytes", "characters long, at most",
        "volume .*", "in the pod template", "the pod template is .* bytes") + _IDENTIFIER
_NOTHING_TO_RUN = "names nothing to run .* would never submit it"
"""A job (to book) naming nothing to run, by a service that dispatches without the placeholder
(not this test's service, which dispatches nothing: listed as the operations' 422 names it)."""
_LOCATION = ("unknown location ",)
_TIME = ("time must be defined if toTime is defined", "time must be before toTime",
         "toTime spans .* days; ask for at most")
_PERIOD = ("startTime must be before endTime", "startTime .. endTime spans .* days",
           "period out of range: the data do not cover every hour")
_WINDOW = ("dataStartAt must be earlier than dataEndAt",
           "must be within the time range of the forecast")
REFUSES_VALID: dict[str, tuple[int, tuple[str, ...]]] = {
    "POST /v1/jobs": (422, _JOB + ("appears twice in this request", _NOTHING_TO_RUN)),
    "POST /v1/placements": (422, _JOB + ("no default power for GPU type", "is not on the hour",
                                         _NOTHING_TO_RUN)),
    "GET /v1/jobs/{job_id}": (422, _IDENTIFIER),
    "GET /v1/forecasts/{site}": (422, _IDENTIFIER),
    "POST /v1/tokens": (422, ("token expiry .* is not after now",)),
    "POST /v1/grid-events": (422, ("give exactly one of target_kw", "is not after start",
                                   "is not on the hour", "in UTC\\) is outside the supported "
                                   "years") + _IDENTIFIER),
    "GET /emissions/bylocations/best": (400, _LOCATION + _TIME),
    "GET /emissions/bylocations": (400, _LOCATION + _TIME),
    "GET /emissions/bylocation": (400, _LOCATION + _TIME),
    "GET /emissions/forecasts/current": (400, _LOCATION + _WINDOW),
    "POST /emissions/forecasts/batch": (400, _LOCATION + _WINDOW + (
        "requestedAt .* is after now", "no forecast of .* could be issued at")),
    "GET /emissions/average-carbon-intensity": (400, _LOCATION + _PERIOD),
    "POST /emissions/average-carbon-intensity/batch": (400, _LOCATION + _PERIOD + (
        "a batch covers one location",)),
}
"""Operation -> the 4xx it answers to some schema-valid requests, and the messages (regular
expressions) of the rules that do it: the drop-in Carbon Aware SDK routes answer the SDK's 400
(an end before its start, an unknown location, hours not observed or forecast, items of more
than one site), the job routes 422 (a deadline before earliest_start + duration, the two
duration spellings disagreeing, one id twice in a submission, an inference GPU type without a
power figure when none is given, a job naming nothing to run where dispatch would refuse it),
and every route reading an identifier 422 for the part of
its grammar no pattern states (``.``, ``..``, Unicode's other non-printable characters);
a token's expiry must be after now; a grid event has exactly one target, an end after its
start and a window on the hour, in the supported years in UTC as well as as written."""


def with_known_names(op, known: dict[str, list[str]]):
    """``op``'s cases, about half of them with a name the service knows in place of the
    generated one: each path or query parameter, and each body item's field, named in
    ``known`` (name -> values) takes one of its values."""
    def swap(drawn):
        case, pick = drawn
        if pick is None:
            return case
        for params in (case.path_parameters, case.query):
            for name in set(params or {}) & set(known):
                value = known[name][pick % len(known[name])]
                params[name] = [value] if isinstance(params[name], list) else value
        items = case.body if isinstance(case.body, list) else []
        for item in items:
            for name in set(item if isinstance(item, dict) else {}) & set(known):
                if item[name] is not None:
                    item[name] = known[name][pick % len(known[name])]
        return case
    return st.tuples(op.as_strategy(), st.one_of(st.none(), st.integers(0, 1000))).map(swap)


def all_checks() -> list:
    """Every check Schemathesis registers (status codes, content types, headers, response
    schemas, positive and negative data, missing headers, methods, auth, ...)."""
    load_all_checks()
    return list(CHECKS.get_all())


def conformance_config() -> SchemathesisConfig:
    """Schemathesis' configuration: its defaults, and for the operations of
    :data:`REFUSES_VALID` only, their documented 4xx accepted by ``positive_data_acceptance``."""
    accepted = PositiveDataAcceptanceConfig().expected_statuses
    return SchemathesisConfig.from_dict({"operations": [
        {"include-name": label,
         "checks": {"positive_data_acceptance": {"expected-statuses": [*accepted, str(status)]}}}
        for label, (status, _) in REFUSES_VALID.items()]})


def exempted(schema, op) -> set[int]:
    """The statuses ``positive_data_acceptance`` accepts on ``op`` beyond its defaults."""
    defaults = set(PositiveDataAcceptanceConfig().expected_statuses)
    cfg = schema.config.checks_config_for(operation=op).positive_data_acceptance
    return {int(s) for s in cfg.expected_statuses if s not in defaults}


def documented_refusals(op) -> set[int]:
    """The statuses whose response in ``op``'s document names rules the schema cannot state."""
    return {int(code) for code, r in op.definition.raw["responses"].items()
            if "the schema cannot state" in r.get("description", "")}


def fuzz(op, known: dict[str, list[str]], auth: dict[str, str], checks: list,
         answers: Counter) -> None:
    """Call ``op`` with MAX_EXAMPLES generated cases and run ``checks`` on each answer
    (counted in ``answers`` by operation and status); a documented refusal must name its rule.

    Raises the failures Schemathesis (or the rule check) found, after Hypothesis shrank them.
    """
    documented = REFUSES_VALID.get(op.label)

    @given(case=with_known_names(op, known))
    @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case) -> None:
        response = case.call(headers=auth)
        answers[op.label, response.status_code] += 1
        case.validate_response(response, checks=checks, headers=auth,
                               transport_kwargs={"headers": auth})
        if documented and response.status_code == documented[0]:
            text = response.text
            assert any(re.search(rule, text) for rule in documented[1]), (
                f"{op.label}: a schema-valid request refused with {response.status_code} by "
                f"no rule documented for it: {text[:600]}")

    run()


def failure_text(exc: BaseException, limit: int = 3000) -> str:
    """``exc`` with the exceptions it groups (a flaky Hypothesis run names only their count)."""
    parts = [str(exc)]
    for sub in getattr(exc, "exceptions", ()):
        parts.append(f"{type(sub).__name__}: {failure_text(sub, limit)}")
    return " | ".join(parts)[:limit]


def test_every_operation_conforms_with_all_checks(plan_db, tmp_path):
    s = Settings(database_url=copy_db(plan_db, tmp_path), catalog=CATALOG, cron_enabled=False,
                 as_of=parse_as_of(AS_OF), bootstrap_admin_token=TOKEN,
                 data_dir=shared_data_dir(), dispatcher="", dispatch_loops=False)
    app = create_app(s, FixedClock(s.as_of))
    checks = all_checks()
    assert len(checks) >= 14, [c.__name__ for c in checks]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    failures: list[str] = []
    answers: Counter[tuple[str, int]] = Counter()
    with TestClient(app) as client:   # the app's lifespan: store, book, loops
        schema = schemathesis.openapi.from_asgi("/openapi.json", app,
                                                config=conformance_config())
        ops = [r.ok() for r in schema.get_all_operations()]
        assert len(ops) == 27, [op.label for op in ops]
        catalog = load_catalog(CATALOG)
        plan = client.get("/v1/plans/latest", headers=auth).json()
        known = {"location": catalog.names(), "site": catalog.site_ids, "date": [PLAN_DATE],
                 "job_id": [p["job_id"] for p in plan["placements"]]}
        assert plan["date"] == PLAN_DATE and known["job_id"], plan
        # the exemptions reach exactly the operations listed, with exactly their status, and
        # these are exactly the operations whose document names such rules in that response
        listed = {label: {status} for label, (status, _) in REFUSES_VALID.items()}
        assert {op.label: exempted(schema, op) for op in ops if exempted(schema, op)} == listed
        assert {op.label: documented_refusals(op) for op in ops
                if documented_refusals(op)} == listed
        for op in ops:
            try:
                fuzz(op, known, auth, checks, answers)
            except BaseException as exc:  # noqa: BLE001  every operation's failure, then all
                failures.append(f"{op.label}: {failure_text(exc)}")
    assert not failures, "\n\n".join(failures)
    assert sum(answers.values()) >= 3 * len(ops), answers
    # the exempted operations answered from data too, not only with their refusals
    assert sum(n for (label, status), n in answers.items()
               if label in REFUSES_VALID and status < 300) >= len(REFUSES_VALID), answers
