"""Where a webhook may be sent: the guard against server-side request forgery (SSRF).

A webhook URL is chosen by a tenant's operator and fetched by our workers, from inside our
network. So a URL is refused when it is not ``http``/``https``, is longer than 2 KB, carries
credentials, or when its host resolves to an address the public internet cannot reach
(``address_problem``): loopback (127.0.0.0/8, ::1), link-local (169.254.0.0/16 — cloud metadata
services live there — and fe80::/10), private (10/8, 172.16/12, 192.168/16, fc00::/7, and the
shared 100.64/10), reserved, multicast or unspecified (0.0.0.0, ::). Two settings open part of
it (``Allowance``): ``STATEKEEPER_WEBHOOK_ALLOW_LOOPBACK`` (``statekeeper dev`` sets it: a
receiver on the same machine) and ``STATEKEEPER_WEBHOOK_ALLOW_PRIVATE`` (receivers on the
same private network). Link-local, multicast, reserved and unspecified addresses are never
allowed. Every address a name resolves to must pass (a name with one public and one private
address is refused), and an IPv4 address mapped into IPv6 (``::ffff:10.0.0.1``) is judged as
the IPv4 address it is.

The check runs when a webhook is created and again before every attempt (``resolve``: a
name's addresses can change, DNS rebinding), and the attempt then connects to the very
address that was checked (``activities.webhooks.delivery``), so no second lookup can answer
differently. The rules come from ``ipaddress`` (the IANA special-purpose registries).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import NamedTuple, Optional, Union
from urllib.parse import urlsplit

from pydantic import BaseModel

from activities.store.webhooks import MAX_URL

IpAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
RESOLVE_SECONDS = 5.0
"""The longest a name's lookup may take before the URL is refused as unresolvable."""
SHARED = ipaddress.ip_network("100.64.0.0/10")
"""Carrier-grade NAT space (RFC 6598): not global, and not ``is_private`` in ``ipaddress``."""


class Allowance(BaseModel):
    """Which non-public addresses a webhook may reach (``Settings.webhook_allow_loopback``,
    ``Settings.webhook_allow_private``)."""

    loopback: bool = False
    private: bool = False


class Refused(ValueError):
    """A webhook URL that may not be used; the message says why, for the caller."""


class Resolved(NamedTuple):
    """A checked URL: its scheme, host (as written), port and the address to connect to."""

    scheme: str
    host: str
    port: int
    address: IpAddress


def address_problem(address: IpAddress, allow: Allowance) -> Optional[str]:
    """Why ``address`` may not receive a webhook (None: it may)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return None if allow.loopback else "a loopback address"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private or (isinstance(address, ipaddress.IPv4Address) and address in SHARED):
        # ipaddress counts some reserved ranges as private too (192.0.0.0/24, 198.18.0.0/15,
        # 240.0.0.0/4): the reserved ones stay refused
        if address.is_reserved:
            return "a reserved address"
        return None if allow.private else "a private address"
    if address.is_reserved or not address.is_global:
        return "a reserved address"
    return None


def check_shape(url: str) -> tuple[str, str, int]:
    """The scheme, host and port of ``url`` if its form may be a webhook's: ``http`` or
    ``https``, a host, no user or password, at most ``MAX_URL`` characters, no whitespace or
    control characters. Raises ``Refused``."""
    if len(url) > MAX_URL:
        raise Refused(f"a webhook URL is at most {MAX_URL} characters (this one has {len(url)})")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise Refused("a webhook URL may not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise Refused("the webhook URL is not a valid URL") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise Refused("a webhook URL must start with http:// or https://")
    if not parts.hostname:
        raise Refused("the webhook URL names no host")
    if parts.username is not None or parts.password is not None:
        raise Refused("a webhook URL may not carry a user name or password")
    scheme = parts.scheme.lower()
    return scheme, parts.hostname, port or (443 if scheme == "https" else 80)


async def resolve(url: str, allow: Allowance) -> Resolved:
    """Check ``url`` (``check_shape``) and the addresses its host resolves to now; returns
    the first address to connect to. Raises ``Refused`` when the URL's form is refused, its
    host does not resolve (within ``RESOLVE_SECONDS``), or any of its addresses is refused."""
    scheme, host, port = check_shape(url)
    try:
        literal: Optional[IpAddress] = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), RESOLVE_SECONDS)
        except (OSError, asyncio.TimeoutError, UnicodeError):
            raise Refused(f"the webhook URL's host {host!r} does not resolve") from None
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos))
        if not addresses:
            raise Refused(f"the webhook URL's host {host!r} does not resolve")
    for address in addresses:
        problem = address_problem(address, allow)
        if problem is not None:
            hint = {"a loopback address": " (STATEKEEPER_WEBHOOK_ALLOW_LOOPBACK allows it)",
                    "a private address": " (STATEKEEPER_WEBHOOK_ALLOW_PRIVATE allows it)"}.get(problem, "")
            raise Refused(f"the webhook URL's host resolves to {problem}, which webhooks may not reach{hint}")
    return Resolved(scheme, host, port, addresses[0])
