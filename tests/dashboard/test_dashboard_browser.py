"""The dashboard in a real browser: Debian's chromium driven headless by selenium through
/usr/bin/chromedriver (no browser download), against `tinyjobs dashboard` and a real
`tinyjobs worker`, both as processes.

Screenshots of each page go to $TINYJOBS_SCREENSHOTS when set (docs/screenshots/ keeps them)."""

from __future__ import annotations

import http.server
import os
import shutil
import sys
import threading
from pathlib import Path

import pytest
from served import Served
from support.processes import WorkerProcesses, import_app
from support.services import require_module
from support.wait import wait_until

require_module("selenium")  # before the imports below: a missing selenium skips, or fails in CI
from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

HERE = Path(__file__).parent
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser():
    if not (os.path.exists(CHROMEDRIVER) and os.path.exists(CHROMIUM)):
        if IN_CI:
            pytest.fail("chromium and chromium-driver are missing and CI=true: .ci/run installs them")
        pytest.skip(
            "chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--force-prefers-reduced-motion",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


class Shots:
    def __init__(self, driver, tmp: Path) -> None:
        self.driver = driver
        self.folder = Path(os.environ.get("TINYJOBS_SCREENSHOTS") or tmp)
        self.folder.mkdir(parents=True, exist_ok=True)

    def take(self, name: str) -> None:
        assert self.driver.save_screenshot(str(self.folder / f"dashboard-{name}.png"))


def read(driver, css: str) -> str | None:
    """The rendered text of the element (None when absent), read in one step: the live
    refresh may swap the element at any moment."""
    script = "const e = document.querySelector(arguments[0]); return e && e.innerText;"
    found = driver.execute_script(script, css)
    return None if found is None else found.strip()


def text(driver, css: str) -> str:
    found = read(driver, css)
    assert found is not None, f"no element {css} on {driver.current_url}"
    return found


def shows(driver, css: str, expected: str, timeout: float = 15) -> None:
    """Wait until the element exists and its text contains `expected` (after a click, the
    page that answers replaces the current one when it arrives)."""
    wait_until(lambda: expected in (read(driver, css) or ""), timeout=timeout, what=f"{expected!r} in {css}")


def click(driver, by: str, value: str) -> None:
    """Click, finding the element again if the live refresh replaced it meanwhile."""

    def attempt() -> bool:
        try:
            driver.find_element(by, value).click()
            return True
        except StaleElementReferenceException:
            return False

    wait_until(attempt, timeout=10, what=f"a click on {value}")


def test_operator_flow_in_a_real_browser(browser, tmp_path) -> None:
    workers = WorkerProcesses(tmp_path, "browserapp:app", HERE)
    app = import_app("browserapp", HERE, workers.url)
    shots = Shots(browser, tmp_path)
    os.environ["TJ_TEST_DIR"] = str(tmp_path)  # for the in-process drain below
    failed = [app.enqueue("deliver", {"to": f"user{i}@example.com"}).id for i in range(3)]
    hostile = app.enqueue("hostile", {"note": sys.modules["browserapp"].XSS_ARGS}).id
    app.drain(["mail"])
    assert {app.get(i).state for i in [*failed, hostile]} == {"failed"}
    for day in ("2026-11-29", "2026-11-30"):
        app.enqueue("report", {"day": day})
    app.drain(["reports"])

    env = {"TINYJOBS_URL": workers.url, "PYTHONPATH": str(HERE), "TJ_TEST_DIR": str(tmp_path)}
    served = Served("dashboard", "--app", "browserapp:app", "--port", "0", env=env, cwd=str(tmp_path))
    base = served.address
    try:
        # Overview: counts per state, the failures at a glance.
        browser.get(base)
        assert browser.title.startswith("Overview")
        assert text(browser, '.value[data-state="failed"]') == "4"
        assert failed[0] in text(browser, "#live-failures")
        shots.take("overview")

        # Jobs: filter the failed ones through the form.
        browser.get(base + "jobs")
        Select(browser.find_element(By.ID, "filter-state")).select_by_value("failed")
        browser.find_element(By.ID, "filter-q").send_keys("SMTP")
        click(browser, By.ID, "filter-apply")
        wait_until(lambda: "state=failed" in browser.current_url, what="the filtered jobs page")
        ids = "return [...document.querySelectorAll('tr.job')].map(row => row.dataset.id)"
        wait_until(lambda: len(browser.execute_script(ids)) == 3, what="the three failed jobs")
        assert sorted(browser.execute_script(ids)) == sorted(failed)
        shots.take("jobs")

        # A job: its error, then retry it and watch it run on a real worker (live refresh).
        click(browser, By.LINK_TEXT, failed[0])
        shows(browser, "#job-error", "451 try again later")
        shots.take("job")
        (tmp_path / "fixed").touch()
        click(browser, By.XPATH, "//button[text()='Retry']")
        shows(browser, ".notice", "queued to run again")
        worker = workers.start("--slots", "2")
        wait_until(
            lambda: text(browser, "#live-job .summary .state") == "done",
            timeout=30,
            what="the retried job shown done without a reload",
        )
        assert '"delivered": "user0@example.com"' in text(browser, "#job-result")
        outcomes = "return [...document.querySelectorAll('#executions .outcome')].map(e => e.textContent)"
        assert browser.execute_script(outcomes) == ["error", "done"]

        # Queues: pause one; the worker stops taking its jobs while it takes others.
        browser.get(base + "queues")
        click(browser, By.CSS_SELECTOR, 'tr[data-queue="reports"] button')
        shows(browser, 'tr[data-queue="reports"]', "paused")
        held = app.enqueue("report", {"day": "2026-12-01"}).id
        passing = app.enqueue("deliver", {"to": "after-pause@example.com"}).id
        wait_until(lambda: app.get(passing).state == "done", timeout=30, what="the mail job to run")
        assert app.get(held).state == "waiting"
        shots.take("queues")
        click(browser, By.CSS_SELECTOR, 'tr[data-queue="reports"] button')
        wait_until(lambda: app.get(held).state == "done", timeout=30, what="the resumed queue's job")

        # The live refresh pauses on the button, stays paused across pages, and resumes.
        browser.find_element(By.ID, "live-toggle").click()
        assert text(browser, "#live-toggle") == "paused"
        browser.get(base + "queues")
        toggle = browser.find_element(By.ID, "live-toggle")
        assert toggle.text == "paused" and toggle.get_attribute("aria-pressed") == "true"
        toggle.click()
        assert text(browser, "#live-toggle") == "live"
        wait_until(
            lambda: browser.execute_script("return document.body.dataset.refreshed"),
            timeout=15,
            what="a live refresh after resuming",
        )

        # Workers: the live worker process.
        browser.get(base + "workers")
        wait_until(
            lambda: str(worker.pid) in text(browser, "#live-workers"),
            timeout=30,
            what="the worker on the workers page",
        )
        shots.take("workers")
        browser.get(base + "cron")
        assert "*/15 * * * *" in text(browser, "#live-cron")
        shots.take("cron")

        # XSS: the hostile job's data shows as text and no script ran.
        browser.get(base + f"jobs/{hostile}")
        assert "<script>window.__xss" in text(browser, "#job-args")
        assert "<img src=x onerror=" in text(browser, "#job-error")
        assert "<b>step</b>" in text(browser, "#steps")
        browser.get(base + "jobs?state=failed")
        assert browser.execute_script("return typeof window.__xss") == "undefined"

        # CSRF: a page on another origin posts a pause form to the dashboard: refused.
        evil = EvilSite(base + "queues/mail/pause")
        try:
            browser.get(evil.url)
            wait_until(lambda: browser.current_url.startswith(base), timeout=15, what="the cross-site post")
            assert "refused" in text(browser, "#error-message")
        finally:
            evil.close()
        assert "mail" not in app.store.paused()
    finally:
        assert served.stop() == 0
        workers.stop_all()

    # Read-only: no action on any page, and a POST from the page itself is refused.
    read_only = Served(
        "dashboard", "--app", "browserapp:app", "--port", "0", "--read-only", env=env, cwd=str(tmp_path)
    )
    try:
        browser.get(read_only.address + f"jobs/{failed[1]}")
        assert text(browser, "#read-only") == "read-only"
        assert browser.find_elements(By.CSS_SELECTOR, "form[method=post]") == []
        retry = f"{read_only.address}jobs/{failed[1]}/retry"
        status = browser.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            f"fetch('{retry}', {{method: 'POST'}}).then(r => done(r.status));"
        )
        assert status == 403 and app.get(failed[1]).state == "failed"
        shots.take("read-only")
    finally:
        assert read_only.stop() == 0
        app.close()


class EvilSite:
    """Another origin (another port) whose page posts a form to `target` as soon as it loads."""

    def __init__(self, target: str) -> None:
        page = (
            f'<form id="f" method="post" action="{target}"><input name="next" value="/"></form>'
            "<script>document.getElementById('f').submit()</script>"
        ).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args) -> None:
                pass

        # Threads: the browser keeps idle (preconnected) sockets open, which would block a
        # single-threaded server's shutdown.
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://localhost:{self.server.server_port}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
