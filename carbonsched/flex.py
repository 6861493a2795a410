"""Grid flexibility in the kernel: a grid event (a demand-response call on one site).

A grid operator (or a flexible-load agreement) asks a site to give power back for a window:
``GridEvent(site, start, end, target_kw or target_fraction, notice)``. The target is either an
absolute IT-power reduction in kW or a fraction of the site's baseline power in the window (the
baseline method is the agreement's; :mod:`carbonsched.dispatch.grid` uses the plan's peak IT
power of the work dispatched to the site in the window). The reference demonstration of such a
call on AI compute held a 25 % cut in cluster power for 3 h on 256 GPUs (Colangelo et al.,
"AI Data Centers as Grid-Interactive Assets", arXiv:2507.00909, 2025).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from carbonsched.errors import InputError, TimeAxisError
from carbonsched.limits import check_identifier


@dataclass(frozen=True)
class GridEvent:
    """One grid event: reduce ``site``'s power in ``[start, end)`` by a target.

    Attributes
    ----------
    site
        Catalog site id.
    start, end
        The event window (tz-aware; the end is exclusive).
    target_kw
        IT power to shed during the window. [kW] Exactly one of ``target_kw`` and
        ``target_fraction`` is given.
    target_fraction
        Share of the site's baseline power to shed, in ``(0, 1]``. [-]
    notice
        How long before ``start`` the event was announced. [timedelta]

    Raises
    ------
    TimeAxisError
        A naive ``start`` or ``end``, or ``end`` not after ``start``.
    InputError
        Neither or both targets, a target out of range, a negative notice, or a site id outside
        the identifier grammar.
    """

    site: str
    start: datetime
    end: datetime
    target_kw: float | None = None
    target_fraction: float | None = None
    notice: timedelta = timedelta(0)

    def __post_init__(self) -> None:
        check_identifier(self.site, "site id")
        for name in ("start", "end"):
            ts = getattr(self, name)
            if ts.tzinfo is None or ts.utcoffset() is None:
                raise TimeAxisError(f"grid event at {self.site}: {name} {ts.isoformat()} is "
                                    "naive; give a time zone, e.g. 2026-07-01T17:00:00Z")
        if self.end <= self.start:
            raise TimeAxisError(f"grid event at {self.site}: end {self.end.isoformat()} is "
                                f"not after start {self.start.isoformat()}; give a later end")
        if (self.target_kw is None) == (self.target_fraction is None):
            raise InputError(f"grid event at {self.site}: give exactly one target, target_kw "
                             "(kW to shed) or target_fraction (share of the baseline, 0-1)")
        if self.target_kw is not None and not self.target_kw > 0:
            raise InputError(f"grid event at {self.site}: target_kw must be > 0 kW, got "
                             f"{self.target_kw:g}")
        if self.target_fraction is not None and not 0 < self.target_fraction <= 1:
            raise InputError(f"grid event at {self.site}: target_fraction must be in (0, 1] "
                             f"(0.25 sheds a quarter of the baseline), got "
                             f"{self.target_fraction:g}")
        if self.notice < timedelta(0):
            raise InputError(f"grid event at {self.site}: notice must be >= 0, got "
                             f"{self.notice}")

    def target_reduction_kw(self, baseline_kw: float) -> float:
        """The reduction the event asks for, given the site's baseline power. [kW]

        Parameters
        ----------
        baseline_kw
            The site's baseline IT power in the window. [kW]
        """
        if self.target_kw is not None:
            return float(self.target_kw)
        assert self.target_fraction is not None
        return float(self.target_fraction) * max(0.0, baseline_kw)
