"""The tinyjobs dashboard inside a FastAPI app, under /admin/jobs, behind the app's own login.

    TINYJOBS_URL=sqlite:///tinyjobs.db ADMIN_PASSWORD=change-me python examples/dashboard_fastapi.py

The dashboard is a WSGI application: a2wsgi's WSGIMiddleware runs it for the ASGI server (in a
thread pool, as it blocks on the store), mounted with FastAPI's `mount`, which passes the mount
point on as SCRIPT_NAME so that its links stay under /admin/jobs. A mount bypasses FastAPI's
dependencies, so the login is checked by a middleware in front of it. The dashboard still
refuses cross-site POSTs on its own (Origin / Sec-Fetch-Site): no CSRF token needed for it.
(starlette.middleware.wsgi does the same job but is deprecated in favour of a2wsgi.)"""

from __future__ import annotations

import hmac
import os
import secrets
import urllib.parse
from collections.abc import Awaitable, Callable

from a2wsgi import WSGIMiddleware
from fastapi import FastAPI, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

import tinyjobs
from tinyjobs.dashboard import make_app

MOUNT = "/admin/jobs"
COOKIE = "admin_session"

jobs = tinyjobs.App()  # $TINYJOBS_URL, else sqlite:///tinyjobs.db
sessions: set[str] = set()  # a stand-in for your real sessions (a signed cookie, your SSO...)

web = FastAPI()


@web.middleware("http")
async def admins_only(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """Everything under the mount needs the login; the rest of the app is left alone."""
    path = request.url.path
    if (path == MOUNT or path.startswith(MOUNT + "/")) and request.cookies.get(COOKIE) not in sessions:
        return RedirectResponse("/login", status_code=303)
    return await call_next(request)


@web.get("/login", response_class=HTMLResponse)
async def login_form() -> str:
    return '<form method="post"><input type="password" name="password"><button>Log in</button></form>'


@web.post("/login")
async def login(request: Request) -> Response:
    form = urllib.parse.parse_qs((await request.body()).decode())  # no python-multipart needed
    expected = os.environ.get("ADMIN_PASSWORD", "")
    if not expected or not hmac.compare_digest(form.get("password", [""])[0], expected):
        return RedirectResponse("/login", status_code=303)
    token = secrets.token_urlsafe(32)
    sessions.add(token)
    reply = RedirectResponse(MOUNT + "/", status_code=303)
    reply.set_cookie(COOKIE, token, httponly=True, samesite="lax")
    return reply


web.mount(MOUNT, WSGIMiddleware(make_app(jobs)))  # type: ignore[arg-type]


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(web, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")), log_level="warning")
