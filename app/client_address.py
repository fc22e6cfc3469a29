"""Who the client is, behind a proxy: trusted only from the proxies we name, never from anyone else.

Per-address limits (sign-ups, logins, token failures) are only as good as the address. Behind a proxy every request
comes from the proxy, so the proxy's word is needed; from anyone else the same headers are a lie to ignore. With the
peer in ``ENGRAM_TRUSTED_PROXIES``: the client is ``ENGRAM_CLIENT_IP_HEADER`` when that is set and present (Fly's
``Fly-Client-IP``, which its proxy sets itself), else the right-most ``X-Forwarded-For`` entry that is not itself a
trusted proxy. This replaces uvicorn's own handling, so there is one rule whatever runs the app.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI reads settings, which check networks here, without loading litestar
    from litestar.types import ASGIApp, Receive, Scope, Send

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(spec: str | Iterable[str]) -> list[Network]:
    """``"127.0.0.1, 172.16.0.0/16, ::1"`` as networks; a bad entry raises ValueError naming it."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    networks: list[Network] = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError as exc:
            raise ValueError(f"ENGRAM_TRUSTED_PROXIES: {item!r} is not an IP address or network") from exc
    return networks


def _address(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    value = value.strip()
    if value.startswith("[") and "]" in value:  # [v6]:port
        value = value[1 : value.index("]")]
    elif value.count(":") == 1:  # v4:port
        value = value.split(":", 1)[0]
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


class TrustedProxies:
    """ASGI middleware rewriting ``scope["client"]`` (and the scheme) from a trusted proxy's headers."""

    def __init__(self, app: ASGIApp, trusted: list[Network], client_ip_header: str | None = None) -> None:
        self.app = app
        self.trusted = trusted
        self.client_ip_header = client_ip_header.lower().encode() if client_ip_header else None

    def _is_trusted(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
        return address is not None and any(address in network for network in self.trusted)

    def client_of(self, peer: str, headers: Iterable[tuple[bytes, bytes]]) -> str | None:
        """The client a trusted peer names, or None (keep the peer)."""
        if not self._is_trusted(_address(peer)):
            return None
        values: dict[bytes, list[str]] = {}
        for name, value in headers:
            values.setdefault(name.lower(), []).append(value.decode("latin-1"))
        if self.client_ip_header and self.client_ip_header in values:
            named = _address(values[self.client_ip_header][-1])
            if named is not None:
                return str(named)
        hops = [hop for value in values.get(b"x-forwarded-for", []) for hop in value.split(",")]
        for hop in reversed(hops):
            address = _address(hop)
            if address is None:
                return None  # a garbled list: believe none of it
            if not self._is_trusted(address):
                return str(address)
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        peer = scope.get("client") if scope["type"] in ("http", "websocket") else None
        if peer:
            client = self.client_of(peer[0], scope["headers"])
            if client is not None:
                changed: dict[str, Any] = {"client": (client, 0)}
                for name, value in scope["headers"]:
                    if name.lower() == b"x-forwarded-proto" and value.decode("latin-1").strip() in ("http", "https"):
                        changed["scheme"] = value.decode("latin-1").strip()
                scope = {**scope, **changed}  # type: ignore[assignment]
        await self.app(scope, receive, send)
