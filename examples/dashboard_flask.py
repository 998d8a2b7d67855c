"""The tinyjobs dashboard inside a Flask app, under /admin/jobs, behind the app's own login.

    TINYJOBS_URL=sqlite:///tinyjobs.db ADMIN_PASSWORD=change-me python examples/dashboard_flask.py

The dashboard is a WSGI application: the view below hands it the request (with SCRIPT_NAME
naming where it is mounted, so its links stay under /admin/jobs) and returns its answer. The
dashboard still refuses cross-site POSTs on its own (Origin / Sec-Fetch-Site), so Flask needs
no CSRF token for it."""

from __future__ import annotations

import hmac
import os

from flask import Flask, Response, redirect, request, session, url_for
from werkzeug.wrappers import Response as WerkzeugResponse

import tinyjobs
from tinyjobs.dashboard import make_app

MOUNT = "/admin/jobs"

jobs = tinyjobs.App()  # $TINYJOBS_URL, else sqlite:///tinyjobs.db
dashboard = make_app(jobs)

web = Flask(__name__)
web.secret_key = os.environ.get("FLASK_SECRET_KEY") or os.urandom(32)


@web.route("/login", methods=["GET", "POST"])
def login() -> WerkzeugResponse | str:
    """A stand-in for your real login (Flask-Login, your SSO...)."""
    if request.method == "POST":
        expected = os.environ.get("ADMIN_PASSWORD", "")
        if expected and hmac.compare_digest(request.form.get("password", ""), expected):
            session["admin"] = True
            return redirect(url_for("jobs_dashboard", path=""))
    return '<form method="post"><input type="password" name="password"><button>Log in</button></form>'


@web.route(f"{MOUNT}/", defaults={"path": ""}, methods=["GET", "POST"])
@web.route(f"{MOUNT}/<path:path>", methods=["GET", "POST"])
def jobs_dashboard(path: str) -> WerkzeugResponse:
    if not session.get("admin"):
        return redirect(url_for("login"))
    environ = dict(request.environ)
    environ["SCRIPT_NAME"] = request.script_root + MOUNT
    environ["PATH_INFO"] = environ["PATH_INFO"][len(MOUNT) :] or "/"  # the raw path, not `path`
    return Response.from_app(dashboard, environ)


if __name__ == "__main__":
    from waitress import serve

    serve(web, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
