"""A browser-like client for the pages: a cookie jar, its own client address, and helpers to fill forms."""

from __future__ import annotations

import html as html_lib
import itertools
import random
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import REQUIRE_SERVICES
from tests.harness import RunningServer

PASSWORD = "correct horse battery staple"
# A random start: limits counted in Redis outlive a test run, and the next run must not inherit them.
_addresses = itertools.count(random.randrange(1, 1 << 23))
_CSRF = re.compile(r'name="_csrf" value="([^"]*)"')


def new_address() -> str:
    """A client address of its own, so one test's failed logins never count against another's."""
    n = next(_addresses)
    return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"


def new_email() -> str:
    return f"{uuid.uuid4().hex[:12]}@example.test"


@dataclass
class Browser:
    """One browser: cookies persist across requests; uvicorn takes the address from X-Forwarded-For."""

    server: RunningServer
    address: str = field(default_factory=new_address)
    http: httpx.Client = field(init=False)
    email: str | None = None
    user_id: str | None = None

    def __post_init__(self) -> None:
        self.http = httpx.Client(
            base_url=self.server.base_url,
            headers={"X-Forwarded-For": self.address, "Accept": "text/html"},
            follow_redirects=False,
            timeout=30,
        )

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.http.get(path, **kwargs)

    def post(self, path: str, data: dict[str, str] | None = None, **kwargs: Any) -> httpx.Response:
        return self.http.post(path, data=data, **kwargs)

    def csrf(self, path: str = "/dashboard") -> str:
        """The token the page at ``path`` embeds in its forms."""
        response = self.get(path)
        assert response.status_code == 200, response.text
        match = _CSRF.search(response.text)
        assert match, f"no CSRF token on {path}"
        return match.group(1)

    def submit(self, page: str, action: str, **fields: str) -> httpx.Response:
        """Load ``page`` and post ``fields`` with its CSRF token to ``action``, as a browser would."""
        return self.post(action, {"_csrf": self.csrf(page), **fields})

    def signup(self, email: str | None = None, password: str = PASSWORD) -> Browser:
        self.email = email or new_email()
        response = self.submit("/signup", "/signup", email=self.email, password=password)
        assert response.status_code == 303 and response.headers["location"] == "/dashboard", response.text
        self.user_id = re.search(r"user id <code>([^<]+)</code>", self.get("/dashboard").text).group(1)  # type: ignore[union-attr]
        return self

    def create_key(self, name: str = "laptop", scope: str = "write") -> str:
        """Create a key on the dashboard and read it off the page the form redirects to."""
        return new_key_of(self.follow(self.submit("/dashboard", "/dashboard/keys", name=name, scope=scope)))

    def follow(self, response: httpx.Response) -> httpx.Response:
        """The page a 303 leads to, as a browser loads it after a form."""
        assert response.status_code == 303, response.text
        return self.get(response.headers["location"])

    def api(self, key: str) -> httpx.Client:
        return httpx.Client(base_url=self.server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30)

    def close(self) -> None:
        self.http.close()


@pytest.fixture
def browser(api: RunningServer) -> Iterator[Callable[[], Browser]]:
    """Makes fresh browsers against the shared server; closes them after the test."""
    made: list[Browser] = []

    def make() -> Browser:
        made.append(Browser(api))
        return made[-1]

    yield make
    for b in made:
        b.close()


def new_key_of(page: httpx.Response) -> str:
    """The new API key the dashboard shows once."""
    assert page.status_code == 200, page.text
    match = re.search(r'id="cmd-new-key" class="command">(egk_[A-Za-z0-9]+)<', page.text)
    assert match, page.text
    return match.group(1)


def field_error(html: str, name: str) -> str | None:
    """The error shown next to the form field ``name``, if any."""
    match = (
        re.search(rf'<input id="f-{name}"[^>]*>\s*<p class="error" id="e-{name}" role="alert">([^<]*)</p>', html)
        or re.search(rf'<select id="f-{name}".*?</select>\s*<p class="error" role="alert">([^<]*)</p>', html, re.S)
        or re.search(
            rf'<textarea id="f-{name}"[^>]*>[^<]*</textarea>\s*<p class="error" id="e-{name}" role="alert">([^<]*)</p>',
            html,
        )
    )
    return html_lib.unescape(match.group(1)) if match else None


def form_error(html: str) -> str | None:
    match = re.search(r'<p class="error banner" role="alert">([^<]*)</p>', html)
    return html_lib.unescape(match.group(1)) if match else None


@pytest.fixture(scope="session")
def https_api(
    pg_database_url: str, redis_url: str, embedder: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """A second server as deployed: an https public URL (so Secure cookies) and Redis (so a shared limiter)."""
    from tests.conftest import _settings
    from tests.harness import serve

    settings = _settings(
        tmp_path_factory.mktemp("https-api"),
        pg_database_url,
        public_base_url="https://engram.example.test",
        redis_url=redis_url,
    )
    with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
        yield server


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1366, "height": 900}


def _unavailable(reason: str) -> None:
    if REQUIRE_SERVICES:
        pytest.fail(f"{reason} and ENGRAM_REQUIRE_SERVICES=1 demands it", pytrace=False)
    pytest.skip(f"{reason} (run scripts/ensure-browser; ENGRAM_REQUIRE_SERVICES=1 fails instead)")


@pytest.fixture
def chromium() -> Any:
    """Debian's Chromium driven by Playwright (scripts/ensure-browser installs it)."""
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        _unavailable(f"Chromium is not installed at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
