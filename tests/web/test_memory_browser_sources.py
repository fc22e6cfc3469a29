"""The dashboard's memory browser shows an indexed chunk's source, listing and searching."""

from __future__ import annotations

import re
from collections.abc import Callable

from tests.web.conftest import Browser


def test_document_chunks_show_their_source(browser: Callable[[], Browser]) -> None:
    me = browser().signup()
    with me.api(me.create_key()) as api:
        body = {"path": "docs/<ops>.md", "content": "# Ops\n\n## Backups\n\nBackups run nightly at 02:00 to S3.\n"}
        assert api.put("/v1/sessions/site/documents", json=body).status_code == 200
        assert api.post("/v1/memories", json={"content": "A note of mine", "session": "site"}).status_code == 201

    for params in ({"session": "site"}, {"q": "when do backups run?", "session": "site"}):
        html = me.get("/dashboard/memories", params=params).text
        # Escaped like everything else the user wrote.
        assert re.findall(r'class="source">from <code>([^<]+)</code>', html) == [
            "docs/&lt;ops&gt;.md &gt; Ops &gt; Backups"
        ]
