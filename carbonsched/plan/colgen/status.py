"""The status of column generation's plan, and the plan note it builds up."""

from __future__ import annotations

from carbonsched.plan.result import PlanStatus, SolverRecord, join_clauses


def plan_status(name: str, gap: float | None, mip_gap: float, converged: bool,
                rep_proven: bool) -> PlanStatus:
    """Status of column generation's plan from the candidate that won and the proof.

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
    converged
        Whether column generation converged (the bound is the LP's or better).
    rep_proven
        Whether the last repair MIP finished its own proof.

    Returns
    -------
    PlanStatus
        ``optimal`` when the gap is within ``mip_gap``, the LP converged and the repair
        proved (or the gap is 0); ``heuristic`` for an unproven greedy plan; else
        ``feasible``.
    """
    proven = gap is not None and gap <= mip_gap + 1e-9
    if (name == "greedy" or name.startswith("greedy + ")) and not proven:
        return PlanStatus.HEURISTIC
    if proven and converged and (rep_proven or gap == 0.0):
        return PlanStatus.OPTIMAL
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
