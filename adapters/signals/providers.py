"""Which provider feeds which signal of which site: the providers file, credentials, clients.

The providers file (TOML, documented in ``regions/schema.md`` section *Providers file*) has a
``[providers.<name>]`` table per provider account and a ``[sites.<site id>]`` table per site that
maps each **signal group** to a provider (and optionally a zone other than the site's)::

    [providers.electricitymaps]
    kind = "electricitymaps"
    base_url = "https://api.electricitymap.org"
    emission_factor_type = "direct"

    [sites.gb-london]
    carbon_intensity = "electricitymaps"
    weather = "open-meteo"
    price = { provider = "entsoe", zone = "10YGB----------A" }

Signal groups and the frame columns they fill (:data:`GROUPS`): ``carbon_intensity``
(``carbon_intensity_g_per_kwh`` + the estimated flag), ``carbon_intensity_lca``, ``mix``
(``renewable_pct``, ``low_carbon_pct``), ``weather`` (``temperature_c``,
``relative_humidity_pct``, ``wind_speed_m_per_s``, ``cloud_cover_pct``, ``irradiance_w_per_m2``),
``price`` (``price_usd_per_mwh``).

Credentials come from the environment (:data:`CREDENTIAL_ENV`, or the names a provider table
gives in ``token_env``/``username_env``/``password_env``) or from a secrets file (TOML,
``[<provider name>] token = ...``) named by ``CARBONSCHED_SECRETS_FILE``; they are held in
:class:`Secret` objects whose ``repr`` and ``str`` hide the value, and never written to a plan,
the cache or a log.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carbonsched.adapters.http import (
    DEFAULT_CALL_DEADLINE_S,
    DEFAULT_RUN_DEADLINE_S,
    register_secret,
)
from carbonsched.errors import CatalogError, ProviderConfigError

KINDS: dict[str, tuple[str, ...]] = {
    "electricitymaps": ("carbon_intensity", "carbon_intensity_lca", "mix"),
    "watttime": ("carbon_intensity",),
    "entsoe": ("carbon_intensity", "mix", "price"),
    "eia": ("carbon_intensity", "carbon_intensity_lca", "mix"),
    "open-meteo": ("weather",),
    "http-feed": ("carbon_intensity", "carbon_intensity_lca", "mix", "weather", "price"),
}
"""Provider kind → the signal groups it can supply."""

GROUPS: dict[str, tuple[str, ...]] = {
    "carbon_intensity": ("carbon_intensity_g_per_kwh",),
    "carbon_intensity_lca": ("carbon_intensity_lca_g_per_kwh",),
    "mix": ("renewable_pct", "low_carbon_pct"),
    "weather": ("temperature_c", "relative_humidity_pct", "wind_speed_m_per_s",
                "cloud_cover_pct", "irradiance_w_per_m2"),
    "price": ("price_usd_per_mwh",),
}
"""Signal group → the frame columns it fills (the first one decides coverage)."""

DEFAULT_BASE_URLS: dict[str, str] = {
    "electricitymaps": "https://api.electricitymap.org",
    "watttime": "https://api.watttime.org",
    "entsoe": "https://web-api.tp.entsoe.eu/api",
    "eia": "https://api.eia.gov",
    "open-meteo": "https://api.open-meteo.com",
}
"""Documented production endpoints."""

CREDENTIAL_ENV: dict[str, dict[str, str]] = {
    "electricitymaps": {"token": "ELECTRICITYMAPS_TOKEN"},
    "watttime": {"username": "WATTTIME_USERNAME", "password": "WATTTIME_PASSWORD"},
    "entsoe": {"token": "ENTSOE_API_KEY"},
    "eia": {"token": "EIA_API_KEY"},
}
"""Default environment variables of each kind's credentials (open-meteo and feeds need none)."""

SECRETS_FILE_ENV = "CARBONSCHED_SECRETS_FILE"

EUR_TO_USD_2023 = 1.0813
"""ECB euro reference rate, 2023 annual average (USD per EUR), used to express ENTSO-E day-ahead
prices in USD/MWh unless the providers file sets ``eur_to_usd``. Source: ECB Statistical Data
Warehouse, EXR.A.USD.EUR.SP00.A (2023: 1.0813)."""


