"""Simulated external systems: stand-ins for the outside services statekeeper talks to.

Each lives behind its own boundary (a wire format, its own database tables) and
imports nothing from ``workflows/`` or ``activities/``: what it needs to know about
statekeeper it holds itself, as a documented contract (tests check that copies agree).
"""
