"""Every exception the retail system of record raises on purpose.

Business refusals are not exceptions: a tool answers ``"Error: ..."`` and that text is
its result. These are the caller's mistakes (an unknown tool or store, a reused
idempotency key); infrastructure failures surface as SQLAlchemy/driver exceptions.
"""

from __future__ import annotations


class UnknownToolError(KeyError):
    """The name is not a tool of the retail system (``args[0]`` is the name)."""


class UnknownStoreError(KeyError):
    """The store has not been seeded (or was dropped) (``args[0]`` is the store)."""


class IdempotencyKeyConflict(ValueError):
    """The key was already used for a different tool or different arguments (or, for a
    customer-scoped write, a different scope)."""


class InvalidData(ValueError):
    """A write's arguments hold data the system never stores (a control character such as
    NUL in a text field): refused before anything is written, on every database alike."""
