"""The tinyjobs dashboard inside a Django project, under /admin/jobs/, behind the project's login.

    TINYJOBS_URL=sqlite:///tinyjobs.db ADMIN_PASSWORD=change-me python examples/dashboard_django.py

One file for the example's sake: in a project, `jobs_dashboard` goes in a views module, the
path in urls.py, and `staff_only` is Django's own `staff_member_required`. The view hands the
request to the dashboard's WSGI application (with SCRIPT_NAME naming where it is mounted, so
its links stay under /admin/jobs) and returns its answer. `csrf_exempt` because the dashboard
refuses cross-site POSTs on its own (Origin / Sec-Fetch-Site)."""

from __future__ import annotations

import hmac
import io
import os
from collections.abc import Callable
from functools import wraps

import django
from django.conf import settings

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY=os.environ.get("DJANGO_SECRET_KEY") or os.urandom(32).hex(),
        ROOT_URLCONF=__name__,
        ALLOWED_HOSTS=["127.0.0.1", "localhost"],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
        ],
        INSTALLED_APPS=["django.contrib.sessions"],
        SESSION_ENGINE="django.contrib.sessions.backends.signed_cookies",  # no database needed
    )
    django.setup()

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import re_path
from django.views.decorators.csrf import csrf_exempt

import tinyjobs
from tinyjobs.dashboard import make_app

MOUNT = "/admin/jobs"

jobs = tinyjobs.App()  # $TINYJOBS_URL, else sqlite:///tinyjobs.db
dashboard = make_app(jobs)


def staff_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A stand-in for `django.contrib.admin.views.decorators.staff_member_required`."""

    @wraps(view)
    def check(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not request.session.get("admin"):
            return HttpResponseRedirect("/login")
        return view(request, *args, **kwargs)

    return check


@csrf_exempt
def login(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        expected = os.environ.get("ADMIN_PASSWORD", "")
        if expected and hmac.compare_digest(request.POST.get("password", ""), expected):
            request.session["admin"] = True
            return HttpResponseRedirect(MOUNT + "/")
    return HttpResponse(
        '<form method="post"><input type="password" name="password"><button>Log in</button></form>'
    )


@csrf_exempt
@staff_only
def jobs_dashboard(request: HttpRequest) -> HttpResponse:
    environ = dict(request.META)
    environ["SCRIPT_NAME"] = request.META.get("SCRIPT_NAME", "").rstrip("/") + MOUNT
    environ["PATH_INFO"] = request.META["PATH_INFO"][len(MOUNT) :] or "/"
    environ["wsgi.input"] = io.BytesIO(request.body)  # Django may have read the stream already
    answer: dict = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info=None) -> None:
        answer["status"], answer["headers"] = int(status.split()[0]), headers

    body = b"".join(dashboard(environ, start_response))
    response = HttpResponse(body, status=answer["status"])
    for name, value in answer["headers"]:
        response[name] = value
    return response


urlpatterns = [
    re_path(r"^login$", login),
    re_path(r"^admin/jobs(?:/.*)?$", jobs_dashboard),
]

if __name__ == "__main__":
    from django.core.wsgi import get_wsgi_application
    from waitress import serve

    serve(get_wsgi_application(), host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
