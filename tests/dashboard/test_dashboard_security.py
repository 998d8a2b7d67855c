"""The dashboard's security promises: store data rendered as text, a CSP without inline script,
cross-site POSTs refused, read-only refusing every POST, basic auth, redaction, and no store
URL or password anywhere."""

from __future__ import annotations

import secrets
from html.parser import HTMLParser

import pytest
from support.postgres_fixtures import drop_schema, postgres_schema_url
from wsgi_client import Client

import tinyjobs
from tinyjobs.dashboard import make_app

PAYLOADS = {
    "args": "<script>window.__xss=1</script>",
    "error": '<img src=x onerror="window.__xss=2">',
    "task": "<svg/onload=window.__xss=3>",
    "queue": '"><script>window.__xss=4</script>',
    "step": "<iframe/src=javascript:alert(5)>",
}
# What the pages are allowed to contain: anything else means store text became markup.
TAGS = {
    "html",
    "head",
    "meta",
    "title",
    "link",
    "script",
    "body",
    "header",
    "a",
    "nav",
    "div",
    "span",
    "button",
    "main",
    "p",
    "h1",
    "h2",
    "section",
    "figure",
    "figcaption",
    "svg",
    "rect",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "form",
    "input",
    "label",
    "select",
    "option",
    "datalist",
    "ul",
    "ol",
    "li",
    "dl",
    "dt",
    "dd",
    "pre",
    "details",
    "summary",
    "strong",
    "code",
    "meter",
}


class Audit(HTMLParser):
    """Collects what would let markup or script in: unknown tags, event attributes, inline
    scripts, and javascript: links."""

    def __init__(self) -> None:
        super().__init__()
        self.problems: list[str] = []
        self.in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in TAGS and tag != "title":
            self.problems.append(f"tag <{tag}>")
        for name, value in attrs:
            if name.startswith("on"):
                self.problems.append(f"event attribute {name}")
            if name in ("href", "src", "action") and (value or "").strip().lower().startswith("javascript:"):
                self.problems.append(f"{name}={value}")
        if tag == "script":
            if not dict(attrs).get("src"):
                self.problems.append("inline <script>")
            self.in_script = True

    def handle_endtag(self, tag: str) -> None:
        self.in_script = False if tag == "script" else self.in_script

    def handle_data(self, data: str) -> None:
        if self.in_script and data.strip():
            self.problems.append("script content")


def audit(html: str) -> list[str]:
    parser = Audit()
    parser.feed(html)
    return parser.problems


def hostile_jobs(app: tinyjobs.App) -> str:
    @app.task(name=PAYLOADS["task"], queue=PAYLOADS["queue"], attempts=1)
    def hostile(run, note: str) -> None:
        run.step(PAYLOADS["step"], lambda: PAYLOADS["step"])
        raise RuntimeError(PAYLOADS["error"])

    job = app.enqueue(PAYLOADS["task"], {"note": PAYLOADS["args"]}, id="<b>bold-id</b>")
    app.drain()
    assert app.get(job.id).state == "failed"
    return job.id


def test_store_text_is_rendered_as_text_on_every_page(app, client) -> None:
    job_id = hostile_jobs(app)
    pages = ["/", "/jobs", "/jobs?state=failed", f"/jobs/{job_id}", "/queues", "/workers", "/cron"]
    pages += [f"/jobs?q={PAYLOADS['args']}", f"/jobs?queue={PAYLOADS['queue']}", f"/jobs/{PAYLOADS['task']}"]
    detail = client.get(f"/jobs/{job_id}").text
    for name, payload in PAYLOADS.items():
        escaped = (
            payload.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&#34;")
        )
        assert escaped in detail, f"the {name} is not shown as text"
    for page in pages:
        html = client.get(page).text
        assert audit(html) == [], page
        assert not any(payload in html for payload in PAYLOADS.values()), page
    # The bulk confirmation echoes the filter back.
    confirm = client.post("/jobs/bulk", {"action": "delete", "scope": "matching", "q": PAYLOADS["args"]}).text
    assert audit(confirm) == [] and PAYLOADS["args"] not in confirm


def test_csp_forbids_inline_script_on_every_response(app, client) -> None:
    job_id = hostile_jobs(app)
    replies = [client.get(p) for p in ("/", f"/jobs/{job_id}", "/api/stats", "/metrics", "/nowhere")]
    replies.append(Client(make_app(app, auth=("a", "b"))).get("/"))
    replies.append(client.post("/jobs/bulk", {"action": "retry"}, headers={"Origin": "http://evil.example"}))
    for reply in replies:
        csp = reply.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
        assert reply.headers["x-content-type-options"] == "nosniff"


