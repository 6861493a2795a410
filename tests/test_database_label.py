"""A database is named in messages as the user would type it: a SQLite file's path, else the URL
without its password (``carbonsched.config.database_label``)."""

from __future__ import annotations

import pytest

from carbonsched.config import database_label


@pytest.mark.parametrize("url, label", [
    ("sqlite:////var/lib/carbonsched/carbonsched.db", "/var/lib/carbonsched/carbonsched.db"),
    ("sqlite:///relative.db", "relative.db"),
    ("sqlite://", "SQLite in memory"),
    ("sqlite:///:memory:", "SQLite in memory"),
    ("postgresql+psycopg://ops:s3cret@db.internal:5432/carbonsched",
     "postgresql+psycopg://ops:***@db.internal:5432/carbonsched"),
    ("postgresql+psycopg://ops@db.internal/carbonsched",
     "postgresql+psycopg://ops@db.internal/carbonsched"),
    # libpq takes the password as a query parameter too; other parameters are shown as given
    ("postgresql+psycopg://ops@db.internal/carbonsched?password=s3cret&sslmode=require",
     "postgresql+psycopg://ops@db.internal/carbonsched?password=***&sslmode=require"),
    ("postgresql+psycopg://ops@db.internal/cs?sslpassword=k3y&application_name=tokens_app",
     "postgresql+psycopg://ops@db.internal/cs?application_name=tokens_app&sslpassword=***"),
    ("postgresql+psycopg://ops@db.internal/cs?Auth_Token=t0k",
     "postgresql+psycopg://ops@db.internal/cs?Auth_Token=***"),
    ("mysql+pymysql://ops@db.internal/cs?passwd=pw1&pwd=pw2",
     "mysql+pymysql://ops@db.internal/cs?passwd=***&pwd=***"),
    # what does not parse, or parses with the password's tail in the host, is not shown
    ("postgresql+psycopg://ops:p@ss@db.internal/cs",
     "postgresql+psycopg://… (the rest not shown: its password or user holds an unescaped "
     "'@'; percent-encode it as %40)"),
    # an '@' after the first ends SQLAlchemy's password early, whatever follows it
    ("postgresql://ops:Xy@3k/9Q@db:5432/cs", "postgresql://… (the rest not shown: its password "
     "or user holds an unescaped '@'; percent-encode it as %40)"),
    ("postgresql://ops:Xy@3k?9Q@db:5432/cs", "postgresql://… (the rest not shown: its password "
     "or user holds an unescaped '@'; percent-encode it as %40)"),
    # one '@', and an escaped one in a query value: shown
    ("postgresql://ops:p%40ss@db/cs?application_name=a%40b",
     "postgresql://ops:***@db/cs?application_name=a%40b"),
    ("postgresql://ops:pw@db:notaport/cs", "postgresql://… (the rest not shown: it does not "
     "parse)"),
    ("host=db user=ops password=pw dbname=cs", "(not shown: not a URL)"),
])
def test_a_database_is_named_by_its_path_or_its_url_without_password(url, label):
    assert database_label(url) == label
