"""Write docs/configuration.md from the settings class and the list of other variables.

Run (repository root)::

    python3 scripts/configuration_md.py            # rewrite docs/configuration.md
    python3 scripts/configuration_md.py --check    # exit 1 if the file is not what this writes

``tests/test_configuration_doc.py`` runs the check, and also that every ``CARBONSCHED_*`` name the
code reads is on the page.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from pydantic import SecretStr
from pydantic_core import PydanticUndefined

from carbonsched.config import CONFIG_ENV, Settings
from carbonsched.plan.colgen.options import ENV as COLGEN_ENV
from carbonsched.plan.colgen.options import ColgenOptions

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from generated import write_or_check  # noqa: E402  (a sibling script)

PAGE = ROOT / "docs" / "configuration.md"

GROUPS: dict[str, tuple[str, ...]] = {
    "Data and store": ("data_dir", "database_url", "retention_days"),
    "Planning": ("catalog", "workload_file", "solver", "time_limit_s", "horizon_hours", "fairness",
                 "rolling", "rolling_run_every_hours", "flex_notice_hours", "flex_event_hours",
                 "power_caps"),
    "The service and the cron": (
        "host", "port", "shutdown_timeout_s", "as_of", "cron_enabled", "cron_startup_run",
        "cron_time", "cron_timezone",
        "cron_plan_offset_days", "cron_check_interval_s", "lease_s",
        "bootstrap_admin_token", "token_cache_s", "token_cache_max_entries",
        "max_request_bytes", "max_jobs_per_request", "book_refresh_s",
        "sdk_public", "sdk_forecast_hours", "replica_name", "dispatcher", "dispatch_loops",
        "release_interval_s", "status_refresh_s", "reconcile_interval_s",
        "grid_event_interval_s"),
    "Data providers": ("providers_file", "providers_base_url", "providers_now"),
    "Dispatch": ("slurm_conf_dir", "slurm_use_clusters", "slurm_accounting", "slurm_timezone",
                 "slurm_account", "kubeconfig", "k8s_image",
                 "k8s_gpu_share_resource", "k8s_topology_label",
                 "dispatch_placeholder",
                 "dispatch_deadline_slack_s",
                 "dispatch_workers", "dispatch_max_attempts", "dispatch_backoff_s",
                 "dispatch_backend_timeout_s", "dispatch_lease_s", "dispatch_wait_s"),
}
"""The settings' sections on the page, in order; every field of Settings is in one."""

OTHER_VARIABLES: dict[str, list[tuple[str, str]]] = {
    "Other variables read by the commands": [
        ("CARBONSCHED_CONFIG", "TOML file of settings (keys as in the tables above); "
         "`carbonsched serve --config FILE` sets it."),
        ("CARBONSCHED_CBC_PATH", "CBC binary to use instead of the one PuLP bundles."),
        ("CARBONSCHED_BENCH_REF_GB", "Memory the planner benchmark's reference model may use "
         "before it is skipped. [GB]"),
    ],
    "Data provider credentials": [
        ("CARBONSCHED_SECRETS_FILE", "TOML file of provider tokens (`[<provider>] token = ...`), "
         "held in memory only."),
        ("ELECTRICITYMAPS_TOKEN", "Electricity Maps API token."),
        ("WATTTIME_USERNAME", "WattTime user name (with `WATTTIME_PASSWORD`)."),
        ("WATTTIME_PASSWORD", "WattTime password."),
        ("ENTSOE_API_KEY", "ENTSO-E Transparency Platform security token."),
        ("EIA_API_KEY", "U.S. EIA Open Data API key."),
    ],
    "Set by carbonsched in every dispatched job's environment": [
        ("CARBONSCHED_JOB_ID", "The job's id."),
        ("CARBONSCHED_PLAN_ID", "The plan that placed it."),
        ("CARBONSCHED_PIECE", "Piece number, 0-based (preemptible jobs run in pieces)."),
        ("CARBONSCHED_PIECES", "Number of pieces of the job."),
        ("CARBONSCHED_RESUME", "`1` when the piece must restore the checkpoint the previous piece "
         "wrote, else `0`."),
        ("CARBONSCHED_PIECE_END", "UTC instant (ISO 8601) by which the piece must have written its "
         "checkpoint and exited."),
    ],
    "Read by the demo jobs' command (`carbonsched/workload/demo_job.sh`)": [
        ("CARBONSCHED_DEMO_DIR", "Folder of the demo job's checkpoint file (default `/tmp`, per "
         "node; give it in the job's `env` to resume across nodes)."),
    ],
    "Set by the test command (`scripts/test`, `scripts/services.sh`)": [
        ("CARBONSCHED_PG_PORT", "Port of the test PostgreSQL server (default: a free port "
         "picked at run time, `python -m carbonsched.ports`)."),
        ("CARBONSCHED_PORT_BASE", "First of the 100 ports of the test Slurm clusters and the "
         "Kubernetes emulator (default: a free block picked at run time, `python -m "
         "carbonsched.ports --block 100`)."),
        ("CARBONSCHED_SERVICES_DIR", "Folder of the test services' state and logs."),
        ("CARBONSCHED_TEST_POSTGRES_URL", "URL of the test PostgreSQL database."),
        ("CARBONSCHED_CHROMIUM", "Headless Chromium used by the HTML report and page tests."),
        ("CARBONSCHED_SLURM_CLUSTERS", "Names of the test Slurm clusters."),
        ("CARBONSCHED_SHARED_DATA", "Folder of `../shared/data` (also read as `data_dir`)."),
        ("CARBONSCHED_K8S_CRDS", "Folder of the real Kueue, JobSet and Volcano CRDs the Kubernetes "
         "emulator validates against (default `$CARBONSCHED_SHARED_DATA/k8s-crds`, else "
         "`../shared/data/k8s-crds`)."),
    ],
}


