"""Workload files (JSON and CSV), the demo day, and a day of work built from real traces.

Formats and every mapping from the traces are documented in ``docs/workload.md``; the mapping
parameters, each with its source, live in ``data/workload_traces.toml``.

* :func:`read_workload` / :func:`write_workload` — ``.json`` (``{"jobs": [...],
  "inference": [...]}``) or ``.csv`` (one table; a ``kind`` column says ``training``, ``batch``
  or ``inference``). Timestamps are ISO 8601 with an offset; naive ones are refused. Every bad
  entry raises :class:`~carbonsched.errors.WorkloadError` naming the file, the line (CSV) or
  entry index (JSON) and the field. A job row is read by the one job schema
  (:class:`~carbonsched.workload.schema.JobSpec`, as the API's requests are), whose message
  follows the field.
* :func:`demo_workload` — a deterministic synthetic day for the Quick start (no shared data).
* :func:`workload_from_traces` — one day from the Alibaba GPU v2023 pod and node lists and the
  GAIA PAI arrivals, seeded and deterministic.
"""

from __future__ import annotations

import csv
import json
import math
import tomllib
from collections.abc import Callable, Iterable
from datetime import date
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError

from carbonsched.catalog import Catalog, UserArea
from carbonsched.domain import (
    PAYLOAD_FIELDS,
    InferenceDemand,
    Job,
    JobPayload,
    Site,
    WorkKind,
    Workload,
    jsonable,
)
from carbonsched.errors import CarbonschedError, WorkloadError
from carbonsched.fileio import atomic_open, atomic_write_text
from carbonsched.limits import (
    MAX_JOB_GPUS,
    MAX_POD_TEMPLATE_BYTES,
    MAX_POWER_PER_GPU_KW,
    MAX_SLO_MS,
)
from carbonsched.timeaxis import HOUR, day_start_utc
from carbonsched.workload.schema import (
    JOB_FIELDS,
    SITE_SEPARATOR,
    UNITS,
    Area,
    GpuType,
    JobSpec,
    absent,
    positive_number,
    timestamp,
    whole_number,
)

INFERENCE_FIELDS = ("area", "hour", "gpu_type", "gpus", "slo_ms", "power_per_gpu_kw")
CSV_COLUMNS = ("kind", "id", "tenant", "gpu_type", "gpus", "duration_hours", "power_per_gpu_kw",
               "earliest_start", "deadline", "allowed_sites", "area", "hour", "slo_ms",
               "duration_minutes", "preemptible", "checkpoint_overhead_minutes", "max_pieces",
               "max_domains", "topology", *PAYLOAD_FIELDS)
"""Columns of the CSV format, in the order :func:`write_workload` writes them (the payload
columns only when a job has a payload, ``max_domains`` only when a job has a topology
constraint; a reader also takes a ``topology`` column). A payload cell holding a list or a mapping
(``command`` as argv, ``args``, ``env``, ``volumes``, ``pod_template``) is JSON text; ``env``
may also be ``NAME=value;NAME2=value2``."""
CSV_KINDS = ("training", "batch", "inference")

POD_FILE = "job-traces/alibaba_gpu_v2023_openb_pod_list_default.csv"
NODE_FILE = "job-traces/alibaba_gpu_v2023_openb_node_list_gpu_node.csv"
GAIA_FILE = "job-traces/gaia_pai-100k.csv"


# --- parameters -------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def load_parameters() -> dict[str, Any]:
    """The values of ``data/workload_traces.toml`` (each ``{value, source}`` by its value)."""
    text = resources.files("carbonsched.data").joinpath("workload_traces.toml").read_text("utf-8")
    raw = tomllib.loads(text)

    def values(t: dict[str, Any]) -> dict[str, Any]:
        return {k: (v["value"] if isinstance(v, dict) and "value" in v else values(v)
                    if isinstance(v, dict) else v) for k, v in t.items()}

    return values(raw)


def it_power_per_gpu_kw(gpu_type: str, catalog: Catalog | None = None) -> float:
    """IT power of one running GPU including its host share. [kW]

    From ``data/workload_traces.toml`` (DGX datasheets, see there); a type missing from the
    table falls back to twice the catalog's board power (the DGX A100 ratio 6.5 kW / 3.2 kW ≈ 2).

    Raises
    ------
    WorkloadError
        The type is neither in the table nor in the catalog.
    """
    table = load_parameters()["gpu_types"]
    if gpu_type in table:
        return float(table[gpu_type]["it_power_per_gpu_kw"])
    if catalog is not None:
        for s in catalog.sites:
            if gpu_type in s.gpus:
                return 2.0 * s.gpus[gpu_type].board_power_w / 1000.0
    raise WorkloadError(f"GPU type {gpu_type!r} has no power figure; add it to "
                        "data/workload_traces.toml [gpu_types] or to the catalog")


