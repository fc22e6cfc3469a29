"""The grant types and client authentication methods this OAuth server knows (RFC 6749, 7591 and 8628). Pure, and
light to import: ``engram oauth clients`` and ``engram sync clients`` read them without loading authlib."""

from __future__ import annotations

PUBLIC = "none"
SECRET_METHODS = ("client_secret_basic", "client_secret_post")
AUTH_METHODS = (PUBLIC, *SECRET_METHODS)
CODE_GRANTS = ("authorization_code", "refresh_token")
MACHINE_GRANT = "client_credentials"
# RFC 8628: a device (an Engram node linking for sync) shows a code that a person approves on the server's web page.
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
