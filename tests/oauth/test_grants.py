"""The authorization code grant, refresh rotation and token binding, and every way they must refuse."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from tests.harness import RunningServer, make_account, revoke_key
from tests.oauth.conftest import (
    REDIRECT,
    approve,
    authenticate,
    authorize_params,
    consent_form,
    exchange,
    expire_access_token,
    get_code,
    mcp_resource,
    mcp_status,
    new_pkce,
    redirect_query,
    register,
    token_request,
)
from tests.web.conftest import Browser

TokensFor = Callable[..., dict[str, Any]]


def test_authorize_sends_a_visitor_to_login_first(api: RunningServer) -> None:
    browser = Browser(api)
    response = browser.get("/oauth/authorize?" + urlencode(authorize_params("egc_x", new_pkce(), None)))
    assert response.status_code == 303 and response.headers["location"].startswith("/login?next=%2Foauth%2Fauthorize")


def test_unknown_client_and_wrong_redirect_uri_get_an_error_page_never_a_redirect(
    api: RunningServer, user: Browser
) -> None:
    client = register(api)
    unknown = user.get("/oauth/authorize", params=authorize_params("egc_nope", new_pkce(), None))
    assert unknown.status_code == 400 and "location" not in unknown.headers
    params = authorize_params(client["client_id"], new_pkce(), None, redirect_uri="http://127.0.0.1:8765/other")
    wrong = user.get("/oauth/authorize", params=params)
    assert wrong.status_code == 400 and "location" not in wrong.headers
    elsewhere = user.get("/oauth/authorize", params={**params, "redirect_uri": "https://evil.example/callback"})
    assert elsewhere.status_code == 400 and "location" not in elsewhere.headers


def test_a_loopback_redirect_may_use_another_port(api: RunningServer, user: Browser) -> None:
    client = register(api)
    params = authorize_params(client["client_id"], new_pkce(), None, redirect_uri="http://127.0.0.1:40001/callback")
    response = approve(user, params)
    assert response.headers["location"].startswith("http://127.0.0.1:40001/callback?code=")


def test_pkce_is_required_and_only_s256(api: RunningServer, user: Browser) -> None:
    client = register(api, token_endpoint_auth_method="client_secret_basic")
    missing = user.get("/oauth/authorize", params=authorize_params(client["client_id"], None, None))
    assert redirect_query(missing) == {
        "error": "invalid_request",
        "error_description": "PKCE is required: send code_challenge with code_challenge_method=S256",
        "state": "st-1",
        "iss": api.base_url,
    }
    pkce = new_pkce()
    plain = authorize_params(
        client["client_id"], None, None, code_challenge=pkce.verifier, code_challenge_method="plain"
    )
    assert redirect_query(user.get("/oauth/authorize", params=plain))["error"] == "invalid_request"
    no_method = authorize_params(client["client_id"], None, None, code_challenge=pkce.challenge)
    assert redirect_query(user.get("/oauth/authorize", params=no_method))["error"] == "invalid_request"


def test_a_wrong_verifier_is_refused(api: RunningServer, user: Browser) -> None:
    assert user.user_id is not None
    client = register(api)
    code = get_code(user, client["client_id"], new_pkce(), mcp_resource(api, user.user_id))
    response = exchange(api, client["client_id"], code, new_pkce())
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
    missing = token_request(
        api,
        {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client["client_id"]},
    )
    assert missing.status_code == 400


def test_a_reused_code_is_refused_and_revokes_the_tokens_it_gave(api: RunningServer, user: Browser) -> None:
    assert user.user_id is not None
    client = register(api)
    pkce = new_pkce()
    code = get_code(user, client["client_id"], pkce, mcp_resource(api, user.user_id))
    first = exchange(api, client["client_id"], code, pkce)
    assert first.status_code == 200
    access = first.json()["access_token"]
    assert mcp_status(api, access, user.user_id).status_code == 200
    again = exchange(api, client["client_id"], code, pkce)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    refused = mcp_status(api, access, user.user_id)
    assert refused.status_code == 401 and "revoked" in refused.headers["www-authenticate"]
    refresh = token_request(
        api,
        {
            "grant_type": "refresh_token",
            "refresh_token": first.json()["refresh_token"],
            "client_id": client["client_id"],
        },
    )
    assert refresh.status_code == 400


def test_the_consent_form_needs_its_csrf_token(api: RunningServer, user: Browser) -> None:
    client = register(api)
    page = user.get("/oauth/authorize", params=authorize_params(client["client_id"], new_pkce(), None))
    form = consent_form(page)
    forged = user.post("/oauth/authorize", {**form, "_csrf": "forged", "decision": "approve"})
    assert forged.status_code == 403 and "location" not in forged.headers
    # A different logged-in browser cannot replay this one's form either.
    other = Browser(api).signup()
    assert other.post("/oauth/authorize", {**form, "decision": "approve"}).status_code == 403


def test_deny_sends_access_denied_back_to_the_client(api: RunningServer, user: Browser) -> None:
    client = register(api)
    denied = approve(user, authorize_params(client["client_id"], new_pkce(), None), decision="deny")
    query = redirect_query(denied)
    assert query["error"] == "access_denied" and query["state"] == "st-1" and "code" not in query
    assert query["iss"] == api.base_url  # RFC 9207: error responses name the issuer too


def test_a_resource_of_another_user_cannot_be_requested(api: RunningServer, user: Browser) -> None:
    client = register(api)
    params = authorize_params(client["client_id"], new_pkce(), mcp_resource(api, "u_someoneelse"))
    refused = redirect_query(user.get("/oauth/authorize", params=params))
    assert refused["error"] == "invalid_target" and refused["iss"] == api.base_url
    elsewhere = authorize_params(client["client_id"], new_pkce(), "https://other.example/v1")
    assert redirect_query(user.get("/oauth/authorize", params=elsewhere))["error"] == "invalid_target"


def test_a_token_works_only_on_the_resource_it_was_issued_for(
    api: RunningServer, user: Browser, tokens_for: TokensFor
) -> None:
    assert user.user_id is not None
    other = Browser(api).signup()
    assert other.user_id is not None
    token = tokens_for(user)["access_token"]
    assert mcp_status(api, token, user.user_id).status_code == 200
    foreign = mcp_status(api, token, other.user_id)
    assert foreign.status_code == 401 and 'error="invalid_token"' in foreign.headers["www-authenticate"]
    assert mcp_status(api, token, user.user_id, client_name="cursor").status_code == 401
    with api.client(token) as rest:
        refused = rest.get("/v1/memories")
    assert refused.status_code == 401 and "not for this resource" in refused.headers["www-authenticate"]
    api_token = tokens_for(user, resource=f"{api.base_url}/v1")["access_token"]
    with api.client(api_token) as rest:
        assert rest.get("/v1/memories").status_code == 200
    assert mcp_status(api, api_token, user.user_id).status_code == 401


def test_a_token_for_a_session_url_is_bound_to_that_session_and_agent(
    api: RunningServer, user: Browser, tokens_for: TokensFor
) -> None:
    assert user.user_id is not None
    bound_id = f"{user.user_id}__session__alpha__coder"
    token = tokens_for(user, resource=mcp_resource(api, bound_id))["access_token"]
    assert mcp_status(api, token, bound_id).status_code == 200
    # Its principal carries the binding, so the rules of bound keys (Principal.act_as, require_identity) hold it.
    principal = authenticate(api, token, mcp_resource(api, bound_id))
    assert (principal.user_id, principal.session, principal.agent) == (user.user_id, "alpha", "coder")
    for elsewhere in (user.user_id, f"{user.user_id}__session__alpha__tester", f"{user.user_id}__session__beta__coder"):
        refused = mcp_status(api, token, elsewhere)
        assert refused.status_code == 401 and "not for this resource" in refused.headers["www-authenticate"]
    plain = tokens_for(user)["access_token"]  # a token for the plain URL is not bound to any agent
    assert authenticate(api, plain, mcp_resource(api, user.user_id)).session is None


def test_expired_and_revoked_tokens_are_refused_with_a_reason(
    api: RunningServer, user: Browser, tokens_for: TokensFor
) -> None:
    assert user.user_id is not None
    expiring = tokens_for(user)
    expire_access_token(api, expiring["access_token"])
    expired = mcp_status(api, expiring["access_token"], user.user_id)
    assert (
        expired.status_code == 401
        and 'error_description="the access token has expired"' in expired.headers["www-authenticate"]
    )
    revoking = tokens_for(user)
    with api.client() as http:
        assert (
            http.post(
                "/oauth/revoke", data={"token": revoking["access_token"], "client_id": revoking["client_id"]}
            ).status_code
            == 200
        )
    revoked = mcp_status(api, revoking["access_token"], user.user_id)
    assert revoked.status_code == 401 and "has been revoked" in revoked.headers["www-authenticate"]


def test_refresh_rotates_and_a_reused_refresh_token_revokes_the_family(
    api: RunningServer, user: Browser, tokens_for: TokensFor
) -> None:
    assert user.user_id is not None
    first = tokens_for(user)

    def refresh(token: str) -> Any:
        return token_request(
            api, {"grant_type": "refresh_token", "refresh_token": token, "client_id": first["client_id"]}
        )

    second = refresh(first["refresh_token"])
    assert second.status_code == 200, second.text
    rotated = second.json()
    assert rotated["refresh_token"] != first["refresh_token"]
    assert mcp_status(api, rotated["access_token"], user.user_id).status_code == 200
    reused = refresh(first["refresh_token"])
    assert reused.status_code == 400 and "reuse" in reused.json()["error_description"]
    assert mcp_status(api, rotated["access_token"], user.user_id).status_code == 401
    assert mcp_status(api, first["access_token"], user.user_id).status_code == 401
    assert refresh(rotated["refresh_token"]).status_code == 400


def test_a_refresh_token_belongs_to_its_client(api: RunningServer, user: Browser, tokens_for: TokensFor) -> None:
    issued = tokens_for(user)
    thief = register(api)
    stolen = token_request(
        api, {"grant_type": "refresh_token", "refresh_token": issued["refresh_token"], "client_id": thief["client_id"]}
    )
    assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant"


def test_client_credentials_with_a_wrong_secret_or_unknown_client_is_refused(api: RunningServer) -> None:
    owner = make_account(api)
    client = register(
        api, key=owner.key, grant_types=["client_credentials"], token_endpoint_auth_method="client_secret_basic"
    )
    wrong = token_request(api, {"grant_type": "client_credentials"}, auth=(client["client_id"], "not-the-secret"))
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"
    unknown = token_request(api, {"grant_type": "client_credentials"}, auth=("egc_unknown", "whatever"))
    assert unknown.status_code == 401 and unknown.json()["error"] == "invalid_client"
    public = register(api)
    not_machine = token_request(api, {"grant_type": "client_credentials", "client_id": public["client_id"]})
    assert not_machine.status_code in (400, 401)


def test_revoking_the_key_that_registered_a_machine_client_cuts_the_client_off(api: RunningServer) -> None:
    owner = make_account(api)
    client = register(
        api, key=owner.key, grant_types=["client_credentials"], token_endpoint_auth_method="client_secret_basic"
    )
    credentials = (client["client_id"], client["client_secret"])
    token = token_request(api, {"grant_type": "client_credentials"}, auth=credentials).json()["access_token"]
    with api.client(token) as rest:
        assert rest.get("/v1/memories").status_code == 200
        revoke_key(api, owner.key_id)
        cut_off = rest.get("/v1/memories")
    assert cut_off.status_code == 401
    assert "revoked" in cut_off.json()["error"]["message"]
    again = token_request(api, {"grant_type": "client_credentials"}, auth=credentials)
    assert again.status_code in (400, 401) and again.json()["error"] == "invalid_client"
    assert "revoked" in again.json()["error_description"]


def test_a_read_only_grant_cannot_write(api: RunningServer, user: Browser) -> None:
    client = register(api, scope="memories:read")
    pkce = new_pkce()
    code = get_code(user, client["client_id"], pkce, f"{api.base_url}/v1")
    token = exchange(api, client["client_id"], code, pkce).json()
    assert token["scope"] == "memories:read"
    with api.client(token["access_token"]) as rest:
        assert rest.get("/v1/memories").status_code == 200
        assert rest.post("/v1/memories", json={"content": "nope"}).status_code == 403


def test_the_flow_and_reuse_detection_work_on_sqlite_too(sqlite_api: RunningServer) -> None:
    browser = Browser(sqlite_api).signup()
    assert browser.user_id is not None
    client = register(sqlite_api)
    pkce = new_pkce()
    code = get_code(browser, client["client_id"], pkce, mcp_resource(sqlite_api, browser.user_id))
    first = exchange(sqlite_api, client["client_id"], code, pkce).json()
    assert mcp_status(sqlite_api, first["access_token"], browser.user_id).status_code == 200

    def refresh(token: str) -> Any:
        data = {"grant_type": "refresh_token", "refresh_token": token, "client_id": client["client_id"]}
        return token_request(sqlite_api, data)

    second = refresh(first["refresh_token"]).json()
    assert refresh(first["refresh_token"]).status_code == 400
    assert mcp_status(sqlite_api, second["access_token"], browser.user_id).status_code == 401
    browser.close()


def test_an_open_event_stream_ends_once_its_oauth_grant_is_revoked(
    api: RunningServer, user: Browser, tokens_for: TokensFor
) -> None:
    import time

    import httpx

    issued = tokens_for(user, f"{api.base_url}/v1")
    headers = {"Authorization": f"Bearer {issued['access_token']}"}
    with (
        httpx.Client(base_url=api.base_url, headers=headers, timeout=10) as http,
        http.stream("GET", "/v1/sessions/oauth/events") as response,
    ):
        lines = response.iter_lines()
        assert next(line for line in lines if line.startswith("event:")) == "event: ready"
        revoked = httpx.post(
            f"{api.base_url}/oauth/revoke",
            data={"token": issued["refresh_token"], "client_id": issued["client_id"]},
        )
        assert revoked.status_code == 200, revoked.text
        time.sleep(api.settings.stream_recheck_seconds)
        # The next event makes the stream re-check its credential.
        api.run(_broadcast(api, user.user_id or "", "oauth"))
        kinds = [line for line in lines if line.startswith("event:")][:1]
    assert kinds == ["event: revoked"]


async def _broadcast(api: RunningServer, user_id: str, session: str) -> None:
    from app.coordination import SessionKey

    await api.container.coordination.broadcast(SessionKey(user_id, session), "alice", [], "after the revocation")


def test_the_dashboard_lists_connected_apps_and_disconnecting_one_revokes_its_tokens(
    api: RunningServer, user: Browser, tokens_for: TokensFor
) -> None:
    import re

    assert user.user_id is not None
    issued = tokens_for(user)
    page = user.get("/dashboard").text
    rows = re.findall(r'<tr data-grant-id="([^"]+)">(.*?)</tr>', page, re.S)
    assert len(rows) == 1
    family_id, row = rows[0]
    assert "test client" in row and "memories:read memories:write" in row
    assert mcp_status(api, issued["access_token"], user.user_id).status_code == 200

    # Not without the form's CSRF token, and nobody else can disconnect it.
    assert user.post(f"/dashboard/apps/{family_id}/revoke", {"_csrf": "forged"}).status_code == 403
    stranger = Browser(api).signup()
    assert stranger.submit("/dashboard", f"/dashboard/apps/{family_id}/revoke").status_code == 404
    assert mcp_status(api, issued["access_token"], user.user_id).status_code == 200

    assert user.submit("/dashboard", f"/dashboard/apps/{family_id}/revoke").status_code == 303
    assert mcp_status(api, issued["access_token"], user.user_id).status_code == 401
    refreshed = token_request(
        api, {"grant_type": "refresh_token", "refresh_token": issued["refresh_token"], "client_id": issued["client_id"]}
    )
    assert refreshed.status_code == 400
    assert 'data-grant-id="' not in user.get("/dashboard").text
