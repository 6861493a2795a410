"""GPU sharing in the catalog (issue 37 item 1): ``sharing`` and ``mig_model`` per GPU pool.

Each rule is shown a known-bad value (with the message naming field, site and fix) and a value
just inside it; the shipped ``global`` catalog shares its A100s so the feature runs on a clone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from carbonsched.catalog import load_catalog
from carbonsched.errors import CatalogError


def _with(fixtures_dir: Path, tmp_path: Path, extra: str, gpu: str = "A100") -> Path:
    text = (fixtures_dir / "catalog" / "minimal.toml").read_text()
    text = text.replace("count = 8\nboard_power_w = 400.0",
                        f"count = 8\nboard_power_w = 400.0\n{extra}", 1)
    if gpu != "A100":
        text = text.replace("[sites.gpus.A100]", f"[sites.gpus.{gpu}]", 1)
    p = tmp_path / "c.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(("extra", "gpu", "message"), [
    ('sharing = "mps"', "A100", r"sharing 'mps' is not one of milli, mig; give sharing = "
                                r"\"milli\""),
    ('sharing = "mig"', "A100", r"GPU type 'A100' stands for several MIG models "
                                r"\(A100-40GB, A100-80GB\); add mig_model = \"A100-40GB\""),
    ('sharing = "mig"', "T4", r"sharing = \"mig\" but GPU type 'T4' has no MIG"),
    ('sharing = "mig"\nmig_model = "H100"', "A100",
     r"mig_model 'H100' is not a MIG model of GPU type 'A100'; give one of A100-40GB, "
     r"A100-80GB"),
    ('mig_model = "A100-40GB"', "A100", r"mig_model is given without sharing = \"mig\""),
    ('sharing = "milli"\nmig_model = "A100-40GB"', "A100",
     r"mig_model is given with sharing = \"milli\""),
    ("sharing = 1", "A100", r"field 'sharing' has type int"),
])
def test_gpu_sharing_is_validated(fixtures_dir: Path, tmp_path: Path, extra: str, gpu: str,
                                  message: str) -> None:
    with pytest.raises(CatalogError, match=r"site 'hub-a' \(sites\[0\]\).*" + message) as info:
        load_catalog(_with(fixtures_dir, tmp_path, extra, gpu))
    assert "regions/schema.md" in str(info.value)


@pytest.mark.parametrize(("extra", "gpu", "sharing", "model"), [
    ('sharing = "milli"', "T4", "milli", None),                     # any GPU time-slices
    ('sharing = "mig"\nmig_model = "A100-80GB"', "A100", "mig", "A100-80GB"),
    ('sharing = "mig"', "H100", "mig", "H100"),                     # one MIG row: implied
    ('sharing = "mig"', "A30", "mig", "A30"),
    ("", "A100", None, None),                                       # whole GPUs only
])
def test_gpu_sharing_is_read(fixtures_dir: Path, tmp_path: Path, extra: str, gpu: str,
                             sharing: str | None, model: str | None) -> None:
    pool = load_catalog(_with(fixtures_dir, tmp_path, extra, gpu)).sites[0].gpus[gpu]
    assert (pool.sharing, pool.mig_model) == (sharing, model)


def test_the_global_catalog_shares_its_a100s() -> None:
    cat = load_catalog("global")
    a100 = {s.id: s.gpus["A100"] for s in cat.sites if "A100" in s.gpus}
    modes = {p.sharing for p in a100.values()}
    assert modes == {"mig", "milli"}
    assert all(p.mig_model == "A100-40GB" for p in a100.values() if p.sharing == "mig")


def test_catalog_show_names_the_pools_that_share_gpus() -> None:
    from typer.testing import CliRunner

    from carbonsched.cli.app import app

    r = CliRunner().invoke(app, ["catalog", "show", "global"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    assert ("MIG slices (A100-40GB) for mig_profile jobs: ca-on-toronto/A100, "
            "br-sp-saopaulo/A100, gb-london/A100") in r.output
    assert ("gpu_milli shares (time-slicing) for gpu_milli jobs: us-ny-newyork/A100, "
            "us-pjm-ashburn/A100, jp-tk-tokyo/A100, sg-singapore/A100, de-frankfurt/A100"
            ) in r.output
