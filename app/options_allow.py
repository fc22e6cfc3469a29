"""OPTIONS answers name every method of their path in ``Allow``.

Litestar makes a path's OPTIONS handler with the route first built for the path, and builds the route again as each
handler of another method joins it, keeping that OPTIONS handler: its ``Allow`` named only the first handler's
methods (``OPTIONS, POST`` for ``/v1/memories``, which takes GET too). The handler reads its route's methods when it
answers, so pointing it at the route that serves the path is the whole repair."""

from __future__ import annotations

from litestar import Litestar
from litestar.routes import HTTPRoute


def bind_options_to_their_routes(app: Litestar) -> None:
    for route in app.routes:
        if not isinstance(route, HTTPRoute) or "OPTIONS" not in route.route_handler_map:
            continue
        handler, _ = route.route_handler_map["OPTIONS"]
        for cell in handler.fn.__closure__ or ():
            if isinstance(cell.cell_contents, HTTPRoute):
                cell.cell_contents = route
