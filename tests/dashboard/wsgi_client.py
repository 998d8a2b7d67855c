"""Calling a WSGI application in-process, as a server would, for the dashboard's tests."""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode()

    def json(self) -> Any:
        assert self.headers["content-type"].startswith("application/json"), self.headers
        return json.loads(self.body)


class Client:
    """GET and POST on a WSGI app as the browser at `origin` would: a POST carries that
    Origin and `Sec-Fetch-Site: same-origin` unless the test says otherwise."""

    def __init__(self, app: Any, host: str = "dash.test", auth: tuple[str, str] | None = None) -> None:
        self.app, self.host, self.auth = app, host, auth

    def request(
        self,
        method: str,
        url: str,
        data: dict[str, Any] | list[tuple[str, str]] | None = None,
        headers: dict[str, str] | None = None,
        script_name: str = "",
    ) -> Reply:
        parts = urlsplit(url)
        body = urlencode(data or {}, doseq=True).encode()
        environ: dict[str, Any] = {
            "REQUEST_METHOD": method,
            "SCRIPT_NAME": script_name,
            "PATH_INFO": unquote(parts.path).encode().decode("latin-1"),  # as servers do
            "QUERY_STRING": parts.query,
            "SERVER_NAME": self.host,
            "SERVER_PORT": "80",
            "HTTP_HOST": self.host,
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "CONTENT_LENGTH": str(len(body)),
            "CONTENT_TYPE": "application/x-www-form-urlencoded" if method == "POST" else "",
        }
        if self.auth:
            token = base64.b64encode(f"{self.auth[0]}:{self.auth[1]}".encode()).decode()
            environ["HTTP_AUTHORIZATION"] = f"Basic {token}"
        for name, value in (headers or {}).items():
            key = name.upper().replace("-", "_")
            if value is None:
                environ.pop(f"HTTP_{key}", None)
            else:
                environ[f"HTTP_{key}"] = value
        seen: dict[str, Any] = {}

        def start_response(status: str, response_headers: list[tuple[str, str]]) -> None:
            seen["status"] = int(status.split()[0])
            seen["headers"] = {k.lower(): v for k, v in response_headers}

        chunks = self.app(environ, start_response)
        out = b"".join(chunks)
        return Reply(seen["status"], seen["headers"], out)

    def get(self, url: str, **kw: Any) -> Reply:
        return self.request("GET", url, **kw)

    def post(self, url: str, data: Any = None, headers: dict[str, str] | None = None, **kw: Any) -> Reply:
        sent = {"Origin": f"http://{self.host}", "Sec-Fetch-Site": "same-origin", **(headers or {})}
        return self.request("POST", url, data, sent, **kw)

    def post_json(self, url: str, data: Any = None, **kw: Any) -> Reply:
        return self.post(url, data, headers={"Accept": "application/json"}, **kw)
