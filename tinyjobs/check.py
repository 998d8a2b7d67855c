"""`tinyjobs check`: the durability audit of a store, as a report.

Each store has its own audit (`tinyjobs.stores.<kind>.audit.audit(url) -> list[Finding]`),
imported only when its scheme is used. A finding is PASS, FAIL, WARN or NOT CHECKED and names
the setting, what was seen and the remedy. FAIL makes the report fail (exit 1); WARN and NOT
CHECKED are printed but leave it ok. `store_warnings=True` shows the store's FAIL items as WARN
(a development setup that breaks the guarantees on purpose). A store that cannot be reached or
refuses us raises StoreUnavailable (exit 2 at the CLI).

Supervisor health (`tinyjobs check --socket`) joins the verdict through `health_findings`, which
turns the health document that the supervisor serves into findings; `Report.add` merges them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from importlib import import_module
from urllib.parse import unquote

from .errors import TinyjobsError
from .findings import FAIL, PASS, STATUSES, WARN, Finding, failed, not_checked, passed, warned
from .urls import mask, split, store_kind

_AUDITS = {
    "sqlite": "tinyjobs.stores.sqlite.audit",
    "postgres": "tinyjobs.stores.postgres.audit",
    "redis": "tinyjobs.stores.redis.audit",
}
_SECRET_PARAMS = {"password", "pass", "pwd", "secret", "token", "sslpassword"}


@dataclass
class Report:
    """The audit of one store (and, with a socket, one supervisor). `url` is masked."""

    url: str
    store: str
    findings: list[Finding] = field(default_factory=list)
    secrets: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """True when no finding is FAIL."""
        return not any(f.status == FAIL for f in self.findings)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def add(self, findings: list[Finding]) -> None:
        """Merge more findings (for example the supervisor's health) into the verdict."""
        self.findings.extend(_scrub_finding(f, self.secrets) for f in findings)

    def counts(self) -> dict[str, int]:
        return {status: sum(f.status == status for f in self.findings) for status in STATUSES}

    def to_dict(self) -> dict:
        """The report for `--json`: ok, exit_code, url (masked), store, counts, findings."""
        return {
            "ok": self.ok,
            "exit_code": self.exit_code,
            "url": self.url,
            "store": self.store,
            "counts": self.counts(),
            "findings": [asdict(f) for f in self.findings],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def render(self) -> str:
        """A readable text report: one block per finding, then the verdict."""
        lines = [f"tinyjobs check {self.url} ({self.store})"]
        for f in self.findings:
            lines.append(f"{f.status:<11} {f.setting}: {f.seen}")
            if f.downgraded:
                lines.append(f"{'':<11}   (a FAIL, shown as WARN by --store-warnings)")
            if f.remedy and f.status != PASS:
                lines.append(f"{'':<11}   remedy: {f.remedy}")
        counts = ", ".join(f"{n} {status}" for status, n in self.counts().items() if n)
        lines.append(("ok" if self.ok else "FAILED") + (f": {counts}" if counts else ""))
        return "\n".join(lines)

    __str__ = render


def url_secrets(url: str) -> tuple[str, ...]:
    """The passwords a URL holds (userinfo and secret query parameters), raw and unquoted, so
    that any message quoting them can be scrubbed."""
    try:
        _, netloc, _, query = split(url)
    except Exception:  # a malformed URL: mask() is all we can do
        return ()
    found: list[str] = []
    userinfo = netloc.rpartition("@")[0] if "@" in netloc else ""
    if ":" in userinfo:
        found.append(userinfo.split(":", 1)[1])
    found += [v for k, v in query.items() if k.lower() in _SECRET_PARAMS]
    variants = {s for s in found if s} | {unquote(s) for s in found if s}
    return tuple(sorted(variants, key=len, reverse=True))


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """`text` with every secret replaced by ***."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def _scrub_finding(finding: Finding, secrets: tuple[str, ...]) -> Finding:
    if not secrets:
        return finding
    return replace(
        finding,
        setting=scrub(finding.setting, secrets),
        seen=scrub(finding.seen, secrets),
        remedy=scrub(finding.remedy, secrets),
    )


def apply_store_warnings(findings: list[Finding]) -> list[Finding]:
    """The store's FAIL findings as WARN (marked downgraded); everything else unchanged."""
    return [
        replace(f, status=WARN, downgraded=True) if f.status == FAIL and f.source == "store" else f
        for f in findings
    ]


def _memory_findings() -> list[Finding]:
    return [
        failed(
            "store",
            "memory:// keeps jobs in one process's memory; nothing survives its exit",
            "use sqlite:///path.db, postgresql://... or redis://... outside tests",
        )
    ]


def audit_url(url: str, store_warnings: bool = False) -> Report:
    """Audit the store that `url` names. ConfigError for a bad URL, StoreUnavailable for a store
    that cannot be reached or refuses us; both messages are masked."""
    kind = store_kind(url)
    secrets = url_secrets(url)
    try:
        if kind == "memory":
            findings = _memory_findings()
        else:
            findings = import_module(_AUDITS[kind]).audit(url)
    except TinyjobsError as err:
        raise type(err)(scrub(str(err), secrets)) from None
    if store_warnings:
        findings = apply_store_warnings(findings)
    report = Report(url=mask(url), store=kind, secrets=secrets)
    report.add(findings)
    return report


# --- supervisor health (the socket client belongs to the supervisor) --------------------------


def health_findings(health: dict) -> list[Finding]:
    """Findings from the supervisor's health document (SUP-09): its workers, their heartbeats,
    the store's reachability. Tolerant of missing keys: what is absent is NOT CHECKED."""
    out: list[Finding] = []
    workers = health.get("workers")
    if not isinstance(workers, list):
        out.append(not_checked("supervisor.workers", "the health document lists no workers"))
    elif not workers:
        out.append(failed("supervisor.workers", "no worker is running", "see the journal"))
    else:
        out.append(passed("supervisor.workers", f"{len(workers)} running"))
    store = health.get("store")
    reachable = store.get("reachable") if isinstance(store, dict) else store
    if reachable is None:
        out.append(not_checked("supervisor.store", "the health document does not say"))
    elif reachable:
        out.append(passed("supervisor.store", "reachable"))
    else:
        error = store.get("error", "") if isinstance(store, dict) else ""
        seen = f"unreachable {error}".strip()
        if health.get("status") == "degraded":
            # The workers wait with backoff and resume by themselves when the store is back.
            remedy = "check the store; the workers resume by themselves once it answers"
            out.append(warned("supervisor.store", seen, remedy))
        else:
            out.append(failed("supervisor.store", seen, "check the store and the supervisor's URL"))
    for problem in health.get("problems") or []:
        if "leader" in str(problem):  # workers and store are reported above
            out.append(failed("supervisor.leader", str(problem), "see the supervisor's journal"))
    reload = health.get("last_reload")
    if isinstance(reload, dict) and reload.get("ok") is False:
        # Degraded: the workers still run the code loaded before, not what is on disk.
        out.append(
            warned(
                "supervisor.reload",
                f"the last reload failed, the workers run the code loaded before: {reload.get('error')}",
                "fix the app so that it imports, then systemctl reload again (see the journal)",
            )
        )
    return [replace(f, source="supervisor") for f in out]