# --- reading and writing ----------------------------------------------------------------------

class _Where:
    def __init__(self, path: Path, label: str) -> None:
        self.path, self.label = path, label

    def err(self, field: str | None, problem: str, fix: str) -> WorkloadError:
        return self.said(field, f"{problem}; {fix}")

    def said(self, field: str | None, message: str) -> WorkloadError:
        """``message`` (``"<problem>; <fix>"``) at this entry and ``field``."""
        f = f", field {field!r}" if field else ""
        return WorkloadError(f"{self.path}, {self.label}{f}: {message} (see docs/workload.md)")

    def refused(self, exc: ValidationError) -> WorkloadError:
        """The first error of the job schema (:class:`JobSpec`) at this entry."""
        e = exc.errors()[0]
        return self.said(str(e["loc"][0]) if e["loc"] else None, e["msg"])


def _checked(w: _Where, field: str, check: Callable[[], Any]) -> Any:
    """``check()``; its refusal (the job schema's words) at ``field`` of ``w``."""
    try:
        return check()
    except PydanticCustomError as exc:
        raise w.said(field, exc.message()) from None


def _timestamp(w: _Where, field: str, value: Any, on_hour: bool = True) -> pd.Timestamp:
    return _checked(w, field, lambda: timestamp(value, on_hour=on_hour))


def _int(w: _Where, field: str, value: Any, minimum: int, maximum: int) -> int:
    return _checked(w, field, lambda: whole_number(value, UNITS[field], minimum, maximum))


def _float(w: _Where, field: str, value: Any, maximum: float) -> float:
    return _checked(w, field, lambda: positive_number(value, UNITS[field], maximum))


INFERENCE_NAMES = {"area": TypeAdapter(Area), "gpu_type": TypeAdapter(GpuType)}
"""The API's types of an inference demand's ``area`` and ``gpu_type`` (``POST /v1/placements``
with ``kind: inference``): the same limits and words in a file."""


def _name(w: _Where, field: str, value: Any) -> str:
    try:
        return INFERENCE_NAMES[field].validate_python(value)
    except ValidationError as exc:
        raise w.said(field, exc.errors()[0]["msg"]) from None


def _job_from(w: _Where, rec: dict[str, Any]) -> Job:
    """A job through the job schema; its first error at this entry."""
    try:
        spec = JobSpec.model_validate(rec)
    except ValidationError as exc:
        raise w.refused(exc) from None
    try:
        return spec.to_job()
    except CarbonschedError as exc:
        raise w.err(None, str(exc), "fix the entry") from exc


def _inference_from(w: _Where, rec: dict[str, Any]) -> InferenceDemand:
    for f in INFERENCE_FIELDS:
        if absent(rec.get(f)):
            raise w.err(f, "is missing", f"give {f} for every inference demand")
    return InferenceDemand(area=_name(w, "area", rec["area"]),
                           hour=_timestamp(w, "hour", rec["hour"]),
                           gpu_type=_name(w, "gpu_type", rec["gpu_type"]),
                           gpus=_int(w, "gpus", rec["gpus"], 0, MAX_JOB_GPUS),
                           slo_ms=_float(w, "slo_ms", rec["slo_ms"], MAX_SLO_MS),
                           power_per_gpu_kw=_float(w, "power_per_gpu_kw",
                                                   rec["power_per_gpu_kw"],
                                                   MAX_POWER_PER_GPU_KW))


def _check_unique(path: Path, workload: Workload, labels: list[str], inf_labels: list[str]
                  ) -> None:
    seen: dict[str, str] = {}
    for job, label in zip(workload.jobs, labels, strict=True):
        if job.id in seen:
            raise WorkloadError(f"{path}, {label}, field 'id': duplicate job id {job.id!r} "
                                f"(also {seen[job.id]}); give every job a unique id")
        seen[job.id] = label
    keys: dict[tuple[str, pd.Timestamp, str], str] = {}
    for d, label in zip(workload.inference, inf_labels, strict=True):
        k = (d.area, d.hour, d.gpu_type)
        if k in keys:
            raise WorkloadError(f"{path}, {label}: duplicate inference demand for area "
                                f"{d.area!r}, hour {d.hour.isoformat()}, gpu_type {d.gpu_type!r}"
                                f" (also {keys[k]}); merge them into one entry")
        keys[k] = label


