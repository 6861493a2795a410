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
    ('sharing = "milli"\nshares_per_gpu = 3', "A100",
     r"shares_per_gpu must divide 1000, got 3; give the site's shards per GPU \(Slurm's "
     r"per-node shard Count over the node's GPUs; time-slicing replicas\), one of 1, 2, 4, 5, "
     r"8, 10, 20, 25"),
    ('sharing = "milli"\nshares_per_gpu = 0', "A100", r"shares_per_gpu must divide 1000, got 0"),
    ('sharing = "milli"\nshares_per_gpu = 2000', "A100",
     r"shares_per_gpu must divide 1000, got 2000"),
    ("shares_per_gpu = 10", "A100", r"shares_per_gpu is given without sharing = \"milli\""),
    ('sharing = "mig"\nmig_model = "A100-40GB"\nshares_per_gpu = 10', "A100",
     r"shares_per_gpu is given without sharing = \"milli\""),
    ('sharing = "milli"\nshares_per_gpu = 2.5', "A100", r"field 'shares_per_gpu' has type float"),
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
    assert ("gpu_milli shares (time-slicing, 10 shares per GPU) for gpu_milli jobs: "
            "us-ny-newyork/A100, "
            "us-pjm-ashburn/A100, jp-tk-tokyo/A100, sg-singapore/A100, de-frankfurt/A100"
            ) in r.output


@pytest.mark.parametrize(("extra", "shares"), [
    ('sharing = "milli"', 10),                          # the default
    ('sharing = "milli"\nshares_per_gpu = 1', 1),       # at the lower limit: one share a GPU
    ('sharing = "milli"\nshares_per_gpu = 1000', 1000),  # at the upper limit: exact milli
    ('sharing = "milli"\nshares_per_gpu = 8', 8),
])
def test_shares_per_gpu_is_read(fixtures_dir: Path, tmp_path: Path, extra: str,
                                shares: int) -> None:
    pool = load_catalog(_with(fixtures_dir, tmp_path, extra)).sites[0].gpus["A100"]
    assert pool.shares_per_gpu == shares
    # 250 milli asks ceil(250 x S / 1000) shares and the plan books them in milli
    want = -(-250 * shares // 1000)
    assert (pool.milli_shares(250), pool.booked_milli(250)) == (want, want * 1000 // shares)
    assert pool.booked_milli(250) >= 250 and pool.milli_shares(1000) == shares
