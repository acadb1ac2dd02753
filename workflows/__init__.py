"""Deterministic workflow code: state, actions, policy, prompt rendering, workflows."""
