"""``RetentionWorkflow`` (``workflow``): one retention purge, started by a Temporal Schedule."""
