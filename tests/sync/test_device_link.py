"""`engram sync link EDGE_URL --user ID` as a person does it: the command shows a URL and a code, a real browser
(Chromium through Playwright) logs in on the edge and approves, the command prints the link, and the link works."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from tests.harness import RunningServer
from tests.sync.processes import ENGRAM, Deployment
from tests.web.conftest import LAPTOP, PASSWORD, chromium, new_email  # noqa: F401 (the chromium fixture)

PROMPT = re.compile(r"open (\S+) and enter the code (\S+)")


def test_a_person_links_a_machine_by_approving_its_code_in_a_browser(
    chromium: Any,  # noqa: F811
    api: RunningServer,
    tmp_path: Path,
) -> None:
    node = Deployment(tmp_path / "node")
    node.setup()
    local_user, _ = node.user()
    linking = subprocess.Popen(
        [ENGRAM, "sync", "link", api.base_url, "--user", local_user, "--name", "Ada's laptop"],
        env=node.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert linking.stderr is not None
        prompt = linking.stderr.readline()
        match = PROMPT.search(prompt)
        assert match, prompt
        verification_uri, user_code = match.groups()
        assert verification_uri == f"{api.base_url}/device"

        context = chromium.new_context(viewport=LAPTOP, base_url=api.base_url)
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto("/signup")
        page.fill("#f-email", new_email())
        page.fill("#f-password", PASSWORD)
        page.get_by_role("button", name="Create account").click()
        page.wait_for_url("**/dashboard")
        edge_user = re.search(r"user id <code>([^<]+)</code>", page.content())
        assert edge_user

        page.goto(verification_uri)
        page.fill("#f-user_code", user_code)
        page.get_by_role("button", name="Continue").click()
        assert page.inner_text("#device-name") == "Ada's laptop", "the consent screen names the device"
        page.get_by_role("button", name="Approve").click()
        page.wait_for_selector("#device-result")

        out, err = linking.communicate(timeout=60)
    finally:
        if linking.poll() is None:
            linking.kill()
    assert linking.returncode == 0, err
    link = json.loads(out)
    assert (link["edge"], link["local_user"], link["edge_user"]) == (api.base_url, local_user, edge_user.group(1))
    assert link["state"] == "ok"

    once = node.engram("sync", "once", "--timeout", "120")
    assert json.loads(once.stdout)["links"][0]["state"] == "ok"
    page.goto("/dashboard/sync")
    machines = page.locator("#machines tr[data-machine-id]")
    assert machines.count() == 1 and "Ada's laptop" in machines.inner_text(), "listed under the name approved"
    assert "syncing" in machines.inner_text()
    # Listed once: its grant is that machine, not also a connected app on the main page.
    page.goto("/dashboard")
    assert page.locator("#apps tr[data-grant-id]").count() == 0
    assert "1 linked machine" in page.inner_text("#sync-summary")
    context.close()
