"""The device authorization grant (RFC 8628) over real HTTP: a node's client asks for codes, a logged-in person
approves or denies on /device, and the node's polls get authorization_pending, slow_down, access_denied,
expired_token or tokens for the sync resource. (tests/oauth/test_device_browser.py drives it with Chromium.)"""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.accounts.principal import Principal
from app.errors import Unauthorized
from tests.harness import RunningServer, make_account
from tests.oauth.conftest import (
    DEVICE_GRANT,
    authenticate,
    decide_device,
    expire_device_code,
    poll_device,
    register,
    register_device,
    set_token_scope,
    start_device,
    sync_resource,
    token_request,
)
from tests.web.conftest import Browser

USER_CODE = re.compile(r"^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$")


def _start(api: RunningServer, name: str = "ada's laptop") -> tuple[dict[str, Any], dict[str, Any]]:
    client = register_device(api, name)
    started = start_device(api, client["client_id"])
    assert started.status_code == 200, started.text
    return client, started.json()


def _refresh(api: RunningServer, client_id: str, refresh_token: str, **extra: str) -> Any:
    data = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id, **extra}
    return token_request(api, data)


def test_the_server_advertises_the_device_grant(api: RunningServer) -> None:
    with api.client() as http:
        metadata = http.get("/.well-known/oauth-authorization-server").json()
    assert metadata["device_authorization_endpoint"] == f"{api.base_url}/oauth/device_authorization"
    assert DEVICE_GRANT in metadata["grant_types_supported"]


def test_a_person_approves_and_the_device_polls_its_way_to_sync_tokens(api: RunningServer, user: Browser) -> None:
    assert user.user_id is not None
    client, flow = _start(api)
    assert USER_CODE.match(flow["user_code"]), flow
    assert flow["verification_uri"] == f"{api.base_url}/device"
    assert flow["verification_uri_complete"] == f"{api.base_url}/device?user_code={flow['user_code']}"
    assert flow["expires_in"] == 900 and flow["interval"] == 5 and len(flow["device_code"]) >= 40

    pending = poll_device(api, client["client_id"], flow["device_code"])
    assert pending.status_code == 400 and pending.json()["error"] == "authorization_pending", pending.text

    page = user.get("/device", params={"user_code": flow["user_code"].lower().replace("-", " ")})
    assert page.status_code == 200, page.text
    assert '<span id="device-name">ada&#39;s laptop</span>' in page.text
    assert flow["user_code"] in page.text and client["client_id"] in page.text
    done = decide_device(user, flow["user_code"])
    assert done.status_code == 200 and "Device linked" in done.text, done.text

    issued = poll_device(api, client["client_id"], flow["device_code"])
    assert issued.status_code == 200, issued.text
    tokens = issued.json()
    assert tokens["scope"] == "sync" and tokens["token_type"] == "Bearer" and tokens["refresh_token"]
    principal = authenticate(api, tokens["access_token"], sync_resource(api))
    assert isinstance(principal, Principal), principal
    assert principal.user_id == user.user_id and principal.scopes == frozenset({"sync"}) and principal.via == "oauth"
    # Bound to the sync resource: useless on the REST API.
    assert api.client(tokens["access_token"]).get("/v1/memories").status_code == 401

    again = poll_device(api, client["client_id"], flow["device_code"])
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant", again.text

    # Refresh tokens rotate as in the code grant, keep the grant (family) and the resource.
    refreshed = _refresh(api, client["client_id"], tokens["refresh_token"], resource=sync_resource(api))
    assert refreshed.status_code == 200, refreshed.text
    assert refreshed.json()["refresh_token"] != tokens["refresh_token"] and refreshed.json()["scope"] == "sync"
    renewed = authenticate(api, refreshed.json()["access_token"], sync_resource(api))
    assert isinstance(renewed, Principal) and renewed.key_id == principal.key_id
    elsewhere = _refresh(api, client["client_id"], refreshed.json()["refresh_token"], resource=f"{api.base_url}/v1")
    assert elsewhere.status_code == 400 and elsewhere.json()["error"] == "invalid_target", elsewhere.text
    reused = _refresh(api, client["client_id"], tokens["refresh_token"])
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant", reused.text
    assert isinstance(authenticate(api, refreshed.json()["access_token"], sync_resource(api)), Unauthorized)


def test_polling_faster_than_the_interval_is_told_to_slow_down_and_the_interval_grows(api: RunningServer) -> None:
    client, flow = _start(api)
    answers = [poll_device(api, client["client_id"], flow["device_code"]).json() for _ in range(3)]
    assert [a["error"] for a in answers] == ["authorization_pending", "slow_down", "slow_down"], answers
    assert "10 s" in answers[1]["error_description"] and "15 s" in answers[2]["error_description"]


