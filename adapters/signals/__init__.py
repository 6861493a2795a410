"""Signal ingest: one reader per provider or file format, and the site-signal registry.

Readers follow pvlib ``iotools``: ``read_<provider>(path) -> (data, meta)`` parses, renames
through one mapping table per provider, converts units at the edge and returns a tz-aware UTC
hourly frame (index ``ts``, each stamp the start of its hour) with units in column names.
:func:`load_site_signals` returns a site's signals on a window (contract: ``docs/signals.md``).
"""

from carbonsched.adapters.signals.eia930 import read_eia930
from carbonsched.adapters.signals.electricitymaps import read_electricitymaps
from carbonsched.adapters.signals.epw import read_epw
from carbonsched.adapters.signals.openmeteo import read_open_meteo
from carbonsched.adapters.signals.prices import read_prices
from carbonsched.adapters.signals.registry import (
    REGISTRY,
    SIGNAL_COLUMNS,
    SOURCES,
    SignalSource,
    build_registry,
    clear_cache,
    get_source,
    load_site_signals,
)

__all__ = [
    "REGISTRY",
    "SIGNAL_COLUMNS",
    "SOURCES",
    "SignalSource",
    "build_registry",
    "clear_cache",
    "get_source",
    "load_site_signals",
    "read_eia930",
    "read_electricitymaps",
    "read_epw",
    "read_open_meteo",
    "read_prices",
]
