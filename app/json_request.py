"""The request class of every route: Litestar's, with the body failures its decoder lets through made 400s.

Apart from ``app.json_body`` (the body models), so that the schemas the command line reads load no web framework."""

from __future__ import annotations

from typing import Any

from litestar import Request

from app.errors import MalformedBody


class JsonRequest(Request[Any, Any, Any]):
    """Litestar's request, with the body failures its decoder lets through turned into a 400 that says which.

    msgspec reports bad JSON itself (a 400 from Litestar), but invalid UTF-8 raises ``UnicodeDecodeError`` and deep
    nesting ``RecursionError``, which would otherwise surface as 500s."""

    async def json(self) -> Any:
        try:
            return await super().json()
        except UnicodeDecodeError as exc:
            raise MalformedBody(f"the body is not valid UTF-8 (byte {exc.start}); JSON must be UTF-8") from exc
        except RecursionError as exc:
            raise MalformedBody("the JSON body is nested too deeply") from exc
