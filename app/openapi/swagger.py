"""``/docs``: Swagger UI from files shipped in the package (swagger-ui-bundle-v2), so it works offline, and
``/docs/openapi.json``, the document as app.openapi.document finishes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litestar import Litestar, Request, Router, get
from litestar.openapi.plugins import JsonRenderPlugin, OpenAPIRenderPlugin
from litestar.response import Redirect
from litestar.static_files import create_static_files_router
from litestar.status_codes import HTTP_308_PERMANENT_REDIRECT
from swagger_ui_bundle import swagger_ui_path

from app.openapi.document import finalize
from app.web.pages import PAGE_HEADERS

HERE = Path(__file__).resolve().parent
ASSETS = "/assets"
_STATE_KEY = "engram_openapi_document"

_PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>{title} API</title>
  <link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
  <link rel="stylesheet" href="{docs}{assets}/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui" data-url="{docs}/openapi.json"></div>
  <script src="{docs}{assets}/swagger-ui-bundle.js"></script>
  <script src="{docs}{assets}/swagger-init.js"></script>
</body>
</html>
"""


def served_document(app: Litestar, litestar_document: dict[str, Any]) -> dict[str, Any]:
    """The finished document, built once per app (routes do not change after start-up)."""
    document: dict[str, Any] | None = app.state.get(_STATE_KEY)
    if document is None:
        document = finalize(litestar_document, app)
        app.state[_STATE_KEY] = document
    return document


class OfflineSwagger(OpenAPIRenderPlugin):
    """Swagger UI at ``/docs`` (and ``/docs/swagger``) with its assets under ``/docs/assets``."""

    def __init__(self, docs_path: str = "/docs") -> None:
        super().__init__(path=["/", "/swagger"])
        self.docs_path = docs_path.rstrip("/")

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        title = str(openapi_schema.get("info", {}).get("title", "API"))
        return _PAGE.format(title=title, docs=self.docs_path, assets=ASSETS).encode()

    def receive_router(self, router: Router) -> None:
        # Our starter script first, then Swagger UI's own files; nothing else of the package is served.
        router.register(
            create_static_files_router(
                path=ASSETS, directories=[HERE / "static", Path(str(swagger_ui_path))], include_in_schema=False
            )
        )


class FinishedJson(JsonRenderPlugin):
    """``/docs/openapi.json``: the finished document rather than Litestar's own."""

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        return self.render_json(request, served_document(request.app, openapi_schema))


def render_plugins() -> list[OpenAPIRenderPlugin]:
    return [OfflineSwagger(), FinishedJson()]


@get("/openapi.json", include_in_schema=False, sync_to_thread=False)
def openapi_alias() -> Redirect:
    """Where many tools and people look for an API's document first; it lives under ``/docs``."""
    return Redirect("/docs/openapi.json", status_code=HTTP_308_PERMANENT_REDIRECT)


def docs_router(path: str = "/docs") -> Router:
    """The router Litestar fills with the docs' routes: every answer under ``/docs`` (the page, its assets, the
    document, a 404) carries the headers every page does. Swagger UI runs under that policy as is: its script is a
    file, and it styles through the DOM, which ``style-src 'self'`` allows."""
    # The docs hold nothing private, and Swagger UI's 1.5 MB of assets are worth caching: no Cache-Control of pages.
    headers = {name: value for name, value in PAGE_HEADERS.items() if name != "Cache-Control"}
    return Router(path, route_handlers=[], include_in_schema=False, response_headers=headers)
