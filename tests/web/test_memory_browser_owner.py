"""The dashboard's memory browser is the owner's view: every memory of theirs, in every session and scope."""

from __future__ import annotations

from app.accounts.principal import Principal, scopes_for
from app.memories.schemas import MemoryIn, SearchIn
from tests.harness import RunningServer, make_account


def test_the_owner_view_lists_and_searches_every_session_and_scope_but_no_other_tenant(api: RunningServer) -> None:
    me, other = make_account(api), make_account(api)
    service = api.container.memories
    mine = Principal(me.user_id, scopes_for("write"))
    theirs = Principal(other.user_id, scopes_for("write"))

    async def fill() -> None:
        await service.add(mine, None, [MemoryIn(content="user-wide fact about kites")])
        await service.add(mine, None, [MemoryIn(content="session fact about kites", session="s1", agent="a")])
        await service.add(
            mine, None, [MemoryIn(content="agent fact about kites", session="s2", agent="b", scope="agent")]
        )
        await service.add(theirs, None, [MemoryIn(content="another tenant's fact about kites")])

    api.run(fill())
    page = api.run(service.list(mine, None, owner_view=True))
    assert {m.content for m in page.memories} == {
        "user-wide fact about kites",
        "session fact about kites",
        "agent fact about kites",
    }
    agents_only = api.run(service.list(mine, None, owner_view=True, scope="agent"))
    assert [m.content for m in agents_only.memories] == ["agent fact about kites"]
    found = api.run(service.search(mine, None, SearchIn(query="kites", limit=20), owner_view=True))
    assert {r.content for r in found} == {m.content for m in page.memories}
    # Without the owner view, the plain user reads user scope only, as the API promises.
    assert [m.content for m in api.run(service.list(mine, None)).memories] == ["user-wide fact about kites"]
