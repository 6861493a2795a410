"""Prometheus metrics of the service (prometheus-client), one registry per service instance.

Names follow the Prometheus conventions (https://prometheus.io/docs/practices/naming/): base
units in the name (``_seconds``), ``_total`` on counters.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
"""Request-latency histogram buckets. [s]"""

SOLVER_BUCKETS_S = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600)
"""Solver-time histogram buckets. [s]"""


class ServiceMetrics:
    """The service's metrics in their own :class:`CollectorRegistry`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.plan_runs = Counter("carbonsched_plan_runs_total",
                                 "Runs of the plan -> dispatch pipeline by outcome.",
                                 ["trigger", "status"], registry=r)
        self.solver_seconds = Histogram("carbonsched_solver_seconds",
                                        "Wall time of the planner's solve. [s]",
                                        buckets=SOLVER_BUCKETS_S, registry=r)
        self.solver_status = Counter("carbonsched_solver_status_total",
                                     "Planner outcomes by solver status.", ["status"],
                                     registry=r)
        self.dispatch_outcomes = Counter("carbonsched_dispatch_outcomes_total",
                                         "Dispatch steps by outcome (not_configured, ok, "
                                         "failed).", ["outcome"], registry=r)
        self.request_seconds = Histogram("carbonsched_http_request_duration_seconds",
                                         "HTTP request latency by route template. [s]",
                                         ["method", "route", "status"],
                                         buckets=LATENCY_BUCKETS_S, registry=r)
        self.placements = Counter("carbonsched_placement_queries_total",
                                  "Placement queries by outcome.", ["outcome"], registry=r)
        self.sdk_forecasts = Counter("carbonsched_sdk_forecasts_total",
                                     "Forecasts answered by /emissions/forecasts/current by "
                                     "origin (issued_now, plan, plan_fallback).", ["origin"],
                                     registry=r)
        self.cron_leader = Gauge("carbonsched_cron_leader",
                                 "1 when this replica runs the cron.", registry=r)
