"""ColgenOptions: the documented defaults, and the environment read once, checked, at the edge."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from carbonsched.plan import solve_plan
from carbonsched.plan.colgen import ColgenOptions
from carbonsched.plan.colgen.options import ENV

from .test_colgen_bound import two_gangs_three_gpus


def _documented() -> dict[str, str]:
    """Field → its Attributes entry in the class docstring, on one line."""
    doc = ColgenOptions.__doc__
    section = doc.split("Attributes\n    ----------\n", 1)[1].split("\n    Raises", 1)[0]
    out: dict[str, str] = {}
    name = None
    for line in section.splitlines():
        m = re.match(r"^    (\w+) : ", line)
        if m:
            name = m.group(1)
            out[name] = ""
        elif name:
            out[name] += " " + line.strip()
    return out


def _default_in(text: str) -> str:
    m = re.search(r"Default\s+(.+?)(?:;|\.\s|\.$)", text)
    assert m, text
    return m.group(1).strip("`\"").replace(",", "")


def test_every_field_is_documented_with_its_default():
    docs = _documented()
    fields = {f.name: f.default for f in dataclasses.fields(ColgenOptions)}
    assert set(docs) == set(fields)
    for name, default in fields.items():
        said = _default_in(docs[name])
        if isinstance(default, bool) or default is None or isinstance(default, str):
            assert said == str(default), name
        else:
            assert float(said) == pytest.approx(float(default), rel=0, abs=0), name


def test_every_variable_is_named_in_its_fields_documentation():
    docs = _documented()
    for var, (name, _) in ENV.items():
        assert f"``{var}``" in docs[name], var


def test_an_empty_environment_gives_the_defaults():
    assert ColgenOptions.from_env({}) == ColgenOptions()
    # other variables are not ours; an empty value counts as unset
    assert ColgenOptions.from_env({"PATH": "/bin", "CARBONSCHED_CG_K": ""}) == ColgenOptions()
    assert ColgenOptions().step_min_left_s == pytest.approx(2.5)


def test_values_are_parsed_into_their_fields():
    opts = ColgenOptions.from_env({"CARBONSCHED_CG_K": "3", "CARBONSCHED_CG_FLOW": "1",
                                   "CARBONSCHED_CG_MASTER": "simplex",
                                   "CARBONSCHED_CG_SHARE": "0.5",
                                   "CARBONSCHED_CG_DUMP": "/tmp/x.pkl"})
    assert (opts.columns_per_round, opts.flow, opts.master_solver, opts.cg_share,
            opts.dump_state) == (3, True, "simplex", 0.5, "/tmp/x.pkl")
    assert opts.repack_price_k == ColgenOptions().repack_price_k


@pytest.mark.parametrize(("var", "value", "why"), [
    ("CARBONSCHED_CG_K", "two", "not an integer"),
    ("CARBONSCHED_CG_K", "2.5", "not an integer"),
    ("CARBONSCHED_CG_K", "0", "must be >= 1"),
    ("CARBONSCHED_CG_SHARE", "1.01", "must be <= 1"),
    ("CARBONSCHED_CG_SHARE", "-0.1", "must be >= 0"),
    ("CARBONSCHED_CG_EXTEND", "1.0001", "must be <= 1"),
    ("CARBONSCHED_CG_SHARE", "nan", "not finite"),
    ("CARBONSCHED_CG_IPM_TOL", "0", "must be > 0"),
    ("CARBONSCHED_CG_SIMPLEX", "5", "must be <= 4"),
    ("CARBONSCHED_CG_FLOW", "yes", "must be 0 or 1"),
    ("CARBONSCHED_CG_MASTER", "barrier", "must be one of auto, ipm, simplex"),
    ("CARBONSCHED_CG_REFINE_METHOD", "polyak", "must be one of smoothed, subgradient"),
    ("CARBONSCHED_CG_REPACK", "-1", "must be >= 0"),
    ("CARBONSCHED_CG_REPACK_S", "-1e-9", "must be >= 0"),
    ("CARBONSCHED_CG_SHORT_FIRST", "1.01", "must be <= 1"),
    ("CARBONSCHED_CG_SHORT_FIRST", "-0.01", "must be >= 0"),
    # removed: every solve is staged whatever its size (a job threshold broke item 0)
    ("CARBONSCHED_CG_SHORT_FIRST_JOBS", "2000", "unknown column-generation variable"),
    ("CARBONSCHED_CG_SPLITS", "0.2", "unknown column-generation variable"),
    ("CARBONSCHED_CG_SMOOTH_DRAWS", "-1", "must be >= 0"),
    ("CARBONSCHED_CG_SMOOTH_DRAWS", "1.5", "not an integer"),
])
def test_a_bad_value_is_refused_with_the_variable_named(var, value, why):
    with pytest.raises(ValueError, match=re.escape(var)) as err:
        ColgenOptions.from_env({var: value})
    assert why in str(err.value)


@pytest.mark.parametrize(("var", "value", "field", "parsed"), [
    ("CARBONSCHED_CG_SHARE", "1", "cg_share", 1.0),
    ("CARBONSCHED_CG_SHARE", "0", "cg_share", 0.0),
    ("CARBONSCHED_CG_EXTEND", "1", "cg_extend_share", 1.0),
    ("CARBONSCHED_CG_EXTEND", "0", "cg_extend_share", 0.0),
    ("CARBONSCHED_CG_K", "1", "columns_per_round", 1),
    ("CARBONSCHED_CG_SIMPLEX", "4", "simplex_strategy", 4),
    ("CARBONSCHED_CG_SIMPLEX", "0", "simplex_strategy", 0),
    ("CARBONSCHED_CG_HEUR", "1.0", "repair_heuristic_effort", 1.0),
    ("CARBONSCHED_CG_REPACK", "0", "repack_max_options", 0),
    ("CARBONSCHED_CG_REPACK_S", "0", "repack_s_per_option", 0.0),
    ("CARBONSCHED_CG_REPACK_S", "1e-5", "repack_s_per_option", 1e-5),
    ("CARBONSCHED_CG_REFINE", "0", "refine_rounds", 0),
    ("CARBONSCHED_CG_IPM_TOL", "1e-300", "ipm_tol", 1e-300),
    ("CARBONSCHED_CG_SMOOTH", "0", "smooth_s_per_job", 0.0),
    ("CARBONSCHED_CG_SHORT_FIRST", "1", "short_first_share", 1.0),
    ("CARBONSCHED_CG_SHORT_FIRST", "0", "short_first_share", 0.0),
    ("CARBONSCHED_CG_SMOOTH_DRAWS", "0", "smooth_draws", 0),
    ("CARBONSCHED_CG_SMOOTH_MARKS", "0", "smooth_marks_alone", False),
    ("CARBONSCHED_CG_SMOOTH_MARKS", "1", "smooth_marks_alone", True),
])
def test_a_value_at_the_limit_of_its_range_is_accepted(var, value, field, parsed):
    assert getattr(ColgenOptions.from_env({var: value}), field) == parsed


def test_invalid_choices_are_refused_when_built_directly():
    with pytest.raises(ValueError, match="master_solver"):
        ColgenOptions(master_solver="barrier")
    with pytest.raises(ValueError, match="refine_method"):
        ColgenOptions(refine_method="polyak")


def test_solve_plan_reads_the_environment_only_without_options(monkeypatch):
    monkeypatch.setenv("CARBONSCHED_CG_K", "0")
    with pytest.raises(ValueError, match="CARBONSCHED_CG_K"):
        solve_plan(two_gangs_three_gpus(), method="colgen", time_limit_s=30, mip_gap=0.0)
    res = solve_plan(two_gangs_three_gpus(), method="colgen", time_limit_s=30, mip_gap=0.0,
                     colgen_options=ColgenOptions())
    assert res.totals["objective"] == pytest.approx(4.4)


@pytest.mark.parametrize(("field", "bad", "limit"), [("smooth_draws", -1, 0),
                                                     ("smooth_draw_every", 0, 1)])
def test_draw_counts_out_of_range_are_refused_when_built_directly(field, bad, limit):
    with pytest.raises(ValueError, match=f"{field} must be >= {limit}, got {bad}"):
        ColgenOptions(**{field: bad})
    assert getattr(ColgenOptions(**{field: limit}), field) == limit


@pytest.mark.parametrize(("field", "bad", "why", "var"), [
    ("cg_share", 1.01, "must be <= 1", "CARBONSCHED_CG_SHARE"),
    ("cg_share", float("nan"), "not finite", "CARBONSCHED_CG_SHARE"),
    ("columns_per_round", 0, "must be >= 1", "CARBONSCHED_CG_K"),
    ("columns_per_round", 2.5, "not an integer", "CARBONSCHED_CG_K"),
    ("ipm_tol", 0.0, "must be > 0", "CARBONSCHED_CG_IPM_TOL"),
    ("simplex_strategy", 5, "must be <= 4", "CARBONSCHED_CG_SIMPLEX"),
    ("repack_s_per_option", -1e-9, "must be >= 0", "CARBONSCHED_CG_REPACK_S"),
])
def test_an_option_built_directly_is_checked_as_its_variable_is(field, bad, why, var):
    # the same range from code as from the environment, the variable named
    with pytest.raises(ValueError, match=re.escape(field)) as err:
        ColgenOptions(**{field: bad})
    assert why in str(err.value) and var in str(err.value)


@pytest.mark.parametrize(("field", "bad"), [
    ("finish_s", -0.1), ("finish_plain_s", float("nan")), ("step_margin_s", float("inf")),
    ("tail_s_per_job", -1e-9), ("repair_max_classes", -1), ("repair_share", 1.0001),
    ("type_pass_first_share", 1.5),
])
def test_an_option_without_a_variable_is_finite_non_negative_and_a_share_at_most_one(
        field, bad):
    with pytest.raises(ValueError, match=re.escape(field)):
        ColgenOptions(**{field: bad})


@pytest.mark.parametrize(("field", "value"), [
    ("finish_s", 0.0), ("finish_plain_s", 0.0), ("step_margin_s", 0.0), ("repair_share", 1.0),
    ("repair_share", 0.0), ("cg_share", 1.0), ("columns_per_round", 1), ("flow", True),
])
def test_an_option_at_the_limit_of_its_range_is_accepted_when_built_directly(field, value):
    assert getattr(ColgenOptions(**{field: value}), field) == value


@pytest.mark.parametrize(("field", "bad", "why"), [
    ("repair_max_classes", np.int64(-1), "must be >= 0"),      # numpy scalars are checked too
    ("finish_s", np.float32(-1.0), "must be >= 0"),
    ("finish_s", "2.0", "must be a number"),
    ("repair_max_classes", True, "must be a number"),
    ("flow", 1, "must be True or False"),
    ("warmup_share_big", 1.01, "must be <= 1"),
    ("moves_s_per_job", float("inf"), "not finite"),
])
def test_an_option_of_the_wrong_kind_or_range_is_refused(field, bad, why):
    with pytest.raises(ValueError, match=re.escape(field)) as err:
        ColgenOptions(**{field: bad})
    assert why in str(err.value)


@pytest.mark.parametrize(("field", "value"), [
    ("flow", np.True_), ("finish_s", np.float64(0.0)), ("columns_per_round", np.int64(1)),
    ("warmup_share_big", 1.0),
])
def test_numpy_scalars_at_the_limit_are_accepted(field, value):
    assert getattr(ColgenOptions(**{field: value}), field) == value


@pytest.mark.parametrize(("field", "value"), [
    ("crossover_at", -1.0), ("crossover_min_left", 2.0), ("repack_rc_tol", float("inf")),
])
def test_a_threshold_out_of_its_range_turns_its_step_off_and_is_accepted(field, value):
    # thresholds and tolerances are not range-checked: the tests and a user turn a step off
    # this way (crossover_at=-1: no crossover in the loop)
    assert getattr(ColgenOptions(**{field: value}), field) == value
