"""``statekeeper link``: the Temporal Web UI list of the runs of a customer or an order.

The list is filtered by search attributes: ``CustomerId`` holds the customer's keyed
pseudonym (``workflows.domain.pseudonym``), so a real customer id is mapped with the deployment's
key first; ``OrderIds`` is a keyword list, and ``OrderIds = "#W…"`` matches every run that
touched that order (conversations and their refunds).
"""

from __future__ import annotations

import re
from typing import Optional
from urllib.parse import quote

import typer

from settings import Settings
from starter.cli.refusals import command_settings, given_id
from workflows.options import CUSTOMER_ID, ORDER_IDS
from workflows.domain.pseudonym import customer_pseudonym

SAFE_VALUE = re.compile(r"[^\"'\\\x00-\x1f\x7f-\x9f]{1,100}")
"""Values we put in a list query: at most 100 characters, no quotes, backslashes or
control characters (the query language has no escaping we rely on)."""
BARE_ORDER = re.compile(r"W[0-9]+", re.ASCII)


class LinkError(ValueError):
    """A value that cannot go into a Web UI list query, or no pseudonym key to map a customer with."""


def list_query(customer_pseudonym_value: Optional[str] = None, order_id: Optional[str] = None) -> str:
    """The visibility query ``CustomerId = "…" AND OrderIds = "…"`` (either part optional).
    Raises ``LinkError`` when neither is given or a value is unsafe."""
    parts = []
    for key, value in ((CUSTOMER_ID, customer_pseudonym_value), (ORDER_IDS, order_id)):
        if value is None:
            continue
        if not SAFE_VALUE.fullmatch(value):
            raise LinkError(f"{key.name} value must be 1-100 characters without quotes, backslashes or "
                            "control characters")
        parts.append(f'{key.name}="{value}"')
    if not parts:
        raise LinkError("give --customer ID or --order ID (or both)")
    return " AND ".join(parts)


def list_url(ui_base: str, namespace: str, query: str) -> str:
    """``<ui_base>/namespaces/<namespace>/workflows?query=<query, URL-encoded>``."""
    return f"{ui_base.rstrip('/')}/namespaces/{quote(namespace, safe='')}/workflows?query={quote(query, safe='')}"


def pseudonym_key(settings: Settings) -> str:
    """The deployment's pseudonym key: ``STATEKEEPER_PSEUDONYM_KEY``, else the data directory's
    key file. Unlike ``Settings.pseudonym_secret`` this never makes a new key: a fresh random
    key would map to pseudonyms no run carries. Raises ``LinkError`` when there is none."""
    if settings.pseudonym_key is None and not (settings.data_dir / "pseudonym.key").exists():
        raise LinkError(f"no pseudonym key in {settings.data_dir.resolve()} (made by the first worker); run this "
                        "where `statekeeper dev` runs, or set STATEKEEPER_DATA_DIR or STATEKEEPER_PSEUDONYM_KEY")
    return settings.pseudonym_secret()


def link(
    customer: Optional[str] = typer.Option(None, "--customer", help="Real customer id, e.g. raj_sanchez_2970."),
    order: Optional[str] = typer.Option(None, "--order", help="Order id, e.g. '#W4566809' (W4566809 works too)."),
    ui: Optional[str] = typer.Option(None, "--ui", help="Web UI base URL (default: the embedded one)."),
) -> None:
    """Print the Web UI link listing the conversations and refunds of a customer or an order."""
    if customer is not None:  # an empty id (an unset shell variable) linked the pseudonym of ""
        given_id(customer, "customer id")
    settings = command_settings()  # from any directory: the detached dev's data and key; a bad setting is one line
    try:
        if order is not None and BARE_ORDER.fullmatch(order):
            order = f"#{order}"
        pseudonym = customer_pseudonym(customer, pseudonym_key(settings)) if customer is not None else None
        query = list_query(pseudonym, order)
    except LinkError as err:
        typer.echo(f"statekeeper: {err}", err=True)
        raise typer.Exit(2)
    print(list_url(ui or f"http://127.0.0.1:{settings.ui_port}", settings.temporal_namespace, query))
