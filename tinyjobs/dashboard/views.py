"""The GET handlers: each page and its JSON twin under /api/, from the same data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..job import STATES
from ..stores.base import JobFilter
from . import chart
from . import metrics as prometheus
from .data import MAX_PAGE_SIZE, PAGE_SIZE
from .http import Request, Response, html, json_response, text

if TYPE_CHECKING:
    from .wsgi import Dashboard

NOTICES = {
    "retry": "{n} job(s) queued to run again.",
    "cancel": "{n} job(s) cancelled.",
    "delete": "{n} job(s) deleted.",
    "pause": "Queue paused: no worker takes its jobs until it is resumed.",
    "resume": "Queue resumed.",
    "none": "Nothing changed: no job in a state that allows it.",
}


class BadRequest(ValueError):
    """A query parameter that makes no sense; the message names it."""


def filters_of(request: Request) -> JobFilter:
    state = request.query.get("state") or None
    if state is not None and state not in STATES:
        raise BadRequest(f"state must be one of {', '.join(STATES)}, got {state!r}")
    return JobFilter(
        state=state,
        queue=request.query.get("queue") or None,
        task=request.query.get("task") or None,
        text=request.query.get("q") or None,
    )


def limit_of(request: Request) -> int:
    raw = request.query.get("limit") or str(PAGE_SIZE)
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise BadRequest(f"limit must be a whole number from 1 to {MAX_PAGE_SIZE}, got {raw!r}")
    return limit


def notice_of(request: Request) -> str | None:
    template = NOTICES.get(request.query.get("done", ""))
    if template is None:
        return None
    n = request.query.get("n", "")
    return template.format(n=n if n.isdigit() else "some")


def page(dash: Dashboard, request: Request, template: str, **context: Any) -> Response:
    return html(dash.render(request, template, notice=notice_of(request), **context))


# -- pages ------------------------------------------------------------------------------------


def overview(dash: Dashboard, request: Request) -> Response:
    stats = dash.source.stats()
    charts = {span: chart.build(stats["throughput"][span]) for span in ("hour", "day")}
    return page(dash, request, "overview.html", stats=stats, charts=charts, states=STATES, nav="overview")


def jobs(dash: Dashboard, request: Request) -> Response:
    try:
        filters, limit = filters_of(request), limit_of(request)
        found, next_cursor = dash.source.browse(filters, request.query.get("cursor") or None, limit)
    except (BadRequest, ValueError) as err:
        return dash.refuse(request, str(err), 400)
    params = {k: request.query.get(k, "") for k in ("state", "queue", "task", "q")}
    # The app's queues for the filter's suggestions: counting every queue's jobs here would
    # cost this page as much as the queues page.
    queue_names = dash.app.known_queues()
    return page(
        dash,
        request,
        "jobs.html",
        jobs=found,
        next=next_cursor,
        # A page the store's bounded search did not fill, with older jobs still to look through.
        partial=next_cursor is not None and len(found) < limit,
        params=params,
        first_page=not request.query.get("cursor"),
        states=STATES,
        queue_names=queue_names,
        task_names=sorted(dash.app.tasks),
        nav="jobs",
    )


def job(dash: Dashboard, request: Request, job_id: str) -> Response:
    data = dash.source.job(job_id)
    if data is None:
        return dash.refuse(request, f"no job {job_id}", 404)
    return page(dash, request, "job.html", job=data, nav="jobs")


def queues(dash: Dashboard, request: Request) -> Response:
    return page(dash, request, "queues.html", queues=dash.source.queues(), states=STATES, nav="queues")


def workers(dash: Dashboard, request: Request) -> Response:
    return page(dash, request, "workers.html", workers=dash.source.workers(), nav="workers")


def cron(dash: Dashboard, request: Request) -> Response:
    return page(
        dash, request, "cron.html", schedules=dash.source.cron(), has_app=bool(dash.app.tasks), nav="cron"
    )


# -- JSON -------------------------------------------------------------------------------------


def api_stats(dash: Dashboard, request: Request) -> Response:
    return json_response(dash.source.stats())


def api_jobs(dash: Dashboard, request: Request) -> Response:
    try:
        filters, limit = filters_of(request), limit_of(request)
        found, next_cursor = dash.source.browse(filters, request.query.get("cursor") or None, limit)
    except (BadRequest, ValueError) as err:
        return json_response({"error": str(err)}, 400)
    return json_response({"jobs": found, "next": next_cursor})


def api_job(dash: Dashboard, request: Request, job_id: str) -> Response:
    data = dash.source.job(job_id)
    if data is None:
        return json_response({"error": f"no job {job_id}"}, 404)
    return json_response(data)


def api_queues(dash: Dashboard, request: Request) -> Response:
    return json_response({"queues": dash.source.queues()})


def api_workers(dash: Dashboard, request: Request) -> Response:
    return json_response({"workers": dash.source.workers()})


def api_cron(dash: Dashboard, request: Request) -> Response:
    return json_response({"schedules": dash.source.cron()})


def metrics(dash: Dashboard, request: Request) -> Response:
    body = prometheus.render(dash.app.store, list(dash.app.queues), now=dash.app.clock.store_now())
    return text(body, content_type="text/plain; version=0.0.4; charset=utf-8")
