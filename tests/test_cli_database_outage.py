"""A database that stops answering mid-command is one ``error:`` line and exit 3.

The store's own calls turn an outage into StoreUnavailableError; the outbox, the leases and
the grid events use their own sessions, whose SQLAlchemy errors reached the user as a Python
traceback and exit 1.
"""

from __future__ import annotations

import pytest
import typer
from sqlalchemy.exc import IntegrityError, OperationalError

from carbonsched.cli.common import errors


def test_an_outage_in_a_raw_session_is_exit_3_with_one_line(capsys):
    with pytest.raises(typer.Exit) as ex, errors():
        raise OperationalError("SELECT 1", {}, Exception("connection refused\n  is it up?"))
    assert ex.value.exit_code == 3
    said = capsys.readouterr().err
    assert "the database stopped answering: connection refused is it up?;" in " ".join(
        said.split())
    assert "Traceback" not in said


def test_another_database_error_is_not_called_an_outage():
    # at the limit: a constraint violation is a fault to see, not an outage to retry
    with pytest.raises(IntegrityError), errors():
        raise IntegrityError("INSERT", {}, Exception("UNIQUE constraint failed"))
