"""The OpenAPI document tells the truth about /v1: the errors as the API answers them, every status an operation can
give, the name patterns and closed request bodies. Schemathesis checks it against the real server over HTTP."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from app.errors import InvalidIdentity
from app.identity import NAME_PATTERN, validate_name
from tests.harness import RunningServer, add_key, make_account
from tests.oauth.conftest import make_sync_client, sync_token

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
REPO = Path(__file__).resolve().parents[2]
CHECKS = ",".join(
    (
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
        "response_headers_conformance",
        # Every request the schema calls valid is taken, every one it calls invalid refused, and a method a path does
        # not have gets 405 with an Allow that names the methods the schema gives the path.
        "positive_data_acceptance",
        "negative_data_rejection",
        "unsupported_method",
        "allow_header_conformance",
    )
)
# A 413 refuses a body as surely as a 422 (schemathesis's default list lacks it).
CONFIG = """
[checks.negative_data_rejection]
expected-statuses = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429]
"""
# Per credential: the paths it reaches, examples per operation, and the phases. The write key and the sync token reach
# every code path of theirs, so they get the coverage phase too (boundary values, invalid values of every kind, other
# methods); a read key or none is refused early by most operations, so fuzzing a little suffices.
RUNS = {
    "write": ("^/v1/", "8", "coverage,fuzzing"),
    "sync": ("^/sync/v1/", "15", "coverage,fuzzing"),
    "read": ("^/v1/", "4", "fuzzing"),
    "none": ("^/(v1|sync/v1)/", "3", "fuzzing"),
}
# Fixed, so a run is repeatable; set ENGRAM_SCHEMATHESIS_SEED to explore other inputs.
SEED = os.environ.get("ENGRAM_SCHEMATHESIS_SEED", "20261123")
METHODS = ("get", "put", "post", "delete", "patch")


@pytest.fixture(scope="module")
def document(api: RunningServer) -> dict[str, Any]:
    response = httpx.get(f"{api.base_url}/docs/openapi.json", timeout=30)
    assert response.status_code == 200
    result: dict[str, Any] = response.json()
    return result


def test_the_document_is_also_found_where_tools_look_first(api: RunningServer, document: dict[str, Any]) -> None:
    response = httpx.get(f"{api.base_url}/openapi.json", timeout=30, follow_redirects=True)
    assert response.status_code == 200
    assert str(response.url).endswith("/docs/openapi.json")
    assert response.json() == document


def _v1_operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, item in document["paths"].items()
        if path.startswith(("/v1/", "/sync/v1/"))
        for method, operation in item.items()
        if method in METHODS
    ]


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].removeprefix("#/components/schemas/")
        schema = document["components"]["schemas"][name]
    return schema


def _validator(document: dict[str, Any], schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """A validator for ``schema`` that resolves the document's ``#/components/...`` references."""
    return jsonschema.Draft202012Validator({**schema, "components": document["components"]})


def test_every_v1_operation_documents_its_errors_as_the_api_answers_them(document: dict[str, Any]) -> None:
    operations = _v1_operations(document)
    assert len(operations) >= 13
    for method, path, operation in operations:
        responses = operation["responses"]
        for status in ("400", "401", "422", "429"):
            assert status in responses, f"{method} {path} does not document {status}"
        for status, response in responses.items():
            if status.startswith(("4", "5")):
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorBody"}, f"{method} {path} {status}: {schema}"
        if "requestBody" in operation:
            assert "413" in responses, f"{method} {path} takes a body but does not document 413"
        assert "WWW-Authenticate" in responses["401"]["headers"]
        assert "Retry-After" in responses["429"]["headers"]
    for path in ("/v1/memories/{memory_id}", "/v1/memories/{memory_id}/history"):
        assert "404" in document["paths"][path]["get"]["responses"]
    assert "403" in document["paths"]["/v1/memories"]["post"]["responses"]
    # Litestar's own error shape appears nowhere.
    assert '"status_code"' not in str(document).replace("'", '"')
    error = document["components"]["schemas"]["ErrorBody"]
    assert error["required"] == ["error"] and error["additionalProperties"] is False
    assert set(_resolve(document, error["properties"]["error"])["required"]) == {"code", "message"}


