"""Tenants in a catalog (issue 37 item 3): weights and guaranteed quotas, validated at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from carbonsched.catalog import load_catalog
from carbonsched.errors import CatalogError


@pytest.fixture
def minimal_text(fixtures_dir: Path) -> str:
    return (fixtures_dir / "catalog" / "minimal.toml").read_text()


def _with(tmp_path: Path, text: str, tenants: str) -> Path:
    p = tmp_path / "tenants.toml"
    p.write_text(text + "\n" + tenants)
    return p


@pytest.mark.parametrize(("tenants", "message"), [
    ("[tenants.a]\nweight = 0", r"tenant 'a': weight must be > 0, got 0; give a positive"),
    ("[tenants.a]\nweight = -1.5", r"weight must be > 0, got -1.5"),
    ('[tenants.a]\nweight = "2"', r"field 'weight' has type str"),
    ("[tenants.a]\nweigth = 2", r"unknown field\(s\) 'weigth'"),
    ("[tenants.a]\nquota_gpu_hours_per_day = { H100 = 1.0 }",
     r"quota for GPU type 'H100', which no site has; use one of A100"),
    ("[tenants.a]\nquota_gpu_hours_per_day = { A100 = -1.0 }", r"is negative"),
    # the minimal catalog has 8 + 2 A100: 240 GPU-hours a day; 241 is one above
    ("[tenants.a]\nquota_gpu_hours_per_day = { A100 = 200.0 }\n"
     "[tenants.b]\nquota_gpu_hours_per_day = { A100 = 41.0 }",
     r"tenants: quotas of A100 add up to 241 GPU-hours per day, above the 240"),
    ('[tenants."a/b"]\nweight = 1', r"tenant 'a/b'.*without '/'"),
])
def test_bad_tenants_are_refused_with_where_and_how(tmp_path, minimal_text, tenants, message):
    with pytest.raises(CatalogError, match=message) as info:
        load_catalog(_with(tmp_path, minimal_text, tenants))
    assert "regions/schema.md" in str(info.value)


def test_tenants_just_at_the_limits_are_read(tmp_path, minimal_text):
    cat = load_catalog(_with(tmp_path, minimal_text, (
        "[tenants.a]\nweight = 0.000001\nquota_gpu_hours_per_day = { A100 = 200.0 }\n"
        "[tenants.b]\nquota_gpu_hours_per_day = { A100 = 40 }\n")))
    assert cat.tenants["a"].weight == 1e-6
    assert cat.tenants["b"].weight == 1.0                    # default
    assert cat.tenants["b"].quota_gpu_hours_per_day == {"A100": 40.0}


def test_the_global_catalog_declares_tenants_and_domains():
    cat = load_catalog("global")
    assert len(cat.tenants) == 7
    assert len({t.weight for t in cat.tenants.values()}) > 1          # unequal weights
    assert cat.site("gb-london").gpus["A100"].domain_nodes == (1, 1)
    assert cat.site("ca-on-toronto").gpus["A100"].domain_nodes == (1, 1)