def test_a_denied_request_gets_access_denied_and_cannot_be_approved_afterwards(
    api: RunningServer, user: Browser
) -> None:
    client, flow = _start(api, "someone's pi")
    denied = decide_device(user, flow["user_code"], "deny")
    assert denied.status_code == 200 and "Request denied" in denied.text, denied.text
    for _ in range(2):
        answer = poll_device(api, client["client_id"], flow["device_code"])
        assert answer.status_code == 400 and answer.json()["error"] == "access_denied", answer.text
    late = user.get("/device", params={"user_code": flow["user_code"]})
    assert late.status_code == 400 and "No device is waiting for this code" in late.text


def test_an_expired_code_gets_expired_token_and_its_page_is_gone(api: RunningServer, user: Browser) -> None:
    client, flow = _start(api)
    expire_device_code(api, flow["device_code"])
    answer = poll_device(api, client["client_id"], flow["device_code"])
    assert answer.status_code == 400 and answer.json()["error"] == "expired_token", answer.text
    page = user.get("/device", params={"user_code": flow["user_code"]})
    assert page.status_code == 400 and "No device is waiting for this code" in page.text


def test_a_user_code_is_decided_once_and_the_tokens_act_as_whoever_approved(api: RunningServer, user: Browser) -> None:
    client, flow = _start(api)
    assert decide_device(user, flow["user_code"]).status_code == 200
    stranger = Browser(api).signup()
    for person in (stranger, user):
        page = person.get("/device", params={"user_code": flow["user_code"]})
        assert page.status_code == 400 and "No device is waiting" in page.text
        refused = person.submit("/device", "/device", user_code=flow["user_code"], decision="deny")
        assert refused.status_code == 400 and "No device is waiting" in refused.text
    tokens = poll_device(api, client["client_id"], flow["device_code"]).json()
    assert authenticate(api, tokens["access_token"], sync_resource(api)).user_id == user.user_id


def test_only_the_client_that_asked_may_redeem_the_device_code(api: RunningServer, user: Browser) -> None:
    client, flow = _start(api)
    other = register_device(api, "another device")
    decide_device(user, flow["user_code"])
    stolen = poll_device(api, other["client_id"], flow["device_code"])
    assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant", stolen.text
    wrong_target = poll_device(api, client["client_id"], flow["device_code"], resource=f"{api.base_url}/v1")
    assert wrong_target.status_code == 400 and wrong_target.json()["error"] == "invalid_target"
    assert poll_device(api, client["client_id"], flow["device_code"]).status_code == 200


def test_a_refresh_that_would_carry_another_resources_scope_is_refused(api: RunningServer, user: Browser) -> None:
    """A stored grant whose scope does not fit its resource (tampered, or from before the rules) issues nothing."""
    client, flow = _start(api)
    decide_device(user, flow["user_code"])
    tokens = poll_device(api, client["client_id"], flow["device_code"]).json()
    set_token_scope(api, tokens["access_token"], "memories:read memories:write")
    refused = _refresh(api, client["client_id"], tokens["refresh_token"])
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_scope", refused.text


@pytest.mark.parametrize(
    ("make_client", "extra", "status", "error"),
    [
        (lambda api: {"client_id": "egc_unknown"}, {}, 400, "invalid_client"),
        (lambda api: register(api), {}, 400, "unauthorized_client"),
        (lambda api: register_device(api), {"resource": "/v1"}, 400, "invalid_target"),
        (lambda api: register_device(api), {"resource": "https://elsewhere.example/sync/v1"}, 400, "invalid_target"),
        (lambda api: register_device(api), {"scope": "memories:read"}, 400, "invalid_scope"),
        (lambda api: register_device(api), {"scope": "sync memories:write"}, 400, "invalid_scope"),
        (lambda api: register_device(api, scope=None), {}, 400, "invalid_scope"),
    ],
    ids=["unknown-client", "code-client", "rest-api", "other-server", "memories", "sync-and-more", "no-sync-scope"],
)
def test_device_authorization_refuses_bad_requests_precisely(
    api: RunningServer, make_client: Any, extra: dict[str, str], status: int, error: str
) -> None:
    client = make_client(api)
    extra = {k: (api.base_url + v if v.startswith("/") else v) for k, v in extra.items()}
    refused = start_device(api, client["client_id"], **extra)
    assert refused.status_code == status, refused.text
    assert refused.json()["error"] == error and refused.json().get("error_description"), refused.text