def test_request_bodies_are_closed_and_names_carry_their_pattern(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    for name in ("MemoryIn", "MemoryBatchIn", "MemoryPatch", "SearchIn", "ClaimIn", "ReleaseIn", "BroadcastIn"):
        assert schemas[name]["additionalProperties"] is False, name
    add_body = document["paths"]["/v1/memories"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert add_body == {
        "oneOf": [{"$ref": "#/components/schemas/MemoryIn"}, {"$ref": "#/components/schemas/MemoryBatchIn"}]
    }
    session_in_body = schemas["MemoryIn"]["properties"]["session"]["anyOf"][0]
    assert session_in_body == {"type": "string", "minLength": 1, "maxLength": 64, "pattern": NAME_PATTERN}
    assert schemas["ClaimIn"]["properties"]["agent"]["pattern"] == NAME_PATTERN
    assert schemas["SearchIn"]["properties"]["threshold"]["anyOf"][0]["minimum"] == 0
    status = document["paths"]["/v1/sessions/{session}/status"]["get"]["parameters"]
    session_param = next(p for p in status if p["name"] == "session")
    assert session_param["in"] == "path" and session_param["schema"]["pattern"] == NAME_PATTERN
    listing = document["paths"]["/v1/memories"]["get"]["parameters"]
    for parameter in listing:
        if parameter["name"] in ("session", "agent"):
            assert parameter["schema"]["type"] == "string" and parameter["schema"]["pattern"] == NAME_PATTERN
    history = {p["name"]: p for p in document["paths"]["/v1/memories/{memory_id}/history"]["get"]["parameters"]}
    assert (history["limit"]["schema"]["minimum"], history["limit"]["schema"]["maximum"]) == (1, 1000)
    assert history["limit"]["schema"]["default"] == 100 and history["after"]["in"] == "query"
    assert "next" in document["components"]["schemas"]["HistoryResponse"]["properties"]


@pytest.mark.parametrize(
    "name",
    ["a", "_", "_a", "a_", "a_b", "web-1.2", "A" * 64, "a__b", "__", "a b", "é", "a/b", "", "a\n", "a" * 65],
)
def test_the_name_pattern_is_the_rule_identity_enforces(name: str) -> None:
    try:
        validate_name(name, "session")
        valid = True
    except InvalidIdentity:
        valid = False
    assert (re.fullmatch(NAME_PATTERN, name) is not None and 1 <= len(name) <= 64) == valid


def test_real_errors_match_the_documented_error_schema(api: RunningServer, document: dict[str, Any]) -> None:
    me = make_account(api)
    reader = add_key(api, me.user_id, scope="read")
    error_schema = {"$ref": "#/components/schemas/ErrorBody"}
    with api.client(me.key) as http, api.client(reader.key) as read_only, api.client() as anonymous:
        answers = {
            401: anonymous.get("/v1/memories"),
            403: read_only.post("/v1/memories", json={"content": "x"}),
            404: http.get("/v1/memories/no-such-memory"),
            400: http.get("/v1/memories", params={"session": "a b"}),
            422: http.post("/v1/memories", json={"content": "x", "surprise": 1}),
        }
    for status, response in answers.items():
        assert response.status_code == status, response.text
        _validator(document, error_schema).validate(response.json())
    assert "WWW-Authenticate" in answers[401].headers


def _compact(report: str) -> str:
    """The failures of a schemathesis report, with generated bodies (which can be megabytes) cut short."""
    start = report.find("FAILURES")
    lines = report[start if start >= 0 else 0 :].splitlines()
    return "\n".join(line if len(line) <= 240 else line[:240] + " [...]" for line in lines[:300])


@pytest.fixture(scope="module")
def credentials(api: RunningServer) -> dict[str, str | None]:
    me = make_account(api)
    sync = sync_token(api, make_sync_client(api, me.user_id, "schemathesis")).json()["access_token"]
    return {"write": me.key, "sync": sync, "read": add_key(api, me.user_id, scope="read").key, "none": None}


@pytest.mark.parametrize("credential", list(RUNS))
def test_schemathesis_finds_no_server_error_and_no_answer_outside_the_schema(
    api: RunningServer, credentials: dict[str, str | None], credential: str, tmp_path: Path
) -> None:
    paths, examples, phases = RUNS[credential]
    key = credentials[credential]
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    command = [
        str(SCHEMATHESIS),
        "run",
        f"{api.base_url}/docs/openapi.json",
        "--checks",
        CHECKS,
        "--include-path-regex",
        paths,
        # An event stream never ends, so no generated request could finish; tests/sessions covers it.
        "--exclude-path-regex",
        "/events$",
        "--max-examples",
        examples,
        "--phases",
        phases,
        "--workers",
        "1",
        "--seed",
        SEED,
        "--generation-database",
        "none",
        "--request-timeout",
        "30",
        "--no-color",
    ]
    if key is None:
        # Without a key, the security parameters schemathesis makes up are bad keys: each must get a 401.
        command += ["--generation-with-security-parameters", "true"]
    else:
        command += ["--generation-with-security-parameters", "false", "-H", f"Authorization: Bearer {key}"]
    # The rules between fields that OpenAPI cannot state are mended in generated requests by these hooks.
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "NO_COLOR": "1",
        "PYTHONPATH": str(REPO),
        "SCHEMATHESIS_HOOKS": "tests.api.schemathesis_hooks",
    }
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env, check=False)
    output = result.stdout + result.stderr
    (tmp_path / "schemathesis.txt").write_text(output)
    assert result.returncode == 0, _compact(output) + f"\n(the whole report: {tmp_path / 'schemathesis.txt'})"
    selected = re.search(r"(\d+) selected", output)
    assert selected and int(selected.group(1)) >= (3 if credential == "sync" else 13), output[-3000:]


