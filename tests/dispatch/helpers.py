"""Helpers of the dispatch tests."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pandas as pd


def future_plan(doc: dict, days_ahead: int = 2, prefix: str | None = None) -> dict:
    """``doc`` moved by whole days to start ``days_ahead`` days from today (UTC), with a new plan
    id and job ids made unique by ``prefix`` (the clusters are shared by the whole suite)."""
    doc = json.loads(json.dumps(doc))
    target = pd.Timestamp.now(tz="UTC").normalize() + pd.Timedelta(days=days_ahead)
    shift = target - pd.Timestamp(doc["date"], tz="UTC")
    prefix = prefix or uuid.uuid4().hex[:8]
    for p in doc["placements"]:
        p["job_id"] = f"{prefix}-{p['job_id']}"
        for k in ("start", "end", "deadline"):
            if p.get(k):
                p[k] = (pd.Timestamp(p[k]) + shift).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc["plan_id"] = uuid.uuid4().hex
    doc["date"] = target.strftime("%Y-%m-%d")
    return doc


def squeue_jobs(conf: Path) -> list[dict]:
    """Every job of one cluster, as ``squeue --json`` lists it (normalised)."""
    from carbonsched.adapters.dispatch.slurm import parse_squeue_json

    out = subprocess.run(["squeue", "--json", "--states=all"], env={**os.environ,
                         "SLURM_CONF": str(conf)}, capture_output=True, text=True, check=True)
    return parse_squeue_json(json.loads(out.stdout))
