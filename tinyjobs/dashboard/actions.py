"""The POST handlers: retry, cancel or delete a job, the same on many, pause and resume a queue.

They run only after the dashboard checked auth, read-only mode and that the request comes from
this site (wsgi.Dashboard.respond). A browser's form post is answered with a redirect to the
page it came from; a client that asks for JSON gets JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from ..job import STATES
from ..stores.base import JobFilter
from .data import BULK_LIMIT, MAX_PAGE_SIZE
from .http import Request, Response, html, json_response, redirect
from .views import BadRequest

if TYPE_CHECKING:
    from .wsgi import Dashboard

ACTIONS = ("retry", "cancel", "delete")


def _apply(dash: Dashboard, action: str, job_id: str) -> bool:
    if action == "retry":
        return dash.app.retry(job_id)
    if action == "cancel":
        return dash.app.cancel(job_id)
    return dash.app.delete(job_id)


def _back(request: Request, fallback: str, **notice: Any) -> Response:
    """Redirect to the form's `next` when it is a page of this dashboard, else to `fallback`."""
    target = request.field("next")
    if not (target.startswith(request.base + "/") and not target.startswith("//") and "\\" not in target):
        target = request.base + fallback
    if notice:
        target += ("&" if "?" in target else "?") + urlencode(notice)
    return redirect(target)


def job_action(dash: Dashboard, request: Request, job_id: str, action: str) -> Response:
    changed = _apply(dash, action, job_id)
    if request.wants_json:
        return json_response({"ok": changed, "action": action, "id": job_id}, 200 if changed else 409)
    notice = {"done": action if changed else "none", "n": int(changed)}
    if dash.app.get(job_id, executions=False) is None:  # deleted, or cancelled while waiting
        return redirect(f"{request.base}/jobs?{urlencode(notice)}")
    return _back(request, f"/jobs/{quote(job_id, safe='')}", **notice)


def queue_action(dash: Dashboard, request: Request, queue: str, action: str) -> Response:
    if action == "pause":
        dash.app.pause(queue)
    else:
        dash.app.resume(queue)
    if request.wants_json:
        return json_response({"ok": True, "action": action, "queue": queue})
    return _back(request, "/queues", done=action)


def bulk(dash: Dashboard, request: Request) -> Response:
    """`action` on the selected `id`s, or, with `scope=matching`, on every job that matches the
    filter fields (state, queue, task, q), at most BULK_LIMIT. Matching needs a confirmation:
    without `confirm` the answer is the count (a page with a confirm button, or JSON); with
    `confirm=N` the action applies to at most N of the matching jobs."""
    action = request.field("action")
    if action not in ACTIONS:
        return dash.refuse(request, f"action must be one of {', '.join(ACTIONS)}, got {action!r}", 400)
    if request.field("scope") == "matching":
        try:
            filters = _filters(request)
        except BadRequest as err:
            return dash.refuse(request, str(err), 400)
        ids = _matching(dash, filters, BULK_LIMIT + 1)
        confirm = request.field("confirm")
        if not confirm.isdigit():
            return _confirm(dash, request, action, filters, len(ids))
        ids = ids[: min(int(confirm), BULK_LIMIT)]
    else:
        ids = request.form().get("id", [])
        if len(ids) > BULK_LIMIT:
            return dash.refuse(request, f"at most {BULK_LIMIT} jobs at once, got {len(ids)}", 400)
    changed = sum(1 for job_id in ids if _apply(dash, action, job_id))
    if request.wants_json:
        return json_response({"ok": True, "action": action, "asked": len(ids), "changed": changed})
    return _back(request, "/jobs", done=action if changed else "none", n=changed)


def _filters(request: Request) -> JobFilter:
    state = request.field("state") or None
    if state is not None and state not in STATES:
        raise BadRequest(f"state must be one of {', '.join(STATES)}, got {state!r}")
    return JobFilter(
        state=state,
        queue=request.field("queue") or None,
        task=request.field("task") or None,
        text=request.field("q") or None,
    )


def _matching(dash: Dashboard, filters: JobFilter, bound: int) -> list[str]:
    """Ids of the jobs matching `filters`, newest first, at most `bound`."""
    ids: list[str] = []
    cursor = None
    while len(ids) < bound:
        jobs, cursor = dash.app.store.browse(
            filters, cursor=cursor, limit=min(MAX_PAGE_SIZE, bound - len(ids)), now=dash.app.clock.store_now()
        )
        ids.extend(job.id for job in jobs)
        if cursor is None:
            break
    return ids


def _confirm(dash: Dashboard, request: Request, action: str, filters: JobFilter, count: int) -> Response:
    over = count > BULK_LIMIT
    count = min(count, BULK_LIMIT)
    if request.wants_json:
        return json_response(
            {"confirm": True, "action": action, "matching": count, "more": over, "limit": BULK_LIMIT}
        )
    fields = {"state": filters.state, "queue": filters.queue, "task": filters.task, "q": filters.text}
    return html(
        dash.render(
            request,
            "confirm.html",
            action=action,
            count=count,
            more=over,
            limit=BULK_LIMIT,
            fields={k: v for k, v in fields.items() if v},
            next=request.field("next"),
            notice=None,
            nav="jobs",
        )
    )