def _read_json(path: Path) -> Workload:
    try:
        doc = json.loads(path.read_text("utf-8"))
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"{path}, line {exc.lineno}: not valid JSON ({exc.msg}); "
                            "fix the syntax") from exc
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: byte {exc.start} is not UTF-8 ({exc.reason}); save the "
                            "file as UTF-8") from exc
    except RecursionError as exc:
        raise WorkloadError(f"{path}: JSON nested too deeply; give an object with lists "
                            "'jobs' and 'inference'") from exc
    if not isinstance(doc, dict) or not set(doc) <= {"jobs", "inference"}:
        raise WorkloadError(f"{path}: expected an object with keys 'jobs' and 'inference'"
                            + (f", got keys {sorted(doc)}" if isinstance(doc, dict) else "")
                            + " (see docs/workload.md)")
    jobs, labels, inf, inf_labels = [], [], [], []
    for key in ("jobs", "inference"):
        entries = doc.get(key, [])
        if not isinstance(entries, list):
            raise WorkloadError(f"{path}: '{key}' must be a list")
        for i, rec in enumerate(entries):
            ident = f" (id {rec.get('id')!r})" if isinstance(rec, dict) and "id" in rec else ""
            w = _Where(path, f"{key}[{i}]{ident}")
            if not isinstance(rec, dict):
                raise w.err(None, "is not an object", "give an object per entry")
            if key == "jobs":            # the job schema refuses unknown fields itself
                jobs.append(_job_from(w, rec))
                labels.append(w.label)
            else:
                unknown = sorted(set(rec) - set(INFERENCE_FIELDS))
                if unknown:
                    raise w.err(unknown[0], "unknown field",
                                f"remove it or use one of {', '.join(INFERENCE_FIELDS)}")
                inf.append(_inference_from(w, rec))
                inf_labels.append(w.label)
    out = Workload(jobs=jobs, inference=inf)
    _check_unique(path, out, labels, inf_labels)
    return out


CSV_CELL_LIMIT = 4 * MAX_POD_TEMPLATE_BYTES
"""Longest CSV cell read (Python's csv module stops at 128 KiB by default): room for the
largest payload a job may carry (a pod template as JSON text, doubled quotes and all). [chars]"""


def _read_csv(path: Path) -> Workload:
    if csv.field_size_limit() < CSV_CELL_LIMIT:
        csv.field_size_limit(CSV_CELL_LIMIT)
    try:
        return _read_csv_rows(path)
    except csv.Error as exc:
        raise WorkloadError(f"{path}: not a readable CSV table ({exc}); check quoting (a cell "
                            "holding commas, quotes or newlines is quoted, with quotes "
                            "doubled) and cell sizes") from None


def _read_csv_rows(path: Path) -> Workload:
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        unknown = [c for c in header if c not in CSV_COLUMNS]
        if unknown:
            raise WorkloadError(f"{path}, line 1: unknown column {unknown[0]!r}; use the columns "
                                f"{', '.join(CSV_COLUMNS)} (see docs/workload.md)")
        if "kind" not in header:
            raise WorkloadError(f"{path}, line 1: missing column 'kind'; add it with values "
                                f"{', '.join(CSV_KINDS)} (see docs/workload.md)")
        jobs, labels, inf, inf_labels = [], [], [], []
        end = reader.line_num
        for row in reader:
            # a record starts on the line after the previous one ended (a quoted cell, such as
            # a script, may span lines; reader.line_num is where the record ends)
            line, end = end + 1, reader.line_num
            w = _Where(path, f"line {line}")
            if None in row:
                raise w.err(None, "has more cells than the header", "remove the extra cells")
            kind = (row.get("kind") or "").strip()
            if kind not in CSV_KINDS:
                raise w.err("kind", f"unknown kind {kind!r}", f"give one of {', '.join(CSV_KINDS)}")
            rec = {k: _cell(k, v) for k, v in row.items()}
            # a value in a column of the other kind would be dropped unread: refused, as the
            # JSON reader refuses the field
            own = (*INFERENCE_FIELDS, "kind") if kind == "inference" else (*JOB_FIELDS, "kind")
            stray = [k for k, v in rec.items() if k not in own and not absent(v)]
            if stray:
                fields = (", ".join(c for c in CSV_COLUMNS if c in own)
                          if kind == "inference" else "the job fields")
                raise w.err(stray[0], f"is not a field of {kind} rows, got {rec[stray[0]]!r}",
                            f"leave it empty in {'an' if kind[0] in 'aeiou' else 'a'} "
                            f"{kind} row (its fields: {fields})")
            if kind == "inference":
                inf.append(_inference_from(w, rec))
                inf_labels.append(w.label)
            else:
                jobs.append(_job_from(w, {k: v for k, v in rec.items() if k in JOB_FIELDS}))
                labels.append(w.label)
    out = Workload(jobs=jobs, inference=inf)
    _check_unique(path, out, labels, inf_labels)
    return out


VERBATIM_COLUMNS = ("script",)
"""CSV columns kept as written (a batch script's first line and trailing newline are its own:
the schema checks them as it does a JSON file's or the API's); a cell of only spaces is
empty. Every other cell is stripped."""


