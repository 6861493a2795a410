"""The plan's notes by kind: one classifier for the terminal and the web page.

The plan document keeps every note; these functions only group them for display.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NoteKind:
    """One line of the plan's notes on screen: a kind, how many notes it holds, their text."""

    kind: str
    count: int
    text: str


def note_line(k: NoteKind) -> str:
    """One kind's line: ``"<kind> (<count> note[s]): <text>"``.

    Every line says its count, one note too, so the lines add up to the footer's count of
    the notes above it.
    """
    return f"{k.kind} ({k.count} note{'' if k.count == 1 else 's'}): {k.text}"


NOTE_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern)) for kind, pattern in (
        ("site left out", r"^site \S+ left out: "),
        ("solver", r"^solver|MIP gap|time limit|greedy"),
        ("workload", r"^workload: "),
        ("modelled signals", r"MODELLED, not measured"),
        ("grid-model calibration", r"fossil must-run floor|implied thermal intensity"),
        ("signal quality", r"quality degraded|observation is .* old|provider's estimate|"
                           r"quarantined|implausible|flat line|gap of|have no value"),
        ("missing data", r"hour\(s\) without|in any of the .* hour\(s\) loaded|^no .* file|"
                         r": no .* file|NaN"),
        ("forecast fallback", r"PUE: |model choice|seasonal naive|persistence|fallback"),
    ))
"""Kinds of plan notes on screen, the first pattern that matches a note's text decides; a note
no pattern matches is of kind ``other``. Display only: the plan document keeps every note."""


def note_kind(note: str) -> str:
    """The kind of one plan note: the first of :data:`NOTE_KINDS` whose pattern matches.

    Parameters
    ----------
    note : str
        One of the plan document's ``notes``.

    Returns
    -------
    str
        A kind of :data:`NOTE_KINDS`, or ``"other"``.
    """
    return next((k for k, rx in NOTE_KINDS if rx.search(note)), "other")


def group_notes(notes: list[str], site_ids: list[str]) -> list[dict[str, Any]]:
    """The plan's notes grouped by :func:`note_kind`, in order of each kind's first note.

    Parameters
    ----------
    notes : list of str
        The plan's notes, in order.
    site_ids : list of str
        The plan's site ids: a note ``"<site>: ..."`` names its site in its group.

    Returns
    -------
    list of dict
        ``{"kind", "notes", "sites"}`` per kind; every note appears in exactly one group,
        ``sites`` lists the plan's sites the group's notes are about, in order.
    """
    known = set(site_ids)
    groups: dict[str, dict[str, Any]] = {}
    for n in notes:
        kind = note_kind(n)
        g = groups.setdefault(kind, {"kind": kind, "notes": [], "sites": []})
        g["notes"].append(n)
        site = n.partition(": ")[0]
        if site in known and site not in g["sites"]:
            g["sites"].append(site)
    return list(groups.values())


def notes_by_kind(notes: list[str], site_ids: list[str]) -> list[NoteKind]:
    """The plan's notes for the screen: one line per kind, with how many notes it holds.

    Each kind's notes are first condensed by :func:`grouped_site_notes` (a text several sites
    share named once, numbers that differ shown as their range); a kind's line joins what is
    left with ``" · "``. Kinds are listed in the order of their first note.

    Parameters
    ----------
    notes : list of str
        The plan's notes, in order.
    site_ids : list of str
        The plan's site ids.

    Returns
    -------
    list of NoteKind
        At most one per kind of :data:`NOTE_KINDS` (and ``other``).
    """
    return [NoteKind(g["kind"], len(g["notes"]),
                     " · ".join(grouped_site_notes(g["notes"], site_ids)))
            for g in group_notes(notes, site_ids)]