CROSS_SITE = [
    {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
    {"Origin": "http://evil.example", "Sec-Fetch-Site": None},
    {"Origin": "http://dash.test.evil.example", "Sec-Fetch-Site": None},
    {"Origin": "null", "Sec-Fetch-Site": None},
    {"Origin": None, "Sec-Fetch-Site": "same-site"},
    {"Origin": None, "Sec-Fetch-Site": None, "Referer": "http://evil.example/page"},
]


@pytest.mark.parametrize("headers", CROSS_SITE, ids=lambda h: ",".join(f"{k}={v}" for k, v in h.items()))
def test_cross_site_posts_are_refused_and_change_nothing(app, client, headers) -> None:
    failed = app.enqueue("send", {"to": "x", "fail": True}).id
    app.drain(["mail"])
    waiting = app.enqueue("report", {"day": "d"}).id
    for path, data in [
        (f"/jobs/{failed}/retry", {}),
        (f"/jobs/{failed}/delete", {}),
        (f"/jobs/{waiting}/cancel", {}),
        ("/jobs/bulk", {"action": "delete", "id": waiting}),
        ("/jobs/bulk", {"action": "delete", "scope": "matching", "confirm": "5"}),
        ("/queues/reports/pause", {}),
    ]:
        reply = client.post(path, data, headers=headers)
        assert reply.status == 403, (path, reply.status)
    assert app.get(failed).state == "failed" and app.get(waiting).state == "waiting"
    assert app.store.paused() == set()


def test_same_origin_and_non_browser_posts_go_through(app, client) -> None:
    first, second = (app.enqueue("report", {"day": d}).id for d in "ab")
    assert client.post(f"/jobs/{first}/cancel").status == 303  # Origin and Sec-Fetch-Site of the dashboard
    # curl or a script: no Origin, no Sec-Fetch-Site, no Referer (auth, when set, still applies).
    bare = {"Origin": None, "Sec-Fetch-Site": None}
    assert client.post(f"/jobs/{second}/cancel", headers=bare).status == 303
    assert app.get(first) is None and app.get(second) is None


def test_read_only_refuses_every_post_and_shows_no_action(app) -> None:
    failed = app.enqueue("send", {"to": "x", "fail": True}).id
    app.drain(["mail"])
    client = Client(make_app(app, read_only=True))
    for path in (
        f"/jobs/{failed}/retry",
        f"/jobs/{failed}/cancel",
        f"/jobs/{failed}/delete",
        "/jobs/bulk",
        "/queues/mail/pause",
        "/queues/mail/resume",
        "/",
        "/jobs/nowhere/retry",
    ):
        assert client.post(path, {"action": "retry", "id": failed}).status == 403, path
    assert app.get(failed).state == "failed"
    for page in ("/", "/jobs", f"/jobs/{failed}", "/queues"):
        html = client.get(page).text
        assert 'method="post"' not in html and "read-only" in html, page


def test_basic_auth(app) -> None:
    dash = make_app(app, auth=("admin", "correct horse"))
    for path in ("/", "/api/stats", "/metrics", "/static/live.js"):
        reply = Client(dash).get(path)
        assert reply.status == 401 and reply.headers["www-authenticate"].startswith("Basic ")
    assert Client(dash, auth=("admin", "wrong")).get("/").status == 401
    assert Client(dash, auth=("Admin", "correct horse")).get("/").status == 401
    assert Client(dash, auth=("admin", "correct horse")).get("/").status == 200
    assert Client(dash).get("/", headers={"Authorization": "Basic !!!notbase64"}).status == 401
    checker = make_app(app, auth=lambda user, password: user == "ops" and password == "pw")
    assert Client(checker, auth=("ops", "pw")).get("/api/stats").status == 200
    assert Client(checker, auth=("ops", "no")).get("/api/stats").status == 401


def test_redaction_hook_hides_arguments(app, client) -> None:
    app.redact_args = lambda task, args: {k: ("[redacted]" if k == "to" else v) for k, v in args.items()}
    job = app.enqueue("send", {"to": "secret-address@example.com"})
    for reply in (client.get(f"/jobs/{job.id}"), client.get(f"/api/jobs/{job.id}"), client.get("/api/jobs")):
        assert "secret-address" not in reply.text and "[redacted]" in reply.text
    explicit = Client(make_app(app, redact=lambda task, args: "hidden"))
    assert explicit.get(f"/api/jobs/{job.id}").json()["args"] == "hidden"


def test_no_store_url_or_password_on_any_page(postgres_url) -> None:
    schema = f"t_{secrets.token_hex(6)}"
    password = f"pw-{secrets.token_hex(8)}"
    url = postgres_schema_url(postgres_url.replace("postgres@", f"postgres:{password}@", 1), schema)
    assert password in url
    app = tinyjobs.App(url)
    try:
        job = app.enqueue("anything", {"x": 1})
        client = Client(make_app(app))
        paths = ["/", "/jobs", f"/jobs/{job.id}", "/queues", "/workers", "/cron", "/metrics"]
        paths += [
            "/api/stats",
            "/api/jobs",
            f"/api/jobs/{job.id}",
            "/api/queues",
            "/api/workers",
            "/api/cron",
        ]
        for path in paths:
            reply = client.get(path)
            assert reply.status == 200, (path, reply.text[:300])
            assert password not in reply.text and "postgresql://" not in reply.text, path
    finally:
        app.close()
        drop_schema(postgres_url, schema)


def test_an_unreachable_store_shows_an_error_without_its_password() -> None:
    password = f"pw-{secrets.token_hex(8)}"
    client = Client(make_app(f"postgresql://app:{password}@127.0.0.1:1/nowhere"))
    for path in ("/", "/api/stats"):
        reply = client.get(path)
        assert reply.status in (500, 503) and password not in reply.text