def _cell(column: str | None, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if column in VERBATIM_COLUMNS:
        return value if value.strip() else ""
    return value.strip()


def read_workload(path: str | Path) -> Workload:
    """Read a jobs file (``.json`` or ``.csv``; the format is chosen by the suffix).

    Parameters
    ----------
    path
        The file. Formats: ``docs/workload.md``.

    Returns
    -------
    Workload
        Jobs and inference demand, timestamps tz-aware UTC.

    Raises
    ------
    WorkloadError
        Missing file, unknown suffix, bad syntax, or a bad entry (the message names the file,
        the CSV line or JSON entry index, and the field).
    """
    p = Path(path)
    if not p.is_file():
        raise WorkloadError(f"{p}: workload file not found; give an existing .json or .csv file")
    suffix = p.suffix.lower()
    try:
        if suffix == ".json":
            return _read_json(p)
        if suffix == ".csv":
            return _read_csv(p)
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{p}: byte {exc.start} is not UTF-8 ({exc.reason}); save the "
                            "file as UTF-8") from exc
    except OSError as exc:
        raise WorkloadError(f"{p}: cannot read the workload file ({exc.strerror or exc})"
                            ) from exc
    raise WorkloadError(f"{p}: unknown workload format {p.suffix!r}; use .json or .csv")


def _fmt_ts(t: pd.Timestamp) -> str:
    return t.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


