"""Unit conversions and the glossary of names and units.

Names carry their unit (``energy_kwh``, ``it_power_kw``, ``carbon_intensity_g_per_kwh``);
conversions live here so that each one is written once.

Glossary
--------
carbon_intensity_g_per_kwh
    Grid carbon intensity [gCO2eq/kWh]. *Direct* (operational) unless named ``_lca``.
energy_kwh
    Energy [kWh]. IT energy is what the servers draw; facility energy is IT energy × PUE.
it_power_kw
    Power drawn by IT equipment [kW].
pue
    Power usage effectiveness, facility power / IT power [-], ISO/IEC 30134-2.
green_surplus_kw
    Renewable power that would otherwise be curtailed and that a site may absorb [kW].
emissions_kg
    Emissions [kg CO2eq] = facility energy [kWh] × carbon intensity [g/kWh] / 1000.
slot_hours
    Length of a planning slot [h]; 1 throughout.
latency_ms
    Round-trip network latency [ms].
"""

from __future__ import annotations

G_PER_KG = 1000.0


def emissions_kg(energy_kwh: float, carbon_intensity_g_per_kwh: float) -> float:
    """Emissions [kg CO2eq] of ``energy_kwh`` [kWh] at ``carbon_intensity_g_per_kwh`` [g/kWh].

    GHG Protocol Scope 2 Guidance (2015), location-based method: activity data × emission factor.
    """
    return energy_kwh * carbon_intensity_g_per_kwh / G_PER_KG
