"""What the simulated external services (``systems.payments``, ``systems.email``,
``systems.ticketing``) share: their database, per-call fault injection, the caller's
deadline, and running them as real HTTP servers. Imports nothing of statekeeper's own code."""