class Secret:
    """A credential whose value never appears in ``repr``/``str`` (nor in a log line)."""

    def __init__(self, value: str) -> None:
        self._value = value
        register_secret(value)  # redacted from every log line of the process

    def get(self) -> str:
        """The value, for the one place that sends it."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


@dataclass(frozen=True)
class ProviderSpec:
    """One ``[providers.<name>]`` table."""

    name: str
    kind: str
    base_url: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def timeout_s(self) -> float:
        """Read timeout. [s]"""
        return float(self.options.get("timeout_s", 20.0))

    @property
    def max_attempts(self) -> int:
        """Tries per idempotent call."""
        return int(self.options.get("max_attempts", 3))

    @property
    def deadline_s(self) -> float:
        """Total time of one call, retries and waits included. [s]

        Default :data:`carbonsched.adapters.http.DEFAULT_CALL_DEADLINE_S`.
        """
        return float(self.options.get("deadline_s", DEFAULT_CALL_DEADLINE_S))

    @property
    def run_deadline_s(self) -> float:
        """Total time of every call to this provider in one planning run. [s]

        Default :data:`carbonsched.adapters.http.DEFAULT_RUN_DEADLINE_S`.
        """
        return float(self.options.get("run_deadline_s", DEFAULT_RUN_DEADLINE_S))


@dataclass(frozen=True)
class Binding:
    """Signal group ``group`` of a site is fed by ``provider`` for ``zone``."""

    group: str
    provider: str
    zone: str | None = None


@dataclass(frozen=True)
class ProvidersConfig:
    """A parsed providers file."""

    providers: Mapping[str, ProviderSpec]
    sites: Mapping[str, Mapping[str, Binding]]
    eur_to_usd: float = EUR_TO_USD_2023
    path: str | None = None

    def site(self, site_id: str) -> Mapping[str, Binding]:
        """The bindings of ``site_id``.

        Raises
        ------
        CatalogError
            The site has no ``[sites.<id>]`` table (configured sites named).
        """
        try:
            return self.sites[site_id]
        except KeyError:
            raise CatalogError(
                f"site {site_id!r} has no [sites.{site_id}] table in the providers file "
                f"{self.path or ''}; configured sites: {', '.join(sorted(self.sites)) or 'none'}"
            ) from None

    def with_base_url(self, base_url: str) -> ProvidersConfig:
        """The same configuration with every provider pointed at ``base_url`` (a replay)."""
        provs = {n: ProviderSpec(p.name, p.kind, base_url.rstrip("/")
                                 + ("/api" if p.kind == "entsoe" else ""), p.options)
                 for n, p in self.providers.items()}
        return ProvidersConfig(provs, self.sites, self.eur_to_usd, self.path)


def _binding(site_id: str, group: str, value: Any, providers: Mapping[str, ProviderSpec],
             where: str) -> Binding:
    if isinstance(value, str):
        name, zone = value, None
    elif isinstance(value, dict) and "provider" in value:
        name, zone = value["provider"], value.get("zone")
    else:
        raise CatalogError(f"{where}: [sites.{site_id}] {group} must be a provider name or "
                           "{ provider = ..., zone = ... }")
    if name not in providers:
        raise CatalogError(f"{where}: [sites.{site_id}] {group} names provider {name!r}, which "
                           f"has no [providers.{name}] table; defined: "
                           f"{', '.join(sorted(providers)) or 'none'}")
    kind = providers[name].kind
    if group not in KINDS[kind]:
        raise CatalogError(f"{where}: [sites.{site_id}] {group}: a {kind} provider supplies "
                           f"only {', '.join(KINDS[kind])}")
    return Binding(group, name, None if zone is None else str(zone))


def parse_providers(doc: Mapping[str, Any], where: str = "providers file") -> ProvidersConfig:
    """Validate a providers document (the TOML's dict).

    Raises
    ------
    CatalogError
        Unknown kind, unknown group, a site naming an undefined provider or one that cannot
        supply the group; the message names the table.
    """
    providers: dict[str, ProviderSpec] = {}
    for name, table in (doc.get("providers") or {}).items():
        kind = table.get("kind", name)
        if kind not in KINDS:
            raise CatalogError(f"{where}: [providers.{name}] kind {kind!r} is not one of "
                               f"{', '.join(sorted(KINDS))}")
        base = table.get("base_url") or DEFAULT_BASE_URLS.get(kind)
        if not base:
            raise CatalogError(f"{where}: [providers.{name}] needs base_url")
        opts = {k: v for k, v in table.items() if k not in ("kind", "base_url")}
        for secret_key in ("token", "password", "api_key"):
            if secret_key in opts:
                raise CatalogError(
                    f"{where}: [providers.{name}] holds a {secret_key}; credentials belong in "
                    f"the environment or the secrets file (${SECRETS_FILE_ENV}), never in the "
                    "providers file")
        for key in ("timeout_s", "deadline_s", "run_deadline_s"):
            value = opts.get(key)
            if value is not None and (isinstance(value, bool) or
                                      not isinstance(value, int | float) or value <= 0):
                raise CatalogError(f"{where}: [providers.{name}] {key} = {value!r} must be a "
                                   "number of seconds > 0")
        providers[name] = ProviderSpec(name, kind, str(base).rstrip("/"), opts)
    sites: dict[str, dict[str, Binding]] = {}
    for site_id, table in (doc.get("sites") or {}).items():
        bindings = {}
        for group, value in table.items():
            if group not in GROUPS:
                raise CatalogError(f"{where}: [sites.{site_id}] unknown signal group {group!r}; "
                                   f"groups: {', '.join(GROUPS)}")
            bindings[group] = _binding(site_id, group, value, providers, where)
        if "carbon_intensity" not in bindings:
            raise CatalogError(f"{where}: [sites.{site_id}] needs a carbon_intensity provider")
        sites[site_id] = bindings
    cfg = ProvidersConfig(providers, sites, float(doc.get("eur_to_usd", EUR_TO_USD_2023)), where)
    check_plan_signal_kinds(cfg)
    return cfg


def load_providers(path: str | Path) -> ProvidersConfig:
    """Read and validate a providers TOML file.

    Raises
    ------
    CatalogError
        Missing or malformed file, or a schema error (see :func:`parse_providers`).
    """
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CatalogError(f"providers file {p} does not exist; see regions/schema.md, "
                           "section Providers file") from None
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"providers file {p}: not valid TOML ({exc})") from exc
    return parse_providers(doc, str(p))


def ci_kind(cfg: ProvidersConfig, binding: Binding) -> str:
    """``marginal`` or ``average``: what the carbon intensity of ``binding`` measures."""
    spec = cfg.providers[binding.provider]
    if spec.kind == "watttime" and spec.options.get("signal_type", "co2_moer") == "co2_moer":
        return "marginal"
    return "average"


def check_plan_signal_kinds(cfg: ProvidersConfig, site_ids: list[str] | None = None) -> str | None:
    """Refuse a configuration whose sites mix marginal and average carbon intensity.

    A marginal (WattTime ``co2_moer``) and an average signal measure different things and must
    never be ranked against each other in one plan.

    Returns
    -------
    str or None
        ``marginal`` or ``average`` (``None`` without sites).

    Raises
    ------
    ProviderConfigError
        Both kinds among the sites (one site of each named).
    """
    kinds: dict[str, str] = {}
    for sid, b in cfg.sites.items():
        if site_ids is not None and sid not in site_ids:
            continue
        kinds[sid] = ci_kind(cfg, b["carbon_intensity"])
    if len(set(kinds.values())) > 1:
        m = next(s for s, k in kinds.items() if k == "marginal")
        a = next(s for s, k in kinds.items() if k == "average")
        raise ProviderConfigError(
            cfg.sites[m]["carbon_intensity"].provider,
            f"site {m!r} is fed a MARGINAL carbon intensity (WattTime co2_moer) and site {a!r} "
            "an AVERAGE one: a plan never ranks the two against each other; feed every site "
            "of the plan the same kind (signal_type = \"co2_aoer\" for WattTime's average)")
    return next(iter(kinds.values()), None)


def _secrets_file() -> dict[str, Any]:
    path = os.environ.get(SECRETS_FILE_ENV)
    if not path:
        return {}
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProviderConfigError("secrets", f"${SECRETS_FILE_ENV} names {path}, which does "
                                  "not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProviderConfigError("secrets", f"secrets file {path} is not valid TOML "
                                  f"({exc})") from None


def credentials(spec: ProviderSpec, env: Mapping[str, str] | None = None) -> dict[str, Secret]:
    """The credentials of ``spec`` from the environment or the secrets file.

    Raises
    ------
    ProviderConfigError
        A required credential is in neither (the variable names to set are given).
    """
    env = os.environ if env is None else env
    needed = CREDENTIAL_ENV.get(spec.kind, {})
    secrets_doc = _secrets_file().get(spec.name, {}) if needed else {}
    out: dict[str, Secret] = {}
    for key, default_var in needed.items():
        var = str(spec.options.get(f"{key}_env", default_var))
        value = env.get(var) or secrets_doc.get(key)
        if not value:
            raise ProviderConfigError(
                spec.name, f"no {key}: set ${var} or [{spec.name}] {key} in the secrets file "
                f"named by ${SECRETS_FILE_ENV}")
        out[key] = Secret(str(value))
    return out
