"""bench/dispatch_throughput.py builds a plan the dispatcher accepts: every gang cuts into nodes."""

from __future__ import annotations

from carbonsched.catalog import load_catalog
from carbonsched.dispatch.outbox import placement_nodes
from tests.scriptload import load_script


def load_bench():
    return load_script("bench/dispatch_throughput.py")


def test_every_synthetic_placement_is_a_gang_its_site_can_cut_into_nodes():
    bench = load_bench()
    cat = load_catalog("global")
    sites = {s.id: s for s in cat.sites}
    doc = bench.synthetic_plan(2000, "t")
    nodes = [placement_nodes(sites[p["site"]], p["job_id"], p["gpu_type"], p["gpus"])
             for p in doc["placements"]]  # raises InputError for a gang no node shape cuts
    assert len(nodes) == 2000 and max(nodes) == 2  # multi-node gangs are part of the load
    assert all(p["payload"]["command"] for p in doc["placements"])


def test_gang_sizes_stop_at_one_node_then_take_whole_nodes():
    bench = load_bench()
    assert bench.gang_sizes(16, 8) == [1, 2, 3, 4, 5, 6, 7, 8, 16]
    assert bench.gang_sizes(12, 3) == [1, 2, 3, 6]
    assert bench.gang_sizes(4, 4) == [1, 2, 3, 4]  # one node: no multi-node size
    assert bench.gang_sizes(7, 4) == [1, 2, 3, 4]  # just short of two nodes
