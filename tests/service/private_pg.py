"""The ``private_pg`` fixture: a PostgreSQL server of the test's own
(:mod:`scripts.private_postgres`), for tests that stop and start the database."""

from __future__ import annotations

import pytest

from scripts.private_postgres import NoPostgresError, PrivatePostgres


@pytest.fixture
def private_pg():
    """A PostgreSQL server of the test's own; removed afterwards."""
    try:
        pg = PrivatePostgres()
    except NoPostgresError as exc:
        pytest.skip(str(exc))
    try:
        yield pg
    finally:
        pg.remove()
