"""Entry point of the ``carbonsched`` console script.

Bad ``plan`` options are refused here, before Typer and the planner are imported (a second, not
ten); valid command lines go on to :func:`carbonsched.cli.app.main`, imported only then.
"""

from __future__ import annotations

import sys

from carbonsched.cli.check import precheck


def main() -> None:
    """Run the ``carbonsched`` command: exit 2 with one ``error:`` line on a bad ``plan`` option."""
    msg = precheck(sys.argv[1:])
    if msg is not None:
        sys.stderr.write(f"error: {msg}\n")
        sys.exit(2)
    from carbonsched.cli.app import main as cli_main  # deferred: keeps the refusal fast

    cli_main()
