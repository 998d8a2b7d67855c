"""The web dashboard and Prometheus metrics (the optional extra `tinyjobs[dashboard]`).

`make_app(app_or_url, *, read_only=False, auth=None, prefix="")` returns a WSGI application:
`tinyjobs dashboard` serves it with waitress, and a Django, Flask or (through a WSGI adapter)
FastAPI project mounts it under its own URL, behind its own login. Its web libraries (Jinja2,
waitress) are imported here only when it is used, so the core never needs them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..app import App
    from .data import Redact
    from .security import Auth
    from .wsgi import Dashboard

__all__ = ["make_app"]


def make_app(
    app_or_url: App | str,
    *,
    read_only: bool = False,
    auth: Auth = None,
    prefix: str = "",
    redact: Redact | None = None,
) -> Dashboard:
    """The dashboard of an App (or of the store at a URL) as a WSGI application.

    - `read_only`: no action buttons, and every POST is answered 403.
    - `auth`: (user, password) for basic authentication, or a function(user, password) -> bool;
      None leaves authentication to whatever mounts it.
    - `prefix`: serve under this path (`/jobs`) when the server hands over full paths; a host
      framework that sets SCRIPT_NAME needs none.
    - `redact`: fn(task, args) -> what to show instead of a job's arguments (default: the
      app's `redact_args` attribute, if it has one).
    """
    from ..app import App

    try:
        from .wsgi import Dashboard
    except ModuleNotFoundError as err:
        if err.name in ("jinja2", "markupsafe"):
            raise ModuleNotFoundError(
                "the dashboard needs the optional extra: pip install 'tinyjobs[dashboard]'", name=err.name
            ) from None
        raise
    app = app_or_url if isinstance(app_or_url, App) else App(app_or_url)
    return Dashboard(app, read_only=read_only, auth=auth, prefix=prefix.rstrip("/"), redact=redact)
