"""Every ``store_call`` message names only the call's own parameters.

Before, ``ServiceStore.plan_job_ids`` carried the template of ``plan_job`` ("reading job
{job_id} of plan {plan_id}") while taking ``job_ids``: a database outage during the API's id
check raised ``KeyError`` (an HTTP 500) instead of the outage's 503 with its message, and
``plan_job`` had lost its wrapper. Checked for every decorated method of every class there.
"""

from __future__ import annotations

import inspect
import string

import pytest

import carbonsched.store.service
from carbonsched.store.service import ServiceStore

MODULES = [carbonsched.store.service]      # where store_call is used


def _decorated():
    for mod in MODULES:
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ != mod.__name__:
                continue
            for name, fn in vars(cls).items():
                doing = getattr(fn, "store_doing", None)
                if doing is not None:
                    yield f"{cls.__name__}.{name}", fn, doing


CASES = list(_decorated())


@pytest.mark.parametrize(("name", "fn", "doing"), CASES, ids=[c[0] for c in CASES])
def test_the_message_names_only_the_methods_parameters(name, fn, doing):
    params = set(inspect.signature(inspect.unwrap(fn)).parameters)
    fields = {f for _, f, _, _ in string.Formatter().parse(doing) if f}
    assert {f.split(".")[0].split("[")[0] for f in fields} <= params, (name, doing)


def test_the_reads_the_api_uses_are_wrapped():
    assert len(CASES) > 10       # the walk found the decorated methods
    for name in ("plan_job", "plan_job_ids", "get_job", "add_jobs"):
        assert getattr(vars(ServiceStore)[name], "store_doing", None), name
