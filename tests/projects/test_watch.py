"""A running server keeps a registered folder indexed: files added, changed, renamed, deleted, folders moved."""

from __future__ import annotations

import shutil
from pathlib import Path

from app.projects.control import ask
from app.projects.service import register
from tests.harness import RunningServer, make_account
from tests.projects.helpers import README, expected, indexed, make_repo, settles_to, wait_for, write


def test_the_watcher_follows_every_change_and_leaves_nothing_stale(api: RunningServer, tmp_path: Path) -> None:
    me, other = make_account(api), make_account(api)
    limit = api.settings.max_memory_chars
    root = make_repo(tmp_path / "shop")
    api.run(register(api.container.db, me.user_id, "shop", str(root)))
    assert ask(api.settings.data_dir, {"op": "reload"}) == {"ok": True}

    with api.client(me.key) as http, api.client(other.key) as stranger:
        wait_for(settles_to(http, "shop", root, limit), what="the first index")
        assert "private/notes.md" not in str(indexed(http, "shop"))
        assert sum(expected(root, limit).values()) == len(expected(root, limit)) == 9  # no source twice

        write(root, "README.md", README.replace("flyctl", "kamal").replace("## Testing", "## Tests"))
        wait_for(settles_to(http, "shop", root, limit), what="a changed file")
        found = http.post("/v1/memories/search", json={"query": "how do we deploy?", "session": "shop"}).json()
        # The changed section is found and its old text is gone (ranking among README's sections is not pinned here).
        deploy = [r for r in found["results"][:3] if "kamal" in r["content"]]
        assert deploy and deploy[0]["source"].startswith("README.md"), found["results"]
        assert not any("flyctl" in r["content"] for r in found["results"])

        write(root, "docs/new.md", "# New\n\nA page added while the server runs.\n")
        wait_for(settles_to(http, "shop", root, limit), what="an added file")

        (root / "docs/guide.md").rename(root / "docs/contributing.md")
        wait_for(settles_to(http, "shop", root, limit), what="a renamed file")

        (root / "config/app.yaml").unlink()
        wait_for(settles_to(http, "shop", root, limit), what="a deleted file")

        shutil.move(root / "docs", root / "handbook")
        wait_for(settles_to(http, "shop", root, limit), what="a moved folder")
        assert not any(source.startswith("docs/") for source in indexed(http, "shop"))

        write(root, "private/more.md", "# Ignored\n")
        write(root, ".gitignore", "private/\nhandbook/new.md\n")  # a changed .gitignore re-reads the rules
        wait_for(settles_to(http, "shop", root, limit), what="a .gitignore change")
        assert not any(source.startswith("handbook/new.md") for source in indexed(http, "shop"))

        # Another user sees none of it, even in a session of the same name.
        assert indexed(stranger, "shop") == {}
        assert stranger.post("/v1/memories/search", json={"query": "deploy", "session": "shop"}).json()["results"] == []

        listed = http.get("/v1/sessions/shop/documents").json()["documents"]
        assert {d["origin"] for d in listed} == {"folder"}
        assert sorted(d["path"] for d in listed) == [
            "README.md",
            "handbook/contributing.md",
            "package.json",
            "pyproject.toml",
        ]


def test_index_through_the_control_socket_reports_and_refuses_unknown_projects(
    api: RunningServer, tmp_path: Path
) -> None:
    me = make_account(api)
    root = make_repo(tmp_path / "repo")
    write(root, "docs/bin.md", b"\x00\x01\x02")
    write(root, "docs/latin.md", "caf\xe9".encode("latin-1"))
    api.run(register(api.container.db, me.user_id, "ctl", str(root)))
    answer = ask(api.settings.data_dir, {"op": "index", "project": "ctl", "user": me.user_id})
    assert answer is not None and answer["ok"], answer
    report = answer["report"]
    assert report["added"] + report["unchanged"] == 5
    assert {(s["path"], s["reason"]) for s in report["skipped"]} >= {
        ("docs/bin.md", "binary"),
        ("docs/latin.md", "invalid_utf8"),
    }
    again = ask(api.settings.data_dir, {"op": "index", "project": "ctl", "user": me.user_id})
    assert again is not None and (again["report"]["unchanged"], again["report"]["chunks_written"]) == (5, 0)
    missing = ask(api.settings.data_dir, {"op": "index", "project": "nope", "user": me.user_id})
    assert missing == {
        "ok": False,
        "error": {"code": "not_found", "message": f"no project named nope for user {me.user_id}"},
    }
    assert ask(api.settings.data_dir, {"op": "explode"})["ok"] is False  # type: ignore[index]