def write_workload(workload: Workload, path: str | Path) -> Path:
    """Write a workload as ``.json`` or ``.csv`` (by suffix); :func:`read_workload` reads it back.

    Timestamps are written in UTC with a ``Z`` suffix. Returns the path written.

    Raises
    ------
    WorkloadError
        Unknown suffix.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".json":
        doc = {"jobs": [{**{k: v for k, v in jsonable(j).items()
                            if k != "payload" and not (k == "max_domains" and v is None)},
                         **(j.payload.to_dict() if j.payload is not None else {})}
                        for j in workload.jobs],
               "inference": [jsonable(d) for d in workload.inference]}
        atomic_write_text(p, json.dumps(doc, indent=1) + "\n")
        return p
    if suffix != ".csv":
        raise WorkloadError(f"{p}: unknown workload format {p.suffix!r}; use .json or .csv")
    with_payload = any(j.payload is not None for j in workload.jobs)
    with_domains = any(j.max_domains is not None for j in workload.jobs)
    columns = [c for c in CSV_COLUMNS if (with_payload or c not in PAYLOAD_FIELDS)
               and (with_domains or c != "max_domains") and c != "topology"]
    with atomic_open(p, "w", newline="", encoding="utf-8") as fh:
        wr = csv.DictWriter(fh, fieldnames=columns, lineterminator="\n")
        wr.writeheader()
        for j in workload.jobs:
            cells = {k: (v if isinstance(v, (str, int)) else json.dumps(v))
                     for k, v in (j.payload.to_dict() if j.payload is not None else {}).items()}
            wr.writerow({**cells, "kind": str(j.kind), "id": j.id, "tenant": j.tenant,
                         "gpu_type": j.gpu_type, "gpus": j.gpus,
                         "duration_minutes": j.duration_minutes,
                         "preemptible": "true" if j.preemptible else "false",
                         "checkpoint_overhead_minutes": j.checkpoint_overhead_minutes,
                         "max_pieces": j.max_pieces,
                         **({"max_domains": j.max_domains if j.max_domains is not None
                             else ""} if with_domains else {}),
                         "power_per_gpu_kw": repr(j.power_per_gpu_kw),
                         "earliest_start": _fmt_ts(j.earliest_start),
                         "deadline": _fmt_ts(j.deadline),
                         "allowed_sites": SITE_SEPARATOR.join(j.allowed_sites)})
        for d in workload.inference:
            wr.writerow({"kind": "inference", "area": d.area, "hour": _fmt_ts(d.hour),
                         "gpu_type": d.gpu_type, "gpus": d.gpus, "slo_ms": repr(d.slo_ms),
                         "power_per_gpu_kw": repr(d.power_per_gpu_kw)})
    return p


# --- shared pieces of the generators ----------------------------------------------------------

def diurnal_factor(local_hour: np.ndarray | float, amplitude: float, peak_hour: float
                   ) -> np.ndarray:
    """Diurnal demand shape ``1 + A cos(2π (h − h_peak) / 24)`` (mean 1 over a day). [-]"""
    return 1.0 + amplitude * np.cos(2.0 * np.pi * (np.asarray(local_hour) - peak_hour) / 24.0)


def _inference_day(catalog: Catalog, day0: pd.Timestamp, mean_total_gpus: float, gpu_type: str,
                   power_kw: float) -> list[InferenceDemand]:
    """Per area and UTC hour: ``round(mean_total × w_a / Σw × diurnal(local hour))`` GPUs."""
    p = load_parameters()["inference"]
    areas = list(catalog.areas.values())
    total_w = sum(a.demand_weight for a in areas) or 1.0
    hours = pd.date_range(day0, periods=24, freq="h")
    want = np.zeros((len(areas), len(hours)))
    for n, a in enumerate(areas):
        local = hours.tz_convert(a.timezone)
        shape = diurnal_factor(local.hour + local.minute / 60.0, p["diurnal_amplitude"],
                               p["peak_hour_local"])
        want[n] = mean_total_gpus * a.demand_weight / total_w * shape
    want = _cap_to_edge_capacity(catalog, areas, want, gpu_type, float(p["slo_ms"]),
                                 float(p["max_edge_utilisation"]))
    out: list[InferenceDemand] = []
    for n, a in enumerate(areas):
        gpus = np.floor(want[n] + 0.5).astype(int)
        out.extend(InferenceDemand(area=a.id, hour=h, gpu_type=gpu_type, gpus=int(g),
                                   slo_ms=float(p["slo_ms"]), power_per_gpu_kw=power_kw)
                   for h, g in zip(hours, gpus, strict=True))
    return out


def _cap_to_edge_capacity(catalog: Catalog, areas: list[UserArea], want: np.ndarray,
                          gpu_type: str, slo_ms: float, max_utilisation: float) -> np.ndarray:
    """Scale demand down where it would not fit the GPUs within its SLO.

    Each area's demand ``want`` (shape ``(areas, hours)``) is split over the sites within its SLO
    in proportion to their ``gpu_type`` count; wherever a site would then use more than
    ``max_utilisation`` of its GPUs, the demands of the areas it serves are scaled down by the
    excess ratio (a few passes, until every site fits). The result is feasible by construction
    (the proportional split itself fits) and leaves ``1 - max_utilisation`` for batch work of
    the same type. An area with no site within its SLO gets no demand.
    """
    sites = [s for s in catalog.sites if s.gpu_count(gpu_type) > 0]
    cap = np.array([s.gpu_count(gpu_type) for s in sites], dtype=float)
    reach = np.array([[s.latency_ms.get(a.id, math.inf) <= slo_ms for s in sites]
                      for a in areas], dtype=float) * cap          # (areas, sites)
    share = np.divide(reach, reach.sum(axis=1, keepdims=True),
                      out=np.zeros_like(reach), where=reach.sum(axis=1, keepdims=True) > 0)
    out = want * (share.sum(axis=1, keepdims=True) > 0)
    for _ in range(20):
        load = share.T @ out                                       # (sites, hours)
        ratio = np.where(load > max_utilisation * cap[:, None],
                         max_utilisation * cap[:, None] / np.maximum(load, 1e-12), 1.0)
        if (ratio >= 1.0).all():
            break
        # each area takes the tightest ratio among the sites it uses
        area_ratio = np.ones_like(out)
        for n in range(len(areas)):
            used = share[n] > 0
            if used.any():
                area_ratio[n] = ratio[used].min(axis=0)
        out = out * area_ratio
    return out


def _group_of(site: Site) -> str:
    return str(site.meta.get("residency_group", site.id))


def _residency_sites(catalog: Catalog, area: UserArea, gpu_type: str) -> tuple[str, ...]:
    """Sites of the residency group nearest to ``area`` that has ``gpu_type``."""
    candidates = [s for s in catalog.sites if s.gpu_count(gpu_type) > 0]
    if not candidates:
        return ()

    def dist(s: Site) -> float:
        return s.latency_ms.get(area.id, math.inf)

    nearest = min(candidates, key=lambda s: (dist(s), s.id))
    group = _group_of(nearest)
    return tuple(s.id for s in candidates if _group_of(s) == group)


def home_first_sites(catalog: Catalog, area: UserArea, gpu_type: str,
                     allowed: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Allowed sites with GPUs of ``gpu_type``, the tenant's *home* site first.

    The home site is the one nearest (lowest latency) to the tenant's area: where the job would run
    without carbonsched, so the carbon-agnostic baseline ("earliest start at the first allowed
    site") runs it there. ``allowed=()`` means every site of the catalog.
    """
    ids = set(allowed) or set(catalog.site_ids)
    candidates = [s for s in catalog.sites if s.id in ids and s.gpu_count(gpu_type) > 0]
    candidates.sort(key=lambda s: (s.latency_ms.get(area.id, math.inf), s.id))
    return tuple(s.id for s in candidates)


def _max_pool(catalog: Catalog, gpu_type: str, sites: Iterable[str]) -> int:
    ids = set(sites) or set(catalog.site_ids)
    return max((s.gpu_count(gpu_type) for s in catalog.sites if s.id in ids), default=0)


def _deadline_hour(rng: np.random.Generator, start_h: int, duration: int,
                   clip_to_day: bool = True) -> int:
    p = load_parameters()["jobs"]
    factor = rng.uniform(p["slack_factor_min"], p["slack_factor_max"])
    slack = max(int(p["min_slack_hours"]), math.ceil(factor * duration))
    end = start_h + duration + slack
    return min(end, 24) if clip_to_day else end


