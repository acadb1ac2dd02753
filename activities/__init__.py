"""Temporal activities of statekeeper: side effects live here, never in workflows."""
