"""The dashboard as one WSGI application: routing under a prefix, authentication, the POST rule,
static files, and errors that never show a store URL.

Order of checks on every request: inside the prefix (else 404), authenticated (else 401),
then for a POST: read-only (403) and from this site (403); only then does a handler run."""

from __future__ import annotations

import re
import sys
import traceback
from collections.abc import Callable, Iterable
from importlib import resources
from typing import Any

from ..app import App
from ..errors import TinyjobsError
from ..urls import mask
from . import actions, views
from .data import Redact, Source
from .http import Request, Response, html, json_response, text
from .security import Auth, check_auth, cross_site
from .templates import Renderer

Handler = Callable[..., Response]

# (method, pattern, handler); a pattern's groups are the handler's arguments.
ROUTES: list[tuple[str, re.Pattern[str], Handler]] = [
    ("GET", re.compile(r"/"), views.overview),
    ("GET", re.compile(r"/jobs"), views.jobs),
    ("GET", re.compile(r"/jobs/(.+)"), views.job),
    ("GET", re.compile(r"/queues"), views.queues),
    ("GET", re.compile(r"/workers"), views.workers),
    ("GET", re.compile(r"/cron"), views.cron),
    ("GET", re.compile(r"/api/stats"), views.api_stats),
    ("GET", re.compile(r"/api/jobs"), views.api_jobs),
    ("GET", re.compile(r"/api/jobs/(.+)"), views.api_job),
    ("GET", re.compile(r"/api/queues"), views.api_queues),
    ("GET", re.compile(r"/api/workers"), views.api_workers),
    ("GET", re.compile(r"/api/cron"), views.api_cron),
    ("GET", re.compile(r"/metrics"), views.metrics),
    ("POST", re.compile(r"/jobs/bulk"), actions.bulk),
    ("POST", re.compile(r"/jobs/(.+)/(retry|cancel|delete)"), actions.job_action),
    ("POST", re.compile(r"/queues/(.+)/(pause|resume)"), actions.queue_action),
]

STATIC_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


class Dashboard:
    """The WSGI application `make_app` returns."""

    def __init__(
        self,
        app: App,
        *,
        read_only: bool = False,
        auth: Auth = None,
        prefix: str = "",
        redact: Redact | None = None,
    ) -> None:
        if prefix and (not prefix.startswith("/") or prefix.endswith("/") or "//" in prefix):
            raise ValueError(f"prefix must start with / and not end with one (such as /jobs), got {prefix!r}")
        self.app = app
        self.source = Source(app, redact)
        self.read_only = read_only
        self.auth = auth
        self.prefix = prefix
        self.renderer = Renderer()
        self.static = _load_static()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        request = Request.from_environ(environ, self.prefix)
        head = environ.get("REQUEST_METHOD", "GET").upper() == "HEAD"
        if request is None:
            return text("not found\n", 404)(start_response, head)
        if head:
            request.method = "GET"
        return self.respond(request)(start_response, head)

    def respond(self, request: Request) -> Response:
        if not check_auth(self.auth, request):
            response = text("authentication required\n", 401)
            response.headers.append(("WWW-Authenticate", 'Basic realm="tinyjobs", charset="UTF-8"'))
            return response
        if request.path.startswith("/static/"):
            return self._static(request.path[len("/static/") :])
        if request.method == "POST":
            if self.read_only:
                return self.refuse(request, "the dashboard is read-only", 403)
            reason = cross_site(request)
            if reason is not None:
                return self.refuse(request, f"refused: {reason}", 403)
        allowed = set()
        for method, pattern, handler in ROUTES:
            match = pattern.fullmatch(request.path)
            if match is None:
                continue
            if method != request.method:
                allowed.add(method)
                continue
            try:
                return handler(self, request, *match.groups())
            except TinyjobsError as err:
                return self.refuse(request, mask(str(err)), 503)
            except Exception:
                # The trace goes to the server's log with passwords masked; the page says little.
                print(mask(traceback.format_exc()), file=sys.stderr)
                return self.refuse(request, "internal error (see the dashboard's log)", 500)
        if allowed:
            response = self.refuse(request, "method not allowed", 405)
            if "GET" in allowed:
                allowed.add("HEAD")
            response.headers.append(("Allow", ", ".join(sorted(allowed))))
            return response
        return self.refuse(request, "not found", 404)

    def refuse(self, request: Request, message: str, status: int) -> Response:
        if request.wants_json or request.path.startswith("/api/") or request.path == "/metrics":
            return json_response({"error": message}, status)
        return html(self.render(request, "error.html", message=message, status=status), status)

    def render(self, request: Request, template: str, **context: Any) -> str:
        values: dict[str, Any] = {"nav": "", "notice": None}
        values.update(context)
        return self.renderer.render(
            template, base=request.base, read_only=self.read_only, request=request, **values
        )

    def _static(self, name: str) -> Response:
        body = self.static.get(name)
        if body is None:
            return text("not found\n", 404)
        suffix = name[name.rfind(".") :]
        return Response(
            200,
            body,
            [
                ("Content-Type", STATIC_TYPES.get(suffix, "application/octet-stream")),
                ("Cache-Control", "public, max-age=3600"),
            ],
        )


def _load_static() -> dict[str, bytes]:
    """The static files, read once: only these names are ever served (no path is joined)."""
    folder = resources.files("tinyjobs.dashboard") / "static"
    return {entry.name: entry.read_bytes() for entry in folder.iterdir() if entry.is_file()}
