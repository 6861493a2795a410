"""Mutation testing of one source file against a set of tests (documented, no dependency).

Usage (from the repository root, in the project's virtualenv)::

    python scripts/mutate.py carbonsched/timeaxis.py tests/test_timeaxis.py \
        tests/trust/test_guards.py
    python scripts/mutate.py forecasts/base.py tests/trust/test_guards.py

Each mutant is one small change to the file's syntax tree, made the way mutation tools do it
(mutmut's and cosmic-ray's operator families):

* comparison operators swapped (``<`` / ``<=``, ``>`` / ``>=``, ``==`` / ``!=``, ``in`` /
  ``not in``, ``is`` / ``is not``);
* ``and`` / ``or`` swapped; ``not x`` replaced by ``x``; ``True`` / ``False`` swapped;
* arithmetic ``+`` / ``-``, ``*`` / ``/`` swapped; integer constants ``n`` -> ``n + 1``;
* a ``raise`` statement replaced by ``pass`` (a check switched off);
* a ``return value`` replaced by ``return None``;
* a call to ``tz_convert``, ``sort_index``, ``copy``, ``floor``, ``dropna``, ``fillna`` or
  ``rename`` dropped (the receiver is used unchanged: "skip the conversion to UTC");
* ``x.reindex(idx)`` replaced by ``x.iloc[:len(idx)].set_axis(idx)`` (alignment by position
  instead of by timestamp).

Run it in a throw-away copy of the checkout (``scripts/mutate-copy.sh`` builds one and runs both
files), never in a work tree you are editing: the target file is rewritten in place while it runs
(restored at the end, on an error and on SIGTERM).

Docstrings and string constants are never mutated. For every mutant the file is rewritten from
the mutated tree (``ast.unparse``), the tests run in a fresh ``python -m pytest -x -q -n 0``
process, and the mutant is *killed* if they fail (or time out) and *survives* if they pass; the
original file is restored after each run and at exit. The score is ``killed / total``; the
surviving mutants are printed with their line and change so a test can be written for each.
"""

from __future__ import annotations

import argparse
import ast
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

CMP_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
            ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
            ast.Is: ast.IsNot, ast.IsNot: ast.Is}
BIN_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}
DROP_CALLS = {"tz_convert", "sort_index", "copy", "floor", "dropna", "fillna", "rename"}


@dataclass(frozen=True)
class Mutant:
    """One change: the node's position in ``ast.walk`` order, its line and a description."""

    index: int
    line: int
    what: str


def _docstring_ids(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _mutations(node: ast.AST, skip: set[int]) -> list[str]:
    """Names of the mutations applicable to ``node`` (one mutant each)."""
    out: list[str] = []
    if isinstance(node, ast.Compare):
        out += [f"cmp{i}" for i, op in enumerate(node.ops) if type(op) in CMP_SWAP]
    elif isinstance(node, ast.BoolOp):
        out.append("boolop")
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        out.append("drop_not")
    elif isinstance(node, ast.BinOp) and type(node.op) in BIN_SWAP:
        out.append("binop")
    elif isinstance(node, ast.Constant) and id(node) not in skip:
        if isinstance(node.value, bool):
            out.append("bool")
        elif isinstance(node.value, int):
            out.append("int+1")
    elif isinstance(node, ast.Raise):
        out.append("raise->pass")
    elif isinstance(node, ast.Return) and node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None):
        out.append("return->None")
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in DROP_CALLS:
            out.append("drop_call")
        if node.func.attr == "reindex" and len(node.args) == 1 and not node.keywords:
            out.append("reindex->position")
    return out


