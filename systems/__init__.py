"""Simulated external systems: stand-ins for the outside services statekeeper talks to.

Each subpackage stands in for a system a real deployment would reach over the network
(``retail``: the τ-bench retail system of record; ``model``: the offline stand-in for
the Messages API). Each lives behind its own boundary (a wire format, its own database
tables) and imports nothing from ``workflows/`` or ``activities/``: what it needs to know
about statekeeper it holds itself, as a documented contract (tests check that copies
agree; the import contracts of ``pyproject.toml`` check the imports).
"""
