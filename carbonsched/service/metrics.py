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
                                         "Dispatch steps by outcome (ok, incomplete, "
                                         "rejected, nothing_submitted, not_configured, failed, "
                                         "interrupted).", ["outcome"], registry=r)
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
        self.sdk_missing_hours = Counter(
            "carbonsched_sdk_missing_hours_answers_total",
            "Observed-data answers of the Carbon Aware SDK routes (/emissions/bylocations, "
            "bylocation, bylocations/best) lacking hours of the asked range begun by now "
            "(named in their X-Carbonsched-Missing header).", registry=r)
        self.cron_leader = Gauge("carbonsched_cron_leader",
                                 "1 when this replica holds the leader's lease (it runs the "
                                 "cron and the dispatch loops).", registry=r)
        # the dispatch loops (carbonsched.service.loops)
        self.outbox_backlog = Gauge("carbonsched_outbox_backlog",
                                    "Outbox intents written and not yet on their backend "
                                    "(state Pending), as last observed. [-]", registry=r)
        self.outbox_oldest_pending_age = Gauge(
            "carbonsched_outbox_oldest_pending_age_seconds",
            "Age of the oldest pending outbox intent by the service's clock (0: none). [s]",
            registry=r)
        self.outbox_observed = Gauge("carbonsched_outbox_observed_timestamp_seconds",
                                     "When the two outbox gauges were last read from the store "
                                     "(Unix time; 0: never). [s]", registry=r)
        self.reconcile_last_success = Gauge(
            "carbonsched_reconcile_last_success_timestamp_seconds",
            "When this replica last finished a reconcile pass of the outbox (Unix time; 0: "
            "never). [s]", registry=r)
        self.loop_runs = Counter("carbonsched_dispatch_loop_runs_total",
                                 "Passes of the dispatch loops by loop (reconcile, release, "
                                 "refresh, lease, prune) and outcome (ok, "
                                 "store_unavailable, failed).", ["loop", "outcome"], registry=r)
        self.grid_actions = Counter(
            "carbonsched_grid_event_actions_total",
            "Grid-event actions taken on a backend by action (pause, hold, resume, release), "
            "backend kind (slurm, kubernetes, none) and outcome (done, already, settled; a "
            "skipped action: absent, wrong_state, unsupported, else skipped); backend errors "
            "are not counted here (the action is retried).",
            ["action", "backend", "outcome"], registry=r)
        self.released = Counter("carbonsched_released_total",
                                "Held jobs released at their planned start.", registry=r)
        self.plan_refresh_failing = Gauge(
            "carbonsched_plan_refresh_failing",
            "1 while the newest plan cannot be loaded and answers come from the last plan "
            "loaded (named in /readyz and in each placement's detail); 0 otherwise.",
            registry=r)
        self.loop_sites_unavailable = Gauge(
            "carbonsched_dispatch_loop_sites_unavailable",
            "Sites whose backend adapter could not be built for the dispatch loops (named in "
            "the log and in /readyz). [-]", registry=r)
