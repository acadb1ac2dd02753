"""``python -m starter.cli``: the ``statekeeper`` command line."""

from starter.cli.app import main

main()
