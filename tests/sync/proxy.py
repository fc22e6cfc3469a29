"""A reverse proxy with a body limit in front of an edge, as nginx is with ``client_max_body_size`` (1 MiB by default).

nginx is not on this machine; this stands in for it, and only for what matters here: a request whose body is over
the limit gets nginx's 413 page (HTML, not the edge's JSON error) without reaching the edge; every other request is
passed on and its answer passed back, or nginx's 502 page when the edge does not answer.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import httpx

NGINX_413 = (
    b"<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n"
    b"<center><h1>413 Request Entity Too Large</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)
NGINX_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)
# Not passed on either way: they describe one connection, or a body httpx has already decoded.
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host"}


class CappingProxy:
    """Listens on 127.0.0.1; ``upstream`` is set once the server behind it is up (it must know the proxy's URL)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.upstream = ""
        self.refused: list[int] = []  # the sizes of the bodies it turned away
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:
                pass

            def _page(self, status: int, page: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(page)
                self.close_connection = True

            def _forward(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                if size > proxy.limit:
                    proxy.refused.append(size)
                    self._page(413, NGINX_413)
                    return
                body = self.rfile.read(size) if size else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                try:
                    with httpx.Client(timeout=120) as http:
                        answer = http.request(self.command, proxy.upstream + self.path, content=body, headers=headers)
                except httpx.TransportError:  # the server behind is down: nginx's 502 page
                    self._page(502, NGINX_502)
                    return
                self.send_response(answer.status_code)
                for key, value in answer.headers.multi_items():
                    if key.lower() not in _HOP:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> CappingProxy:
        self._thread.start()
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
