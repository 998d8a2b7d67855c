"""The little HTTP the dashboard needs, on plain WSGI: a parsed request and a response.

No web framework: the dashboard is a WSGI callable that Django, Flask or an ASGI adapter
mounts as it is, so it carries no framework of its own into the host project."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs

MAX_FORM_BYTES = 1_000_000  # a bulk form of 1,000 selected ids is far below this


def _text(value: str) -> str:
    """A WSGI string (bytes carried as latin-1, PEP 3333) as the UTF-8 text it was."""
    return value.encode("latin-1").decode("utf-8", "replace")


@dataclass
class Request:
    """One request, its path relative to the dashboard's root.

    `base` is where the dashboard lives for the browser (SCRIPT_NAME, where a host framework
    mounted it, plus the prefix), so every link the pages make is `base + route`."""

    environ: dict[str, Any]
    method: str
    path: str
    base: str
    query: dict[str, str]
    _form: dict[str, list[str]] | None = field(default=None, repr=False)

    @classmethod
    def from_environ(cls, environ: dict[str, Any], prefix: str) -> Request | None:
        """The request, or None when its path lies outside `prefix`."""
        path = _text(environ.get("PATH_INFO") or "/") or "/"
        if prefix:
            if path != prefix and not path.startswith(prefix + "/"):
                return None
            path = path[len(prefix) :] or "/"
        query = {
            k: v[-1]
            for k, v in parse_qs(_text(environ.get("QUERY_STRING", "")), keep_blank_values=True).items()
        }
        base = _text(environ.get("SCRIPT_NAME", "")).rstrip("/") + prefix
        return cls(environ, environ.get("REQUEST_METHOD", "GET").upper(), path, base, query)

    def header(self, name: str) -> str | None:
        key = "HTTP_" + name.upper().replace("-", "_")
        if name.lower() == "content-type":
            key = "CONTENT_TYPE"
        value = self.environ.get(key)
        return _text(value) if value else None

    def form(self) -> dict[str, list[str]]:
        """The url-encoded body of a POST (empty for any other content type)."""
        if self._form is None:
            self._form = {}
            ctype = (self.header("Content-Type") or "").split(";")[0].strip().lower()
            try:
                length = int(self.environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            if ctype == "application/x-www-form-urlencoded" and 0 < length <= MAX_FORM_BYTES:
                body = self.environ["wsgi.input"].read(length).decode("utf-8", "replace")
                self._form = parse_qs(body, keep_blank_values=True)
        return self._form

    def field(self, name: str, default: str = "") -> str:
        values = self.form().get(name)
        return values[-1] if values else default

    @property
    def wants_json(self) -> bool:
        accept = self.header("Accept") or ""
        return "application/json" in accept and "text/html" not in accept


SECURITY_HEADERS = [
    # No inline script and no script from anywhere but this dashboard; nothing can frame it.
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "same-origin"),
]


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)

    def __call__(self, start_response: Any, head: bool = False) -> Iterable[bytes]:
        status = f"{self.status} {HTTPStatus(self.status).phrase}"
        headers = [*self.headers, *SECURITY_HEADERS, ("Content-Length", str(len(self.body)))]
        start_response(status, headers)
        return [] if head else [self.body]


def html(body: str, status: int = 200) -> Response:
    return Response(
        status,
        body.encode(),
        [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")],
    )


def json_response(value: Any, status: int = 200) -> Response:
    return Response(
        status,
        json.dumps(value, default=str).encode(),
        [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
    )


def text(body: str, status: int = 200, content_type: str = "text/plain; charset=utf-8") -> Response:
    return Response(status, body.encode(), [("Content-Type", content_type), ("Cache-Control", "no-store")])


def redirect(location: str) -> Response:
    """303: after a POST the browser GETs the page it came from."""
    return Response(303, b"", [("Location", location), ("Cache-Control", "no-store")])