def test_options_and_405_name_the_methods_the_document_gives_each_path(
    api: RunningServer, document: dict[str, Any]
) -> None:
    me = make_account(api)
    sync = sync_token(api, make_sync_client(api, me.user_id, "allow")).json()["access_token"]
    with api.client(me.key) as rest, api.client(sync) as edge:
        for path, item in document["paths"].items():
            if not path.startswith(("/v1/", "/sync/v1/")):
                continue
            http = edge if path.startswith("/sync/") else rest
            url = path.replace("{session}", "s1").replace("{memory_id}", "m1").replace("{task_id}", "t1")
            documented = {method.upper() for method in item if method in METHODS}
            allowed = set(http.options(url).headers["allow"].split(", "))
            assert allowed - {"OPTIONS", "HEAD"} == documented, (path, allowed)
            missing = next(m for m in ("PUT", "PATCH", "DELETE", "POST", "GET") if m not in documented)
            refused = http.request(missing, url)
            assert refused.status_code == 405 and set(refused.headers["allow"].split(", ")) == allowed, path


def test_the_word_null_is_no_value_of_a_number_or_a_choice_but_may_be_a_name(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        for url, name in (
            ("/v1/sessions/s1/messages?after=null", "after"),
            ("/v1/sessions/s1/tasks?status=null", "status"),
            ("/v1/memories?scope=null", "scope"),
        ):
            refused = http.get(url)
            assert refused.status_code in (400, 422) and name in refused.json()["error"]["message"], refused.text
        assert http.get("/v1/memories?session=null").status_code == 200


def test_a_metadata_filter_reaches_keys_of_any_character(api: RunningServer) -> None:
    me = make_account(api)
    with api.client(me.key) as http:
        for key in ("a b", "clé", "x:y", "🙂"):
            made = http.post("/v1/memories", json={"content": f"the deploy notes {key}", "metadata": {key: 1}})
            assert made.status_code == 201, made.text
            found = http.post("/v1/memories/search", json={"query": "deploy notes", "metadata": {key: 1}})
            assert found.status_code == 200, found.text
            assert [r["id"] for r in found.json()["results"]] == [made.json()["id"]], key
        refused = http.post("/v1/memories", json={"content": "x", "metadata": {'a"b': 1}})
        assert refused.status_code == 422 and "metadata" in refused.text


def test_the_event_stream_is_documented_as_one_with_each_event_shape(document: dict[str, Any]) -> None:
    media = document["paths"]["/v1/sessions/{session}/events"]["get"]["responses"]["200"]["content"]
    schema = media["text/event-stream"]["schema"]
    assert schema["type"] == "string"
    events = schema["x-events"]
    assert {"ready", "reset", "revoked", "claim", "release", "change"} <= set(events)
    for ref in events.values():
        assert _resolve(document, ref)["type"] == "object"
    for operation in document["paths"]["/sync/v1/push"].values():
        assert {"400", "401", "403", "413", "422", "429"} <= set(operation["responses"])
