"""Which rows a tool needs: the declarations behind ``@read_tool(loads=...)`` and
``@write_tool(locks=..., loads=...)``.

A tool is a pure function over ``data`` (``{"orders", "products", "users"}`` dicts).
The backend does not hand it the whole database, only the rows its declaration
selects, so the declaration must cover every row the function could look at: the
function then answers exactly as it would over the full data. A declaration is a
:class:`RowSet`, an ordered sequence of :class:`Step` s; each step selects rows of one
:class:`Section` from the tool's arguments and from the rows earlier steps loaded.

Pure data: nothing here touches a database (:mod:`systems.retail.loading` runs the
steps). Steps are immutable and compare by value.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Mapping


class Section(str, Enum):
    """A part of the retail data; its value is the key of ``data`` and the JSON file name."""

    ORDERS = "orders"
    PRODUCTS = "products"
    USERS = "users"


Loaded = Mapping[Section, Mapping[str, dict[str, Any]]]
"""The documents loaded so far, per section, by key (``order_id``/``product_id``/``user_id``)."""


@dataclass(frozen=True)
class Selection:
    """Rows of ``section`` to load: those whose key is in ``keys`` (``None``: any key)
    and whose lookup ``columns`` equal the given values (``(column, value)`` pairs; the
    columns are the lower-cased or derived columns of :mod:`systems.retail.schema`,
    e.g. ``email_lc``). ``Selection(section)`` is every row of the section."""

    section: Section
    keys: frozenset[str] | None = None
    columns: tuple[tuple[str, str], ...] = ()


class Step:
    """One selection of rows. Subclasses are frozen dataclasses with a ``section``."""

    section: Section

    @property
    def arguments(self) -> tuple[str, ...]:
        """Tool argument names the step reads (checked against the function's parameters)."""
        return ()

    def select(self, kwargs: Mapping[str, Any], loaded: Loaded) -> Selection:
        """The rows to load for a call with ``kwargs``, given the rows loaded before."""
        raise NotImplementedError


@dataclass(frozen=True)
class Everything(Step):
    """Every row of ``section`` (e.g. all products, for tools that scan them)."""

    section: Section

    def select(self, kwargs: Mapping[str, Any], loaded: Loaded) -> Selection:
        """Every row of the section."""
        return Selection(self.section)


@dataclass(frozen=True)
class ById(Step):
    """The row whose key equals the string argument ``arg``; none if the argument is
    missing, empty or not a string (the tool then reports it as not found, or fails on
    the argument exactly as it would over the full data)."""

    section: Section
    arg: str

    @property
    def arguments(self) -> tuple[str, ...]:
        """``(arg,)``."""
        return (self.arg,)

    def select(self, kwargs: Mapping[str, Any], loaded: Loaded) -> Selection:
        """The row keyed by the argument's value (none for a non-string or empty value)."""
        value = kwargs.get(self.arg)
        return Selection(self.section, keys=frozenset([value] if isinstance(value, str) and value else []))


@dataclass(frozen=True)
class Lookup(Step):
    """Rows whose lower-cased lookup columns equal the lower-cased string arguments:
    ``pairs`` are ``(argument, column)``, e.g. ``("email", "email_lc")``. If any of those
    arguments is not a string, every row of the section: the tool's own comparison
    then fails on it as it would over the full data."""

    section: Section
    pairs: tuple[tuple[str, str], ...]

    @property
    def arguments(self) -> tuple[str, ...]:
        """The arguments of ``pairs``, in order."""
        return tuple(arg for arg, _ in self.pairs)

    def select(self, kwargs: Mapping[str, Any], loaded: Loaded) -> Selection:
        """Rows matching every lower-cased argument (all rows if one is not a string)."""
        values = [kwargs.get(arg) for arg, _ in self.pairs]
        if not all(isinstance(value, str) for value in values):
            return Selection(self.section)
        columns = tuple((column, value.lower()) for (_, column), value in zip(self.pairs, values))
        return Selection(self.section, columns=columns)


@dataclass(frozen=True)
class Referenced(Step):
    """Rows of ``section`` whose keys the already loaded ``source`` documents name in
    ``field``, or, with ``each``, in ``field`` of every element of their list ``each``
    (``Referenced(PRODUCTS, ORDERS, "product_id", each="items")``: the products of the
    order's items). Nothing if no ``source`` document was loaded."""

    section: Section
    source: Section
    field: str
    each: str | None = None

    def select(self, kwargs: Mapping[str, Any], loaded: Loaded) -> Selection:
        """The rows the loaded ``source`` documents name (ignores ``kwargs``)."""
        keys: set[str] = set()
        for doc in loaded.get(self.source, {}).values():
            elements = doc[self.each] if self.each is not None else [doc]
            keys.update(element[self.field] for element in elements)
        return Selection(self.section, keys=frozenset(keys))


@dataclass(frozen=True)
class RowSet:
    """An ordered sequence of steps; ``a + b`` runs ``a``'s steps, then ``b``'s. For
    locks the order is the lock order (see :class:`Rows`)."""

    steps: tuple[Step, ...] = ()

    def __add__(self, other: RowSet) -> RowSet:
        if not isinstance(other, RowSet):
            return NotImplemented
        return RowSet(self.steps + other.steps)

    @property
    def sections(self) -> frozenset[Section]:
        """The sections any step loads."""
        return frozenset(step.section for step in self.steps)

    @property
    def arguments(self) -> frozenset[str]:
        """Every tool argument the steps read."""
        return frozenset(arg for step in self.steps for arg in step.arguments)


def rows(*steps: Step) -> RowSet:
    """A :class:`RowSet` of ``steps``, in order."""
    return RowSet(tuple(steps))


class Rows:
    """The named declarations the retail tools use; combine them with ``+``.

    Lock order: every write locks an order before its owner (``ORDER_AND_OWNER``), and a
    write that locks a user without an order locks only that user, so concurrent writes
    cannot deadlock. Products are never locked: no tool changes them.
    """

    NOTHING = RowSet()
    """No rows (``calculate``, ``think``, ``transfer_to_human_agents``)."""
    USER = rows(ById(Section.USERS, "user_id"))
    """The user named by the ``user_id`` argument."""
    USERS_BY_EMAIL = rows(Lookup(Section.USERS, (("email", "email_lc"),)))
    """Users whose email equals the ``email`` argument, case-insensitively."""
    USERS_BY_NAME = rows(Lookup(Section.USERS, (("first_name", "first_lc"), ("last_name", "last_lc"))))
    """Users whose first and last names equal the arguments, case-insensitively."""
    ORDER = rows(ById(Section.ORDERS, "order_id"))
    """The order named by the ``order_id`` argument."""
    ORDER_AND_OWNER = ORDER + rows(Referenced(Section.USERS, Section.ORDERS, "user_id"))
    """The order named by ``order_id``, then the user it belongs to."""
    ORDER_PRODUCTS = rows(Referenced(Section.PRODUCTS, Section.ORDERS, "product_id", each="items"))
    """The products of the loaded order's items (with all their variants)."""
    PRODUCT = rows(ById(Section.PRODUCTS, "product_id"))
    """The product named by the ``product_id`` argument."""
    ALL_PRODUCTS = rows(Everything(Section.PRODUCTS))
    """Every product with all its variants (for tools that scan the catalogue)."""

    @staticmethod
    def by_id(section: Section, arg: str) -> RowSet:
        """The row of ``section`` whose key is the string argument ``arg``."""
        return rows(ById(section, arg))

    @staticmethod
    def everything(section: Section) -> RowSet:
        """Every row of ``section``."""
        return rows(Everything(section))
