"""The ``carbonsched`` command: one module per command group.

:mod:`carbonsched.cli.check` is the console-script entry point (a fast refusal of bad ``plan``
options before any heavy import); :mod:`carbonsched.cli.app` holds the Typer application and
registers the groups of the other modules.
"""
