"""The account's data pages in a real browser (Chromium through Playwright): download my data, then delete the
account with the password entered again. Screenshots at phone and laptop sizes land in tmp_path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.harness import RunningServer
from tests.portability.conftest import fill_with
from tests.web.conftest import LAPTOP, PASSWORD, PHONE, new_email


def test_download_my_data_then_delete_the_account_in_a_real_browser(
    chromium: Any, api: RunningServer, tmp_path: Path
) -> None:
    context = chromium.new_context(viewport=LAPTOP, base_url=api.base_url, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    email = new_email()
    page.goto("/signup")
    page.fill("#f-email", email)
    page.fill("#f-password", PASSWORD)
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url("**/dashboard")
    page.fill("#f-name", "browser test")
    page.get_by_role("button", name="Create key").click()
    page.wait_for_selector("#new-key")
    key = page.inner_text("#cmd-new-key").strip()
    fill_with(api, key)

    page.goto("/account/delete")
    page.screenshot(path=str(tmp_path / "account-laptop.png"), full_page=True)
    with page.expect_download() as download_info:
        page.get_by_role("main").get_by_role("link", name="Download my data").click()
    download = download_info.value
    assert download.suggested_filename.startswith("engram-u_") and download.suggested_filename.endswith(".jsonl")
    lines = [json.loads(line) for line in Path(download.path()).read_text().splitlines() if line]
    assert lines[0]["format"] == "engram-export"
    assert any(line.get("content") == "We deploy with fly.io" for line in lines[1:])

    page.set_viewport_size(PHONE)
    page.screenshot(path=str(tmp_path / "account-phone.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]

    page.fill("#f-password", "a wrong password, surely")
    page.get_by_role("button", name="Delete my account").click()
    page.wait_for_selector("#e-password")
    assert "not your password" in page.inner_text("#e-password")
    with api.client(key) as http:
        assert http.get("/v1/memories").status_code == 200

    page.fill("#f-password", PASSWORD)
    page.get_by_role("button", name="Delete my account").click()
    page.get_by_role("heading", name="Account deleted").wait_for()
    assert email in page.inner_text("main")
    page.screenshot(path=str(tmp_path / "deleted-phone.png"), full_page=True)
    with api.client(key) as http:
        assert http.get("/v1/memories").status_code == 401
    page.goto("/dashboard")
    page.wait_for_url("**/login**")
    print(f"screenshots in {tmp_path}")
    context.close()
