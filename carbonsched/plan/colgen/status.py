"""The status of column generation's plan, and the plan note it builds up."""

from __future__ import annotations

from carbonsched.plan.gap import within_gap
from carbonsched.plan.result import PlanStatus, SolverRecord, join_clauses


def plan_status(name: str, gap: float | None, mip_gap: float) -> PlanStatus:
    """Status of column generation's plan from the candidate that won and the proof.

    Every bound column generation reports is a valid lower bound on the objective (a
    Lagrangian or LP value, a split bound, a repair MIP's dual bound over the whole model),
    whether or not its LP converged or its repair MIP finished: a gap within ``mip_gap`` is
    a proof, as a MIP solver's "optimal" within its relative gap (HiGHS ``mip_rel_gap``) is.

    Parameters
    ----------
    name
        The winning candidate's name: ``"greedy"``, or ``"greedy + <step>"`` for a step run
        on the plain greedy plan (the one-slot repack: an LP re-placed only its one-slot
        jobs), is a heuristic plan unless the gap is proven.
    gap
        Relative gap to the best proven bound (None: no bound). [-]
    mip_gap
        Requested relative gap. [-]

    Returns
    -------
    PlanStatus
        ``optimal`` when the gap is within ``mip_gap``; ``heuristic`` for an unproven greedy
        plan; else ``feasible`` (what a rolling run counts as stopped at its time limit).
    """
    if within_gap(gap, mip_gap):
        return PlanStatus.OPTIMAL
    if name == "greedy" or name.startswith("greedy + "):
        return PlanStatus.HEURISTIC
    return PlanStatus.FEASIBLE


def add_note(rec: SolverRecord, text: str) -> None:
    """Append ``text`` to the record's note, ``"; "``-separated.

    Parameters
    ----------
    rec
        The solver record.
    text
        One clause of the note.
    """
    rec.note = join_clauses(rec.note, text)
