"""The store's declarative base and its UTC timestamp column type.

Timestamps are stored as UTC (``timestamptz`` on PostgreSQL; naive-UTC on SQLite, converted back to
tz-aware UTC on read by :class:`UTCDateTime`). Every row written through the ORM has its
identifier columns (:data:`IDENTIFIER_COLUMNS`) checked against the one identifier grammar
(:func:`carbonsched.limits.identifier_problem`) before it reaches the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, TypeDecorator, event
from sqlalchemy.orm import DeclarativeBase

from carbonsched.errors import InputError
from carbonsched.limits import identifier_problem

IDENTIFIER_COLUMNS = {"job_id": "job id", "tenant": "tenant", "site": "site id"}
"""Columns that hold an identifier, with the name the grammar's message gives it."""


class UTCDateTime(TypeDecorator[datetime]):
    """A DateTime that refuses naive values and always returns tz-aware UTC."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):  # noqa: D102
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r} cannot be stored; give it in UTC")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value, dialect):  # noqa: D102
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    """Declarative base of the store."""


@event.listens_for(Base, "before_insert", propagate=True)
@event.listens_for(Base, "before_update", propagate=True)
def check_identifier_columns(_mapper: Any, _connection: Any, target: Any) -> None:
    """Refuse a row whose job id, tenant or site breaks the identifier grammar.

    Runs on every ORM insert and update of every table (a mapper event on :class:`Base`).

    Raises
    ------
    InputError
        With the grammar's message (the same as the workload files' and the API's).
    """
    check_identifiers(target.__dict__)


def check_identifiers(values: Mapping[str, Any]) -> None:
    """Refuse column values (a row as a mapping) whose identifier columns break the grammar.

    Raises
    ------
    InputError
        With the message of :func:`carbonsched.limits.identifier_problem`.
    """
    for column, what in IDENTIFIER_COLUMNS.items():
        value = values.get(column)
        if value is not None:
            msg = identifier_problem(value, what)
            if msg is not None:
                raise InputError(msg)
