"""Schemathesis with all its checks against the app in-process (ASGI): every response matches the
OpenAPI document, and every request the document calls valid is accepted.

Bounded: MAX_EXAMPLES generated cases per operation, an admin token (the bootstrap token) so that
handlers run, the session's plan in a private SQLite store, the clock pinned."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import CHECKS, load_all_checks
from starlette.testclient import TestClient

from carbonsched.api.app import create_app
from carbonsched.clock import FixedClock, parse_as_of
from carbonsched.config import Settings
from tests.conftest import shared_data_dir
from tests.service.conftest import AS_OF, CATALOG, copy_db

pytestmark = pytest.mark.shared_data

MAX_EXAMPLES = 15
TOKEN = "cst_conformance-" + "x" * 30


def all_checks() -> list:
    """Every check Schemathesis registers (status codes, content types, headers, response
    schemas, positive and negative data, missing headers, methods, auth, ...)."""
    load_all_checks()
    return list(CHECKS.get_all())


@pytest.mark.xfail(strict=True, reason=(
    "open (issue 32 item 11): schema-valid requests still refused with 422 by cross-field rules "
    "the OpenAPI document does not state: an end before its start (/emissions/bylocations/best, "
    "/emissions/forecasts/current), a duration_hours below one minute, the duration spelling on "
    "the nested placement job (POST /v1/placements); strict: this turns into a failure once "
    "they are fixed, so the mark must then go"))
def test_every_operation_conforms_with_all_checks(plan_db, tmp_path):
    s = Settings(database_url=copy_db(plan_db, tmp_path), catalog=CATALOG, cron_enabled=False,
                 as_of=parse_as_of(AS_OF), bootstrap_admin_token=TOKEN,
                 data_dir=shared_data_dir(), dispatcher="", dispatch_loops=False)
    app = create_app(s, FixedClock(s.as_of))
    checks = all_checks()
    assert len(checks) >= 14, [c.__name__ for c in checks]
    failures: list[str] = []
    calls = [0]
    with TestClient(app):            # the app's lifespan: store, book, loops
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        ops = [r.ok() for r in schema.get_all_operations()]
        assert len(ops) == 14
        for op in ops:

            @given(case=op.as_strategy())
            @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            def run(case) -> None:
                calls[0] += 1
                case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"},
                                       checks=checks)

            try:
                run()
            except BaseException as exc:  # noqa: BLE001  every operation's failure, then all
                failures.append(f"{op.label}: {str(exc)[:1500]}")
    assert not failures, "\n\n".join(failures)
    assert calls[0] >= 3 * len(ops), calls