def grouped_site_notes(notes: list[str], site_ids: list[str]) -> list[str]:
    """The plan's notes for the screen: a text several sites share named once, a site once.

    Three passes over notes ``"<site>: <text>"`` of the plan's sites. First, a text other
    sites' notes repeat word for word (e.g. eight modelled Chinese sites without a price) is
    shown once, at its first place, as ``"sites a, b: <text>"`` (``"all 8 sites: <text>"``,
    ``"7 of 8 sites (all but c): <text>"`` when shorter); one site's note repeated word for
    word (one per modelled year) is shown once too. Then texts equal but for their numbers
    (each modelled site's calibration, and one site's per year) are merged the same way, a
    number that differs shown as its range over the group (``"0.08–0.66"``), so the worst
    value stays on screen. Last, what is left of one site's notes is joined at the first of
    them, ``"<site>: <text>; <text>"``, so a line names a site once. Every other note is kept
    as it is, in order; the plan document keeps them all.

    Parameters
    ----------
    notes : list of str
        The plan's notes, in order.
    site_ids : list of str
        The plan's site ids; only these prefixes are grouped.

    Returns
    -------
    list of str
        At most ``len(notes)`` notes.
    """
    known = set(site_ids)

    def group(items: list[str], key) -> list[str]:
        by_key: dict[str, list[tuple[str, str]]] = {}
        for n in items:
            site, sep, text = n.partition(": ")
            if sep and site in known:
                by_key.setdefault(key(text), []).append((site, text))
        shown: list[str] = []
        done: set[str] = set()
        for n in items:
            site, sep, text = n.partition(": ")
            k = key(text) if sep and site in known else None
            members = by_key.get(k, []) if k is not None else []
            sites = list(dict.fromkeys(m[0] for m in members))
            if len(members) < 2:
                shown.append(n)
            elif k not in done:
                done.add(k)
                label = sites[0] if len(sites) == 1 else _sites_label(sites, site_ids)
                shown.append(f"{label}: {_merged(m[1] for m in members)}")
        return shown

    def by_site(items: list[str]) -> list[str]:
        texts: dict[str, list[str]] = {}
        for n in items:
            site, sep, text = n.partition(": ")
            if sep and site in known:
                texts.setdefault(site, []).append(text)
        shown: list[str] = []
        for n in items:
            site, sep, _ = n.partition(": ")
            if not (sep and site in known):
                shown.append(n)
            elif site in texts:
                shown.append(f"{site}: {'; '.join(texts.pop(site))}")
        return shown

    # the same text first; then the same text but for its numbers: the key is the text
    # between the numbers, so a number never matches a literal character
    return by_site(group(group(notes, lambda t: (t,)),
                         lambda t: tuple(_NUMBER.split(t)[::2])))


def _sites_label(sites: list[str], site_ids: list[str]) -> str:
    """``"all 8 sites"``, ``"7 of 8 sites (all but c)"`` or ``"sites a, b"``, the shortest."""
    every, named = list(dict.fromkeys(site_ids)), set(sites)
    missing = [x for x in every if x not in named]
    n = len(every)
    if not missing and n >= 4:
        return f"all {n} sites"
    if len(sites) >= 4 and 2 * len(missing) < len(sites):
        return f"{len(sites)} of {n} sites (all but {', '.join(missing)})"
    return f"sites {', '.join(sites)}"


def _merged(texts) -> str:
    """Texts equal but for their numbers, as one: a number that differs becomes its range."""
    texts = list(texts)
    if len(set(texts)) == 1:
        return texts[0]
    pieces = [_NUMBER.split(t) for t in texts]     # text, number, text, ..., text
    out = []
    for i, piece in enumerate(pieces[0]):
        if i % 2 == 0:
            out.append(piece)
            continue
        values = [p[i] for p in pieces]
        lo = min(values, key=_number)
        hi = max(values, key=_number)
        out.append(lo if _number(lo) == _number(hi) else f"{lo}–{hi}")
    return "".join(out)


def _number(text: str) -> float:
    return float(text.replace(",", ""))


_NUMBER = re.compile(r"(?<![\w.:/-])([-+]?\d+(?:,\d{3})*(?:\.\d+)?)(?!\w|[.,:/-]\d)")
"""A number standing alone in a note (not part of a word such as ``CO2`` or ``s05``, nor of a
date or a dotted version such as ``2023-07-15`` or ``1.2.3``)."""


