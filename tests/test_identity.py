import pytest

from app.errors import InvalidIdentity
from app.identity import Identity, format_identity, parse_identity


def test_a_plain_user_id_is_a_user_without_session() -> None:
    assert parse_identity("u_7f3k") == Identity("u_7f3k")


def test_a_virtual_id_carries_session_and_agent() -> None:
    identity = parse_identity("u_7f3k__session__webscraper__research")
    assert identity == Identity("u_7f3k", "webscraper", "research")
    assert identity.is_session


def test_names_may_use_dots_dashes_and_single_underscores() -> None:
    identity = parse_identity("u_1__session__web.scraper-2__re_search.v1")
    assert (identity.session, identity.agent) == ("web.scraper-2", "re_search.v1")


@pytest.mark.parametrize(
    "raw",
    ["u_7f3k", "u_7f3k__session__webscraper__research", "a__session__" + "s" * 64 + "__" + "a" * 64],
)
def test_format_is_the_inverse_of_parse(raw: str) -> None:
    identity = parse_identity(raw)
    assert format_identity(identity.user_id, identity.session, identity.agent) == raw


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        ("", "user part is empty"),
        ("__session__s__a", "user part is empty"),
        ("u 1", "user part"),
        ("u_1__sessions__s__a", "expected 'session'"),
        ("u_1__Session__s__a", "expected 'session'"),
        ("u_1__session__s", "agent part is missing"),
        ("u_1__session__", "session and agent parts are missing"),
        ("u_1__session____a", "session name is empty"),
        ("u_1__session__s__", "agent name is empty"),
        ("u_1__session__s__a__b", "agent name 'a__b'"),
        ("u_1__session__" + "s" * 65 + "__a", "session name is longer than 64"),
        ("u_1__session__s__" + "a" * 65, "agent name is longer than 64"),
        ("u_1__session__we b__a", "session name 'we b'"),
        ("u_1__session__s__a/b", "agent name 'a/b'"),
        ("u_1__session__s__a%20", "agent name"),
        ("u_1__session__sé__a", "session name"),
        ("x" * 65, "user part is longer than 64"),
        # A regular expression's '$' also matches before a final newline: each part must match whole.
        ("u_1\n", "user part"),
        ("u_1__session__web\n__a", "session name"),
        ("u_1__session__web__a\n", "agent name"),
    ],
)
def test_malformed_ids_name_the_part_that_is_wrong(raw: str, names: str) -> None:
    with pytest.raises(InvalidIdentity) as caught:
        parse_identity(raw)
    assert names in caught.value.message


def test_format_refuses_half_a_session() -> None:
    with pytest.raises(InvalidIdentity, match="both a session name and an agent name"):
        format_identity("u_1", "s", None)


def test_format_validates_each_part() -> None:
    with pytest.raises(InvalidIdentity, match="session name 'a__b' must not contain '__'"):
        format_identity("u_1", "a__b", "x")