def _type(annotation: object) -> str:
    text = getattr(annotation, "__name__", None) or str(annotation)
    for module in ("typing.", "pathlib.", "datetime.", "pydantic.types."):
        text = text.replace(module, "")
    return text.replace(" | None", " (optional)").replace("|", "\\|")


def _default(field) -> str:  # noqa: ANN001
    value = field.default
    if value is PydanticUndefined or value is None:
        return ""
    if isinstance(value, SecretStr):
        return "" if not value.get_secret_value() else "(secret)"
    if isinstance(value, bool):
        return str(value).lower()
    return f"`{value}`" if str(value) != "" else ""


def _one_line(text: str | None) -> str:
    text = re.sub(r":(?:mod|attr|func|class):`~?([^`]+)`", r"`\1`", text or "")
    return " ".join(text.replace("``", "`").split()).replace("|", "\\|")


def env_names(name: str, field) -> list[str]:  # noqa: ANN001
    """The environment variables that set field ``name`` (the prefixed name, or its aliases)."""
    alias = field.validation_alias
    if alias is not None and hasattr(alias, "choices"):
        return [str(c) for c in alias.choices]
    return [f"CARBONSCHED_{name.upper()}"]


def numpydoc_attributes(doc: str) -> dict[str, str]:
    """``{name: description}`` from the ``Attributes`` section of a numpydoc docstring."""
    lines = doc.splitlines()
    out: dict[str, str] = {}
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == "Attributes") + 2
    except StopIteration:
        return out
    name = None
    for ln in lines[start:]:
        if ln.strip() and not ln.startswith(" " * 8) and ln.startswith(" " * 4):
            name = ln.strip().split(" : ")[0]
            out[name] = ""
        elif ln.strip() and name is not None:
            out[name] += " " + ln.strip()
        elif not ln.strip() and name is not None and out[name]:
            continue
    return out


def colgen_rows() -> list[str]:
    """One table row per ``CARBONSCHED_CG_*`` variable: its option, and the option's doc."""
    described = numpydoc_attributes(ColgenOptions.__doc__ or "")
    rows = []
    for var, (field, _parse) in sorted(COLGEN_ENV.items()):
        text = described.get(field, "")
        rows.append(f"| `{var}` | `{field}` | {_one_line(text)} |")
    return rows


def render() -> str:
    """The whole page, as Markdown."""
    lines = [
        "# Configuration",
        "",
        "<!-- generated by `python3 scripts/configuration_md.py` from carbonsched/config.py; "
        "do not edit by hand -->",
        "",
        "Every command, the service, the cron and dispatch read one set of settings "
        "(`carbonsched.config.Settings`). Each setting comes from, strongest first: a "
        "command-line option where the command has one, the environment variable "
        "`CARBONSCHED_<NAME>`, the TOML file named by "
        f"`{CONFIG_ENV}` (or `carbonsched serve --config FILE`; keys are the lower-case names "
        "below, an unknown key is refused), then the default. Secrets (the bootstrap admin "
        "token, a password in the database URL) are never logged. The colgen planner's tuning "
        "variables (`CARBONSCHED_CG_*`) are listed last.",
        "",
        "See [Data providers](providers.md) for the providers file and "
        "[the service](service.md) for the cron.",
        "",
        "```toml",
        "# carbonsched.toml",
        'catalog = "global"',
        'database_url = "postgresql+psycopg2://carbonsched@db.internal/carbonsched"',
        'dispatcher = "carbonsched.dispatch.outbox:dispatch_plan"',
        'cron_time = "06:00"',
        "```",
        "",
    ]
    fields = Settings.model_fields
    grouped = [n for names in GROUPS.values() for n in names]
    if sorted(grouped) != sorted(fields):
        missing, unknown = sorted(set(fields) - set(grouped)), sorted(set(grouped) - set(fields))
        raise SystemExit(f"settings without a section in GROUPS: {missing}; "
                         f"names in GROUPS that are no setting: {unknown}")
    for heading, names in GROUPS.items():
        lines += ["", f"## {heading}", "", "| Variable | TOML key | Type | Default | Meaning |",
                  "|---|---|---|---|---|"]
        for name in names:
            field = fields[name]
            env = " or ".join(f"`{n}`" for n in env_names(name, field))
            lines.append(f"| {env} | `{name}` | {_type(field.annotation)} | {_default(field)} "
                         f"| {_one_line(field.description)} |")
    for heading, rows in OTHER_VARIABLES.items():
        lines += ["", f"## {heading}", "", "| Variable | Meaning |", "|---|---|"]
        lines += [f"| `{n}` | {_one_line(text)} |" for n, text in rows]
    lines += ["", "## Column generation tuning", "",
              "Read once per solve by `ColgenOptions.from_env` (`carbonsched.plan.colgen.options`) "
              "when the planner runs column generation (large instances; `bench` scripts' "
              "`--method colgen`); an unknown "
              "`CARBONSCHED_CG_*` name or a value out of range is refused with the variable "
              "named. The defaults are the measured ones; change them for experiments.",
              "", "| Variable | Option | Meaning |", "|---|---|---|", *colgen_rows()]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    """Write the page, or with ``--check`` compare it; return the exit status."""
    return write_or_check(PAGE, render(), argv, "python3 scripts/configuration_md.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