def test_device_authorization_takes_one_form_and_nothing_else(api: RunningServer) -> None:
    client = register_device(api)
    with api.client() as http:
        as_json = http.post("/oauth/device_authorization", json={"client_id": client["client_id"]})
        twice = http.post(
            "/oauth/device_authorization",
            content=f"client_id={client['client_id']}&client_id={client['client_id']}",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        nul = http.post("/oauth/device_authorization", data={"client_id": "egc_\x00"})
        get = http.get("/oauth/device_authorization")
    assert as_json.status_code == 400 and as_json.json()["error"] == "invalid_request", as_json.text
    assert twice.status_code == 400 and twice.json()["error"] == "invalid_request", twice.text
    # PostgreSQL cannot hold NUL: refused as bad input, never a 500.
    assert 400 <= nul.status_code < 500, nul.text
    assert get.status_code == 405


def test_token_requests_of_the_device_grant_refuse_bad_input(api: RunningServer) -> None:
    client, flow = _start(api)
    missing = token_request(api, {"grant_type": DEVICE_GRANT, "client_id": client["client_id"]})
    assert missing.status_code == 400 and missing.json()["error"] == "invalid_request", missing.text
    for bad in ("not-a-device-code", "nul\x00code"):
        unknown = poll_device(api, client["client_id"], bad)
        assert unknown.status_code == 400 and unknown.json()["error"] == "invalid_grant", unknown.text
    code_client = register(api)
    unauthorized = poll_device(api, code_client["client_id"], flow["device_code"])
    assert unauthorized.status_code == 400 and unauthorized.json()["error"] == "unauthorized_client"


def test_device_clients_register_without_redirects_but_not_as_machines(api: RunningServer) -> None:
    assert "redirect_uris" not in register_device(api)
    owner = make_account(api)
    body = {
        "grant_types": [DEVICE_GRANT, "client_credentials"],
        "token_endpoint_auth_method": "client_secret_basic",
        "scope": "memories:read",
    }
    with api.client(owner.key) as http:
        refused = http.post("/oauth/register", json=body)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_client_metadata", refused.text


def test_the_device_page_needs_a_login_a_well_formed_code_and_a_real_form(api: RunningServer, user: Browser) -> None:
    _, flow = _start(api)
    anonymous = Browser(api)
    to_login = anonymous.get("/device", params={"user_code": flow["user_code"]})
    assert to_login.status_code == 303 and to_login.headers["location"].startswith("/login?next=%2Fdevice")
    assert anonymous.post("/device", {"user_code": flow["user_code"], "decision": "approve"}).status_code == 303

    entry = user.get("/device")
    assert entry.status_code == 200 and 'name="user_code"' in entry.text
    for malformed in ("", "ABC", "AEIO-UAEI", "BCDF-GHJK-LMNP", "<script>", "BCDF\x00GHJK"):
        page = user.get("/device", params={"user_code": malformed})
        assert page.status_code == 400 and "A code is 8 letters" in page.text, malformed
        assert "<script>" not in page.text  # what was typed is shown back escaped
    forged = user.post("/device", {"_csrf": "forged", "user_code": flow["user_code"], "decision": "approve"})
    assert forged.status_code == 403
    odd = user.submit("/device", "/device", user_code=flow["user_code"], decision="maybe")
    assert odd.status_code == 400 and "approve or deny" in odd.text
    # None of that decided anything.
    assert user.get("/device", params={"user_code": flow["user_code"]}).status_code == 200


def test_a_linked_device_is_a_connected_app_and_disconnecting_it_stops_its_next_sync_request(
    api: RunningServer, user: Browser
) -> None:
    client, flow = _start(api, "Engram on the NAS")
    decide_device(user, flow["user_code"])
    tokens = poll_device(api, client["client_id"], flow["device_code"]).json()
    with api.client(tokens["access_token"]) as sync:
        assert sync.get("/sync/v1/me").status_code == 200
        page = user.get("/dashboard").text
        row = re.search(r'<tr data-grant-id="(fam_\w+)">(.*?)</tr>', page, re.S)
        assert row and "Engram on the NAS" in row.group(2) and "/sync/v1" in row.group(2)
        assert user.submit("/dashboard", f"/dashboard/apps/{row.group(1)}/revoke").status_code == 303
        cut_off = sync.get("/sync/v1/me")
    assert cut_off.status_code == 401 and "revoked" in cut_off.json()["error"]["message"], cut_off.text
    refreshed = _refresh(api, client["client_id"], tokens["refresh_token"])
    assert refreshed.status_code == 400 and refreshed.json()["error"] == "invalid_grant", refreshed.text