def _apply(node: ast.AST, what: str) -> ast.AST | None:
    """Mutate ``node`` in place, or return a replacement node."""
    if what.startswith("cmp"):
        i = int(what[3:])
        assert isinstance(node, ast.Compare)
        node.ops[i] = CMP_SWAP[type(node.ops[i])]()
    elif what == "boolop":
        assert isinstance(node, ast.BoolOp)
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif what == "drop_not":
        assert isinstance(node, ast.UnaryOp)
        return node.operand
    elif what == "binop":
        assert isinstance(node, ast.BinOp)
        node.op = BIN_SWAP[type(node.op)]()
    elif what == "bool":
        assert isinstance(node, ast.Constant)
        node.value = not node.value
    elif what == "int+1":
        assert isinstance(node, ast.Constant)
        node.value = node.value + 1
    elif what == "raise->pass":
        return ast.Pass()
    elif what == "return->None":
        assert isinstance(node, ast.Return)
        node.value = ast.Constant(None)
    elif what == "drop_call":
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        return node.func.value
    elif what == "reindex->position":
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        idx = node.args[0]
        head = ast.Subscript(
            value=ast.Attribute(value=node.func.value, attr="iloc", ctx=ast.Load()),
            slice=ast.Slice(upper=ast.Call(func=ast.Name("len", ast.Load()), args=[idx],
                                           keywords=[])), ctx=ast.Load())
        return ast.Call(func=ast.Attribute(value=head, attr="set_axis", ctx=ast.Load()),
                        args=[idx], keywords=[])
    return None


def enumerate_mutants(source: str) -> list[Mutant]:
    """Every mutant of ``source`` (see the module docstring)."""
    tree = ast.parse(source)
    skip = _docstring_ids(tree)
    out: list[Mutant] = []
    for i, node in enumerate(ast.walk(tree)):
        for what in _mutations(node, skip):
            out.append(Mutant(i, getattr(node, "lineno", 0), f"{what}: "
                              f"{ast.unparse(node).splitlines()[0][:70]}"))
    return out


class _Replace(ast.NodeTransformer):
    def __init__(self, target: ast.AST, what: str) -> None:
        self.target, self.what = target, what

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if node is self.target:
            new = _apply(node, self.what)
            return new if new is not None else node
        return super().generic_visit(node)


def mutated_source(source: str, mutant: Mutant) -> str:
    """``source`` with ``mutant`` applied."""
    tree = ast.parse(source)
    node = list(ast.walk(tree))[mutant.index]
    what = mutant.what.split(":", 1)[0]
    tree = _Replace(node, what).visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree)


def main() -> int:
    """Run every mutant of ``target`` against ``tests``; print the score and the survivors."""
    ap = argparse.ArgumentParser(description="mutation testing of one file")
    ap.add_argument("target", type=Path)
    ap.add_argument("tests", nargs="+")
    ap.add_argument("--timeout", type=float, default=300.0, help="per mutant [s]")
    ap.add_argument("--only", type=int, nargs="*", help="mutant numbers to run")
    args = ap.parse_args()
    original = args.target.read_text(encoding="utf-8")
    mutants = enumerate_mutants(original)
    chosen = [m for k, m in enumerate(mutants) if not args.only or k in args.only]
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider",
           *args.tests]
    base = subprocess.run(cmd, capture_output=True, text=True)
    if base.returncode != 0:
        print(base.stdout[-3000:])
        print("the tests fail on the unmutated file: fix them first", file=sys.stderr)
        return 2
    killed, survived = 0, []
    t0 = time.perf_counter()

    def _restore(signum: int, _frame: object) -> None:
        args.target.write_text(original, encoding="utf-8")
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _restore)
    try:
        for k, m in enumerate(chosen):
            args.target.write_text(mutated_source(original, m), encoding="utf-8")
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                dead = r.returncode != 0
            except subprocess.TimeoutExpired:
                dead = True
            killed += dead
            if not dead:
                survived.append((k, m))
            print(f"[{k + 1}/{len(chosen)}] {'killed  ' if dead else 'SURVIVED'} "
                  f"line {m.line}: {m.what}", flush=True)
    finally:
        args.target.write_text(original, encoding="utf-8")
    total = len(chosen)
    print(f"\n{args.target}: {killed}/{total} mutants killed "
          f"({100.0 * killed / max(total, 1):.1f} %) in {time.perf_counter() - t0:.0f} s")
    for k, m in survived:
        print(f"  survived #{k} line {m.line}: {m.what}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