def _inference_type(catalog: Catalog) -> str:
    wanted = load_parameters()["inference"]["gpu_type"]
    types = catalog.gpu_types()
    if wanted in types:
        return str(wanted)
    if not types:
        raise WorkloadError(f"catalog {catalog.name!r} has no GPUs")
    return min(types, key=lambda t: min(s.gpus[t].board_power_w for s in catalog.sites
                                        if t in s.gpus))


# --- demo -------------------------------------------------------------------------------------

def demo_workload(catalog: Catalog, day: date | str, seed: int = 0) -> Workload:
    """A deterministic synthetic day for the Quick start; needs no shared data.

    ``[demo] jobs`` jobs (default 30) with GPU types drawn uniformly from the catalog's types,
    gangs from ``gang_sizes`` (clipped to the largest pool of the type), 1..``max_duration_hours``
    hours, arrivals uniform on 00..``last_arrival_hour`` UTC, deadlines as in
    :func:`workload_from_traces`; inference per area and hour with mean total GPUs =
    ``inference_load`` × the fleet's inference-type GPUs, shaped by :func:`diurnal_factor`.

    Parameters
    ----------
    catalog
        The site catalog (GPU types, areas).
    day
        The UTC day planned (``date`` or ``YYYY-MM-DD``); any date.
    seed
        Random seed; the same inputs give the same workload.

    Returns
    -------
    Workload
    """
    p = load_parameters()["demo"]
    rng = np.random.default_rng(seed)
    day0 = day_start_utc(day)
    types = catalog.gpu_types()
    if not types:
        raise WorkloadError(f"catalog {catalog.name!r} has no GPUs")
    areas = list(catalog.areas.values())
    weights = np.array([a.demand_weight for a in areas], dtype=float)
    weights = weights / weights.sum() if weights.sum() > 0 else np.full(len(areas), 1 / len(areas))
    jobs = []
    for i in range(int(p["jobs"])):
        gpu_type = str(types[rng.integers(len(types))])
        gang = int(rng.choice(p["gang_sizes"]))
        gang = max(1, min(gang, _max_pool(catalog, gpu_type, ())))
        duration = int(rng.integers(1, int(p["max_duration_hours"]) + 1))
        start_h = min(int(rng.integers(0, int(p["last_arrival_hour"]) + 1)), 24 - duration)
        end_h = _deadline_hour(rng, start_h, duration)
        area = areas[int(rng.choice(len(areas), p=weights))]
        kind = WorkKind.TRAINING if gang >= 4 else WorkKind.BATCH
        jobs.append(Job(id=f"demo-{day0:%Y%m%d}-{i:03d}", tenant=area.id, gpu_type=gpu_type,
                        gpus=gang, duration_hours=duration,
                        power_per_gpu_kw=it_power_per_gpu_kw(gpu_type, catalog),
                        earliest_start=day0 + start_h * HOUR, deadline=day0 + end_h * HOUR,
                        allowed_sites=home_first_sites(catalog, area, gpu_type), kind=kind,
                        payload=JobPayload(command=demo_job_command())))
    inf_type = _inference_type(catalog)
    fleet = sum(s.gpu_count(inf_type) for s in catalog.sites)
    inference = _inference_day(catalog, day0, p["inference_load"] * fleet, inf_type,
                               it_power_per_gpu_kw(inf_type, catalog))
    return Workload(jobs=jobs, inference=inference)


@lru_cache(maxsize=1)
def demo_job_command() -> str:
    """The demo jobs' payload: ``carbonsched/workload/demo_job.sh``, as ``command`` text.

    A POSIX ``sh`` script (GNU or busybox) that works in 10 s steps until a minute before
    ``CARBONSCHED_PIECE_END`` and checkpoints on ``SIGUSR1``/``SIGTERM`` (resuming when
    ``CARBONSCHED_RESUME=1``): real work that keeps the piece contract, not ``sleep``. Shipped
    as ``command`` so it runs at Slurm and Kubernetes sites alike.
    """
    return resources.files("carbonsched.workload").joinpath("demo_job.sh").read_text()


# --- traces -----------------------------------------------------------------------------------

