"""``python -m carbonsched.cli``: the ``carbonsched`` command."""

from carbonsched.cli.entry import main

main()
