"""The ``statekeeper`` command line (typer): one module per command group, ``app`` assembling
them (``starter.cli.app:main`` is the console script)."""
