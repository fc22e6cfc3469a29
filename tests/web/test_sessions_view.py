"""The sessions view: agents, claims and changes, live over a cookie-authenticated SSE stream."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from queue import Empty, Queue

import httpx

from tests.web.conftest import Browser, field_error


def test_the_session_page_shows_agents_claims_and_changes(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    with me.api(me.create_key()) as api:
        claim = {"agent": "claude", "file_paths": ["src/app.py"]}
        assert api.post("/v1/sessions/web/claims", json=claim).status_code == 200
        change = {"agent": "cursor", "file_paths": ["README.md"], "changes_summary": "Documented the setup"}
        assert api.post("/v1/sessions/web/changes", json=change).status_code == 200
    page = me.get("/dashboard/sessions/web")
    assert page.status_code == 200
    assert "<code>src/app.py</code> · write by <code>claude</code>" in page.text
    assert "<strong>cursor</strong>: Documented the setup" in page.text
    assert "<code>dashboard</code>" not in page.text  # watching does not join the session
    # Another user's session of the same name is empty.
    assert "src/app.py" not in browser().signup().get("/dashboard/sessions/web").text


def test_opening_a_session_by_name_validates_it(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    response = me.get("/dashboard/sessions", params={"session": "web"})
    assert response.status_code == 303 and response.headers["location"] == "/dashboard/sessions/web"
    response = me.get("/dashboard/sessions", params={"session": "no/slashes"})
    assert response.status_code == 400 and field_error(response.text, "session")
    assert me.get("/dashboard/sessions/a__b").status_code == 404


def test_the_event_stream_pushes_claims_to_the_logged_in_user(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    key = me.create_key()
    events: Queue[tuple[str, dict[str, object]]] = Queue()

    with me.http.stream("GET", "/dashboard/sessions/live/events", timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")

        def listen() -> None:
            kind = None
            with contextlib.suppress(httpx.HTTPError):
                for line in response.iter_lines():
                    if line.startswith("event: "):
                        kind = line[7:]
                    elif line.startswith("data: ") and kind:
                        events.put((kind, json.loads(line[6:])))

        threading.Thread(target=listen, daemon=True).start()
        assert events.get(timeout=30)[0] == "ready"
        with me.api(key) as api:
            claim = {"agent": "claude", "file_paths": ["a.py"]}
            assert api.post("/v1/sessions/live/claims", json=claim).status_code == 200
        try:
            kind, payload = events.get(timeout=30)
        except Empty:
            raise AssertionError("no claim event arrived") from None
    assert kind == "claim" and payload["agent"] == "claude"
    panel = me.get("/dashboard/sessions/live/panel")
    assert panel.status_code == 200 and "<code>a.py</code>" in panel.text and "<html" not in panel.text


def test_the_event_stream_needs_a_login(browser: Callable[[], Browser]) -> None:
    response = browser().get("/dashboard/sessions/live/events")
    assert response.status_code == 303 and response.headers["location"].startswith("/login?next=")
