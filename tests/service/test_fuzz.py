"""Schemathesis against the live server's own OpenAPI: no 500, no response off its schema.

Bounded: a few examples per operation, with an admin token so that handlers run (a missing or
weak token is exercised too, by the negative cases and test_api)."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.service.conftest import AS_OF, CATALOG, Server, copy_db, mint

pytestmark = pytest.mark.shared_data

MAX_EXAMPLES = 12


@pytest.fixture(scope="module")
def live(plan_db, tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    url = copy_db(plan_db, d)
    token = mint(url, "admin")
    srv = Server(url, ["--no-cron", "--as-of", AS_OF, "--catalog", CATALOG], {}, d / "s.log")
    try:
        srv.wait_ready(90, "/readyz")
        yield srv, token
    finally:
        srv.stop()
        assert "Traceback" not in srv.logs(), srv.logs()[-4000:]


def test_openapi_fuzz(live):
    """Every operation of the live schema, MAX_EXAMPLES generated cases each."""
    srv, token = live
    schema = schemathesis.openapi.from_url(srv.url + "/openapi.json")
    ops = [r.ok() for r in schema.get_all_operations()]
    assert len(ops) == 27
    failures: list[str] = []
    calls = [0]
    for op in ops:

        @given(case=op.as_strategy())
        @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def run(case) -> None:
            calls[0] += 1
            case.call_and_validate(
                headers={"Authorization": f"Bearer {token}"},
                checks=[not_a_server_error, response_schema_conformance,
                        status_code_conformance, content_type_conformance])

        try:
            run()
        except Exception as exc:  # collect every operation's failure, then report them all
            failures.append(f"{op.label}: {str(exc)[:1500]}")
    assert not failures, "\n\n".join(failures)
    assert calls[0] >= 3 * len(ops), calls