def _read_trace(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    if not path.is_file():
        raise WorkloadError(f"{path}: trace file not found; set CARBONSCHED_SHARED_DATA (or "
                            "data_dir) to the folder that holds job-traces/")
    df = pd.read_csv(path)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise WorkloadError(f"{path}, line 1: missing column {missing[0]!r}; expected the "
                            "published trace layout (see docs/workload.md)")
    return df


def trace_gpu_mix(data_dir: str | Path, catalog: Catalog) -> pd.Series:
    """Share of each catalog GPU type in the Alibaba node list (by GPU count). [-]

    Trace models are mapped by ``[trace_gpu_models]``; types the catalog lacks are dropped and
    the shares renormalised.

    Raises
    ------
    WorkloadError
        Missing file, an unmapped model, or no mapped type present in the catalog.
    """
    path = Path(data_dir) / NODE_FILE
    nodes = _read_trace(path, ("gpu", "model"))
    mapping = load_parameters()["trace_gpu_models"]
    unmapped = sorted(set(nodes["model"]) - set(mapping))
    if unmapped:
        raise WorkloadError(f"{path}: GPU model {unmapped[0]!r} has no catalog type; add it to "
                            "[trace_gpu_models] in data/workload_traces.toml")
    by_type = nodes.groupby(nodes["model"].map(mapping))["gpu"].sum()
    by_type = by_type[by_type.index.isin(catalog.gpu_types())]
    if by_type.sum() <= 0:
        raise WorkloadError(f"catalog {catalog.name!r} has none of the trace's GPU types "
                            f"({', '.join(sorted(set(mapping.values())))})")
    return (by_type / by_type.sum()).sort_index()


def workload_from_traces(data_dir: str | Path, day: date | str, catalog: Catalog,
                         seed: int = 0, scale: float = 1.0, clip_to_day: bool = True
                         ) -> Workload:
    """One day of jobs and inference demand built from the real traces (see docs/workload.md).

    * **Arrivals and durations**: the GAIA PAI jobs (``gaia_pai-100k.csv``; ``arrival_time`` and
      ``length`` in hours from the start of the trace year) whose arrival falls on trace day
      ``(day-of-year − 1) mod 365``; arrival hour = ``floor(arrival_time) mod 24`` read as UTC.
      ``duration_hours = min(max(1, ceil(length)), 24)``. A job that would overrun the UTC day
      starts earlier: ``earliest_start = min(arrival hour, 24 − duration)`` (its energy is kept);
      with ``clip_to_day=False`` (the rolling horizon's workload, issue 14) it starts at its
      arrival hour.
      ``scale`` multiplies the day's job count: ``< 1`` keeps a seeded subsample, ``> 1`` repeats
      the day's jobs (each copy draws its own pod and GPU type).
    * **Gangs and kind**: each job draws an Alibaba v2023 pod with ``num_gpu >= 1`` from the
      ``BE`` (batch) and ``Burstable``/``Guaranteed`` (training) pods; gang =
      ``max(1, ceil(num_gpu × gpu_milli / 1000))``, clipped to the largest pool of its GPU type
      at its allowed sites.
    * **GPU type**: drawn from the node-list GPU mix (:func:`trace_gpu_mix`).
    * **Power**: ``it_power_per_gpu_kw`` of the type (DGX datasheets; data/workload_traces.toml).
    * **Deadline**: ``earliest + duration + max(2, ceil(U(0.5, 3) × duration))`` hours, clipped to
      the end of the UTC day (not clipped with ``clip_to_day=False``; the random draws are the
      same, so the two workloads differ only in the day boundary).
    * **Residency**: a share ``residency_share`` (15 %) of jobs may run only at the sites of the
      residency group nearest (lowest latency) to their tenant area that has their GPU type.
    * **Tenant and home site**: a user area drawn by ``demand_weight``; ``allowed_sites`` lists
      every permitted site with the GPU type, nearest to the tenant first (its *home* site, where
      the carbon-agnostic baseline runs it; :func:`home_first_sites`).
    * **Inference**: mean total GPUs = (batch GPU-hours of the day / 24) × (Σ LS GPU-equivalents /
      Σ non-LS GPU-equivalents over the Alibaba pods, ``num_gpu × gpu_milli / 1000``), split over
      areas by ``demand_weight`` and shaped by :func:`diurnal_factor` in each area's local time;
      ``gpu_type`` and ``slo_ms`` from ``[inference]``.
    * **Payload**: the traces record no commands, so every job runs the demo job
      (:func:`demo_job_command`: works in steps until its piece ends, checkpoints and resumes),
      as a ``command``; replace it with your own (``template``, ``script``) to run real work.

    Parameters
    ----------
    data_dir
        Folder holding ``job-traces/`` (``$CARBONSCHED_SHARED_DATA``).
    day
        The UTC day (``date`` or ``YYYY-MM-DD``); the horizon is its 24 hourly slots.
    catalog
        Catalog whose GPU types, areas and residency groups the jobs use.
    seed
        Random seed; same inputs, same workload.
    scale
        Multiplier on the day's job count (> 0). [-]
    clip_to_day
        Keep every job inside the UTC day (the day-bounded plan's workload); ``False`` keeps
        each job's arrival hour and unclipped deadline, for the rolling horizon.

    Returns
    -------
    Workload

    Raises
    ------
    WorkloadError
        Missing trace files or columns, ``scale <= 0``, or a catalog without the trace's types.
    """
    if not scale > 0:
        raise WorkloadError(f"scale must be > 0, got {scale}")
    params = load_parameters()
    pj = params["jobs"]
    data_dir = Path(data_dir)
    day0 = day_start_utc(day)
    rng = np.random.default_rng(seed)

    gaia = _read_trace(data_dir / GAIA_FILE, ("arrival_time", "length"))
    trace_day = (day0.day_of_year - 1) % 365
    in_day = ((gaia["arrival_time"] >= 24 * trace_day)
              & (gaia["arrival_time"] < 24 * (trace_day + 1)))
    sel = gaia[in_day]
    sel = sel.sort_values("arrival_time", kind="stable").reset_index(drop=True)
    n_day = len(sel)
    n_target = int(round(scale * n_day))
    reps, rest = divmod(n_target, n_day) if n_day else (0, 0)
    picks = list(np.tile(np.arange(n_day), reps))
    if rest:
        picks.extend(sorted(rng.choice(n_day, size=rest, replace=False).tolist()))
    picks.sort(key=lambda i: (sel.loc[i, "arrival_time"], i))

    pods = _read_trace(data_dir / POD_FILE, ("num_gpu", "gpu_milli", "qos"))
    pods = pods[pods["num_gpu"] >= 1]
    work_qos = list(pj["batch_qos"]) + list(pj["training_qos"])
    pool = pods[pods["qos"].isin(work_qos)].reset_index(drop=True)
    gang_all = np.maximum(1, np.ceil(pool["num_gpu"] * pool["gpu_milli"] / 1000.0)).astype(int)
    training = pool["qos"].isin(pj["training_qos"]).to_numpy()

    mix = trace_gpu_mix(data_dir, catalog)
    areas = list(catalog.areas.values())
    weights = np.array([a.demand_weight for a in areas], dtype=float)
    weights = weights / weights.sum()

    jobs = []
    for n, i in enumerate(picks):
        arrival = float(sel.loc[i, "arrival_time"])
        length = float(sel.loc[i, "length"])
        duration = min(max(1, math.ceil(length)), int(pj["max_duration_hours"]))
        arrival_h = int(math.floor(arrival)) - 24 * trace_day
        start_h = min(arrival_h, 24 - duration) if clip_to_day else arrival_h
        k = int(rng.integers(len(pool)))
        gpu_type = str(rng.choice(mix.index.to_numpy(), p=mix.to_numpy()))
        area = areas[int(rng.choice(len(areas), p=weights))]
        allowed: tuple[str, ...] = ()
        if rng.random() < pj["residency_share"]:
            allowed = _residency_sites(catalog, area, gpu_type)
        gang = max(1, min(int(gang_all[k]), _max_pool(catalog, gpu_type, allowed)))
        allowed = home_first_sites(catalog, area, gpu_type, allowed)
        end_h = _deadline_hour(rng, start_h, duration, clip_to_day)
        jobs.append(Job(
            id=f"{day0:%Y%m%d}-{n:04d}", tenant=area.id, gpu_type=gpu_type, gpus=gang,
            duration_hours=duration, power_per_gpu_kw=it_power_per_gpu_kw(gpu_type, catalog),
            earliest_start=day0 + start_h * HOUR, deadline=day0 + end_h * HOUR,
            allowed_sites=allowed, kind=WorkKind.TRAINING if training[k] else WorkKind.BATCH,
            payload=JobPayload(command=demo_job_command())))

    geq = pods["num_gpu"] * pods["gpu_milli"] / 1000.0
    ls = geq[pods["qos"].isin(params["inference"]["ls_qos"])].sum()
    other = geq[~pods["qos"].isin(params["inference"]["ls_qos"])].sum()
    ratio = float(ls / other) if other > 0 else 0.0
    gpu_hours = sum(j.gpus * j.duration_hours for j in jobs)
    inf_type = _inference_type(catalog)
    inference = _inference_day(catalog, day0, gpu_hours / 24.0 * ratio, inf_type,
                               it_power_per_gpu_kw(inf_type, catalog))
    return Workload(jobs=jobs, inference=inference)


def fleet_load(workload: Workload, catalog: Catalog) -> dict[str, float]:
    """Share of each GPU type's GPU-hours over the day that the workload asks for. [-]

    ``(Σ job gpus × duration + Σ inference gpus) / (GPUs of the type × 24)`` per type; a
    sizing check (``docs/workload.md``), not a schedule.
    """
    demand: dict[str, float] = {}
    for j in workload.jobs:
        demand[j.gpu_type] = demand.get(j.gpu_type, 0.0) + j.gpus * j.duration_hours
    for d in workload.inference:
        demand[d.gpu_type] = demand.get(d.gpu_type, 0.0) + d.gpus
    out = {}
    for t, gh in sorted(demand.items()):
        cap = sum(s.gpu_count(t) for s in catalog.sites) * 24
        out[t] = gh / cap if cap else math.inf
    return out
