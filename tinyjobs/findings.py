"""One audited item of `tinyjobs check`, and the four ways it can turn out.

A leaf: the stores' audit modules build findings here without importing the orchestration in
`tinyjobs.check`, which imports them."""

from __future__ import annotations

from dataclasses import dataclass

PASS = "PASS"
FAIL = "FAIL"
WARN = "WARN"
NOT_CHECKED = "NOT CHECKED"
STATUSES = (FAIL, WARN, NOT_CHECKED, PASS)


@dataclass(frozen=True)
class Finding:
    """One audited item: `setting` is what was read (e.g. `appendonly`), `seen` its value as
    found, `remedy` what to change (empty on PASS). `source` is "store" or "supervisor".
    `downgraded` marks a FAIL shown as WARN by store_warnings."""

    status: str
    setting: str
    seen: str
    remedy: str = ""
    source: str = "store"
    downgraded: bool = False

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown finding status {self.status!r}")


def passed(setting: str, seen: str) -> Finding:
    return Finding(PASS, setting, seen)


def failed(setting: str, seen: str, remedy: str) -> Finding:
    return Finding(FAIL, setting, seen, remedy)


def warned(setting: str, seen: str, remedy: str) -> Finding:
    return Finding(WARN, setting, seen, remedy)


def not_checked(setting: str, reason: str, remedy: str = "") -> Finding:
    return Finding(NOT_CHECKED, setting, reason, remedy)
