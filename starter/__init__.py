"""Thin clients of statekeeper: the Python client, the CLI, the τ-bench runner."""
