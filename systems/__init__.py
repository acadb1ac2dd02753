"""Simulated external systems that statekeeper talks to.

Each subpackage stands in for a system a real deployment would reach over the
network (here: ``retail``, the τ-bench retail system of record). They are
self-contained: nothing in ``systems/`` imports from ``workflows/`` or
``activities/`` (``tests/test_systems_boundary.py`` checks it); the dependency only
runs the other way.
"""
