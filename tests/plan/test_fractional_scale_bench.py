"""bench/fractional_scale.py: the instance has what it claims; the script runs end to end."""

from __future__ import annotations

import json

import pytest

from carbonsched.plan.slices import MILLI_PER_GPU

from .benchload import load_bench


def test_mig_profile_is_the_smallest_holding_the_share():
    fs = load_bench("fractional_scale")
    assert fs.mig_profile_for(50) == "1g.5gb"
    assert fs.mig_profile_for(142) == "1g.5gb"       # 142 × 7 = 994 ≤ 1000: at the limit
    assert fs.mig_profile_for(143) == "2g.10gb"      # 1001 > 1000
    assert fs.mig_profile_for(250) == "2g.10gb"
    assert fs.mig_profile_for(571) == "4g.20gb"      # 3997 ≤ 4000: at the limit
    assert fs.mig_profile_for(572) is None           # only the whole GPU (7g.40gb) holds it


@pytest.mark.shared_data
def test_instance_shares_gpus_as_the_global_catalog_does(shared_data):
    fs = load_bench("fractional_scale")
    p = fs.make_fractional(200, 6, 24, seed=1, same_domain_share=1.0,
                           domain_zones=("CA-ON", "GB"), data_dir=shared_data)
    drawn = fs.trace_milli(shared_data)
    assert len(drawn) == 3078 and drawn.min() == 50 and drawn.max() == 810   # 1-GPU pods
    milli = set(drawn.tolist())
    single = [j for j in p.jobs if j.gpus == 1]
    frac = [j for j in single if j.payload is not None and j.payload.fractional]
    assert len(frac) == round(0.5 * len(single))
    assert all(j.payload.gpu_milli in milli for j in frac if j.payload.gpu_milli is not None)
    mig = [j for j in frac if j.payload.mig_profile is not None]
    assert mig and all(j.gpu_type == "A100" for j in mig)
    for s in p.sites:
        pool = s.gpus["A100"]
        assert pool.count % 8 == 0 and pool.gpus_per_node == 8
        assert pool.sharing == ("mig" if s.role.value == "green-hub" else "milli")
        assert (pool.mig_model == "A100-40GB") == (pool.sharing == "mig")
        assert (pool.nodes_per_domain == 1) == (s.zone in ("CA-ON", "GB"))
        assert all(q.sharing is None for g, q in s.gpus.items() if g != "A100")
    gangs = [j for j in p.jobs if j.gpu_type == "A100" and j.gpus >= 2]
    assert gangs and all(j.max_domains == 1 for j in gangs)
    assert not any(j.max_domains for j in p.jobs if j not in gangs)
    with pytest.raises(ValueError, match="fractional_share"):
        fs.make_fractional(10, 2, 24, fractional_share=1.01, data_dir=shared_data)
    p = fs.make_fractional(10, 2, 24, fractional_share=1.0, data_dir=shared_data)  # the limit
    assert all(j.payload is not None for j in p.jobs if j.gpus == 1)


@pytest.mark.shared_data
def test_script_runs_on_50_jobs_and_recounts_slices(shared_data, tmp_path, monkeypatch):
    fs = load_bench("fractional_scale")
    monkeypatch.setenv("CARBONSCHED_SHARED_DATA", str(shared_data))
    out = tmp_path / "fs.json"
    doc = fs.main(["--jobs", "50", "--sites", "4", "--hours", "24", "--limit", "30",
                   "--seeds", "0", "--domain-zones", "CA-ON", "BR-SP", "--out", str(out)])
    assert json.loads(out.read_text())["runs"][0]["jobs"] == 50
    assert out.with_suffix(".md").read_text().startswith("# Fractional GPUs and domains")
    run = doc["runs"][0]
    assert run["method"] == "milp" and run["objective"] > 0
    assert run["recount_objective"] == pytest.approx(run["objective"], rel=1e-6)
    assert not any(run["violations"].values())
    sl = run["slices"]
    assert sl["fractional_jobs"] == 25
    assert sl["on_slices"] + sl["on_whole_gpus"] == sl["fractional_placed"]
    assert sl["on_slices"] >= 1 and sl["stranded_gpu_hours"] > 0
    assert all(v > 0 for v in sl["slices_used"].values())
    assert sl["slices_used"].get("gpu_milli", 0) <= MILLI_PER_GPU * sl["sliced_gpu_hours"]


def test_fallbacks_name_the_greedy_plan_and_the_whole_gpu_clause():
    fs = load_bench("fractional_scale")

    class Rec:
        method, greedy_unplaced = "milp", 4
        note = ("HiGHS; column generation plans 12 fractional job(s) at sites that share GPUs "
                "as whole GPUs (slice layouts are modelled by the direct MILP only)")

    class Res:
        solver, status = Rec(), "heuristic"

    out = fs.fallbacks("colgen", Res())
    assert out[0] == "method: asked colgen, ran milp"
    assert out[1].startswith("greedy plan") and "4 job(s)" in out[1]
    assert out[2].startswith("column generation plans 12 fractional") and len(out) == 3
    sm = fs.summarise([{"seed": 0, "seconds": 60.0, "mip_gap": 0.01, "method": "milp",
                        "fallbacks": [], "violations": {"slice_violations": 0}}], 0.01)
    assert sm["target_met"] and sm["gap_worst"] == pytest.approx(0.01)   # at the limit
    sm = fs.summarise([{"seed": 0, "seconds": 1.0, "mip_gap": 0.0, "method": "milp",
                        "fallbacks": [], "violations": {"domain_violations": 1}}], 0.01)
    assert sm["target_met"] is False and sm["violation_runs"] == 1
    sm = fs.summarise([{"seed": 0, "seconds": 1.0, "mip_gap": None, "method": "milp",
                        "fallbacks": [], "violations": {}}], 0.01)
    assert sm["target_met"] is False and sm["gap_worst"] == float("inf")
