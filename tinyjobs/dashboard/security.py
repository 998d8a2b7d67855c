"""Who may look and who may act: basic authentication and the rule for state-changing POSTs.

CSRF without tokens, as Sidekiq 8 does it: a browser says where a request comes from
(`Sec-Fetch-Site`, `Origin`, else `Referer`), and the dashboard refuses a POST that another
site made. A client that sends none of them is not a browser acting for a visitor (curl, a
script with the password), so it is let through to the auth check like any other request."""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Callable
from urllib.parse import urlsplit

from .http import Request

# What `make_app(auth=...)` accepts: (user, password), or a function(user, password) -> bool.
Auth = tuple[str, str] | Callable[[str, str], bool] | None

ENV_USER = "TINYJOBS_DASHBOARD_USER"
ENV_PASSWORD = "TINYJOBS_DASHBOARD_PASSWORD"


def check_auth(auth: Auth, request: Request) -> bool:
    """True when no auth is configured, or the request's basic credentials match (constant time)."""
    if auth is None:
        return True
    user, password = _credentials(request.header("Authorization"))
    if user is None or password is None:
        return False
    if callable(auth):
        return bool(auth(user, password))
    want_user, want_password = auth
    # Both comparisons always run, so the timing says nothing about which one failed.
    user_ok = hmac.compare_digest(user.encode(), want_user.encode())
    password_ok = hmac.compare_digest(password.encode(), want_password.encode())
    return user_ok and password_ok


def _credentials(header: str | None) -> tuple[str | None, str | None]:
    if not header or not header[:6].lower() == "basic ":
        return None, None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None, None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else (None, None)


def cross_site(request: Request) -> str | None:
    """Why a POST must be refused as coming from another site, or None when it may go on."""
    fetch_site = request.header("Sec-Fetch-Site")
    if fetch_site is not None and fetch_site.lower() not in ("same-origin", "none"):
        return f"Sec-Fetch-Site is {fetch_site!r}, not same-origin"
    own = _hosts(request)
    origin = request.header("Origin")
    if origin is not None:
        if origin == "null" or urlsplit(origin).netloc.lower() not in own:
            return "the Origin header names another site"
        return None
    referer = request.header("Referer")
    if referer is not None and urlsplit(referer).netloc.lower() not in own:
        return "the Referer header names another site"
    return None


def _hosts(request: Request) -> set[str]:
    """The host names this dashboard answers as: Host, and X-Forwarded-Host behind a proxy (a
    browser cannot set that header on a cross-site form post)."""
    hosts = {(request.header("Host") or "").lower()}
    forwarded = request.header("X-Forwarded-Host")
    if forwarded:
        hosts.add(forwarded.split(",")[0].strip().lower())
    return hosts - {""}
