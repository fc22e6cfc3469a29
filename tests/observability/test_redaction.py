"""The redaction filter and the formatters, in-process on a private logger (the root logger is pytest's)."""

from __future__ import annotations

import io
import json
import logging
import secrets
import string
import uuid

import pytest

from app.observability.logs import build_handler
from app.observability.redaction import REDACTED, redact
from app.observability.request_id import enter, leave, note_user, request_id_from

ALNUM = string.ascii_letters + string.digits
KEY = "egk_" + "".join(secrets.choice(ALNUM) for _ in range(52))
ACCESS = "ego_" + secrets.token_urlsafe(32)
REFRESH = "egr_" + secrets.token_urlsafe(32)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"presented {KEY} on /v1", KEY),
        (f"token {ACCESS} expired", ACCESS),
        (f"refresh with {REFRESH}", REFRESH),
        ("Authorization: Bearer s3cr3t-value", "s3cr3t-value"),
        ("{'authorization': 'Basic dXNlcjpwYXNz', 'accept': '*/*'}", "dXNlcjpwYXNz"),
        ("[(b'cookie', b'engram_session=abc123def'), (b'host', b'x')]", "abc123def"),
        ("Cookie: engram_session=abc123def; engram_csrf=zzz", "abc123def"),
        ("X-API-Key: plainsecretvalue", "plainsecretvalue"),
        ("email=a%40b.c&password=hunter2&next=%2F", "hunter2"),
        ('{"email": "a@b.c", "password": "hunter2"}', "hunter2"),
        ("client_secret=abcdefgh&grant_type=refresh_token&refresh_token=xyz987", "xyz987"),
        ("client_secret=abcdefgh&grant_type=authorization_code", "abcdefgh"),
    ],
    # Named, not shown: the keys are random, and parallel workers must collect the same test ids.
    ids=[
        "api-key",
        "access-token",
        "refresh-token",
        "bearer-header",
        "basic-header-dict",
        "cookie-tuples",
        "cookie-header",
        "api-key-header",
        "password-form",
        "password-json",
        "refresh-token-form",
        "client-secret-form",
    ],
)
def test_secrets_are_scrubbed(text: str, secret: str) -> None:
    scrubbed = redact(text)
    assert secret not in scrubbed
    assert REDACTED in scrubbed


def test_ordinary_text_is_left_alone() -> None:
    for text in (
        "GET /v1/memories/3f2a 200 12.5ms",
        "keys start with egk_ and tokens with ego_",
        "index repaired: 3 memories re-indexed, 0 orphans removed",
        "email=a%40b.c&next=%2F",
    ):
        assert redact(text) == text


def _logger() -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    logger = logging.getLogger(f"engram.test.{uuid.uuid4().hex}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(build_handler("json", stream))
    return logger, stream


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_the_handler_scrubs_arguments_and_exception_text() -> None:
    logger, stream = _logger()
    logger.warning("rejected key %s with headers %r", KEY, {"authorization": f"Bearer {ACCESS}"})
    password = "hunter" + "2"
    try:
        raise ValueError(f"bad login: password={password} for {KEY}")
    except ValueError:
        logger.exception("login failed")
    output = stream.getvalue()
    for secret in (KEY, ACCESS, "hunter2"):
        assert secret not in output
    first, second = _lines(stream)
    assert first["message"] == f"rejected key egk_{REDACTED} with headers {{'authorization': '{REDACTED}'}}"
    assert second["level"] == "error" and "ValueError" in str(second["exc"])


def test_a_broken_format_string_is_still_logged_and_scrubbed() -> None:
    logger, stream = _logger()
    logger.info("two placeholders %s %s", KEY)
    (line,) = _lines(stream)
    assert KEY not in stream.getvalue() and "two placeholders" in str(line["message"])


def test_json_lines_carry_the_request_id_and_extra_fields() -> None:
    logger, stream = _logger()
    logger.info("outside")
    context, token = enter("req-1")
    try:
        note_user("u_someone")
        logger.info("inside", extra={"status": 200})
    finally:
        leave(token)
    outside, inside = _lines(stream)
    assert set(outside) == {"ts", "level", "logger", "message"}
    assert inside["request_id"] == "req-1" and inside["status"] == 200 and inside["message"] == "inside"
    assert context.user_id == "u_someone"


def test_text_format_is_one_readable_line() -> None:
    stream = io.StringIO()
    logger = logging.getLogger(f"engram.test.{uuid.uuid4().hex}")
    logger.propagate = False
    logger.addHandler(build_handler("text", stream))
    _, token = enter("req-2")
    try:
        logger.warning("careful with %s", KEY)
    finally:
        leave(token)
    line = stream.getvalue().rstrip("\n")
    assert "\n" not in line and "WARNING" in line and "[req-2] careful with egk_" in line and KEY not in line


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="json, text"):
        build_handler("xml")


def test_request_ids_from_headers() -> None:
    assert request_id_from([(b"X-Request-ID", b"abc.DEF_1-2")]) == "abc.DEF_1-2"
    for bad in (b"", b"a" * 129, b"with space", b"\xff"):
        generated = request_id_from([(b"x-request-id", bad)])
        assert generated != bad.decode("latin-1") and len(generated) == 32
