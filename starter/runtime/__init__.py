"""What every statekeeper process shares at run time: the worker (``worker``), the Temporal
connection and its payload codec, the codec server, preflight checks, logging, telemetry,
the workflow sandbox runner and process exit."""
