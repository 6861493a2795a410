"""docs/configuration.md is generated from the settings and names every CARBONSCHED_* variable."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from carbonsched.config import Settings

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("carbonsched", "forecasts", "adapters", "scripts")


def variables_in_code() -> set[str]:
    names: set[str] = set()
    for folder in SCANNED:
        for path in (ROOT / folder).rglob("*"):
            if (path.is_file() and path.suffix in (".py", ".sh", "")
                    and "__pycache__" not in path.parts):
                names |= set(re.findall(r"CARBONSCHED_[A-Z0-9_]*[A-Z0-9]", path.read_text()))
    return names


def test_the_page_is_what_the_generator_writes():
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "configuration_md.py"),
                          "--check"], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr


def test_every_variable_the_code_names_is_documented():
    page = (ROOT / "docs" / "configuration.md").read_text()
    documented = set(re.findall(r"`(CARBONSCHED_[A-Z0-9_]+)`", page))
    found = variables_in_code()
    assert len(found) > 40  # the scan reads the code (it found the settings' names)
    # <NAME> in prose, and prefixes such as CARBONSCHED_CG_ (the code checks names against it)
    missing = sorted(n for n in found - documented - {"CARBONSCHED_NAME"}
                     if not any(d.startswith(n + "_") for d in documented))
    assert not missing, f"undocumented: {missing}; add them (scripts/configuration_md.py)"


def test_every_setting_has_a_description():
    assert [n for n, f in Settings.model_fields.items() if not f.description] == []


def test_the_dispatcher_is_a_setting_from_the_file(tmp_path, monkeypatch):
    cfg = tmp_path / "c.toml"
    cfg.write_text('dispatcher = "carbonsched.dispatch.outbox:dispatch_plan"\n'
                   'dispatch_workers = 1\n')
    monkeypatch.setenv("CARBONSCHED_CONFIG", str(cfg))
    monkeypatch.delenv("CARBONSCHED_DISPATCHER", raising=False)
    s = Settings()
    assert (s.dispatcher, s.dispatch_workers) == ("carbonsched.dispatch.outbox:dispatch_plan", 1)
    monkeypatch.setenv("CARBONSCHED_DISPATCHER", "")
    assert Settings().dispatcher == ""  # the environment wins over the file


def test_an_unknown_key_in_the_file_is_refused(tmp_path, monkeypatch):
    cfg = tmp_path / "c.toml"
    cfg.write_text('dispatch_worker = 1\n')
    monkeypatch.setenv("CARBONSCHED_CONFIG", str(cfg))
    with pytest.raises(ValidationError, match="dispatch_worker"):
        Settings()


@pytest.mark.parametrize("name", ["slurm_shards_per_gpu", "k8s_gpu_share_replicas"])
def test_a_setting_moved_to_the_catalog_says_where_it_went(tmp_path, monkeypatch, name):
    """The shares per GPU are the catalog pool's ``shares_per_gpu`` (the planner books them);
    a deployment still setting the old variable or key is told, not silently ignored."""
    monkeypatch.delenv("CARBONSCHED_CONFIG", raising=False)
    env = f"CARBONSCHED_{name.upper()}"
    monkeypatch.setenv(env, "8")
    with pytest.raises(ValidationError, match=rf"{env} \({name}\) is no longer a setting.*"
                       r"give shares_per_gpu in the site's \[sites.gpus.<TYPE>\] table"):
        Settings()
    monkeypatch.delenv(env)
    monkeypatch.setenv(env.lower(), "8")    # pydantic-settings reads either case
    with pytest.raises(ValidationError, match=rf"{env} \({name}\) is no longer a setting"):
        Settings()
    monkeypatch.delenv(env.lower())
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"{name} = 8\n")
    monkeypatch.setenv("CARBONSCHED_CONFIG", str(cfg))
    with pytest.raises(ValidationError, match=rf"{env} \({name}\) is no longer a setting"):
        Settings()
    cfg.write_text("k8s_gpu_share_resource = \"nvidia.com/gpu.shared\"\n")   # still a setting
    assert Settings().k8s_gpu_share_resource == "nvidia.com/gpu.shared"
