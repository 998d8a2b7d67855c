"""How healthy a supervisor's health document says it is (supervisor/health.py `judge`)."""

from __future__ import annotations

from tinyjobs.supervisor.health import judge

NOW = 1_800_000_000.0


def _doc(**changes):
    doc = {
        "workers": [{"pid": 1, "state": "running"}],
        "leader": True,
        "last_reap": NOW - 1,
        "store": {"reachable": True, "error": None, "since": None},
        "last_reload": None,
    }
    return {**doc, **changes}


def test_all_well_is_healthy():
    out = judge(_doc(), NOW)
    assert (out["healthy"], out["status"], out["problems"]) == (True, "healthy", [])


def test_the_store_away_with_workers_running_is_degraded_with_the_reason_and_how_long():
    store = {"reachable": False, "error": "connection refused", "since": NOW - 12}
    out = judge(_doc(store=store, leader=False), NOW)
    assert out["healthy"] is False and out["status"] == "degraded"
    assert out["problems"] == ["store unreachable for 12 s: connection refused"]


def test_the_store_away_and_no_worker_running_is_unhealthy():
    store = {"reachable": False, "error": "refused", "since": None}
    out = judge(_doc(store=store, workers=[]), NOW)
    assert out["status"] == "unhealthy" and out["problems"][0] == "no worker is running"


def test_a_failed_reload_is_degraded_and_stale_leader_duties_are_unhealthy():
    failed = judge(_doc(last_reload={"ok": False, "error": "SyntaxError"}), NOW)
    assert failed["status"] == "degraded"
    stale = judge(_doc(last_reap=NOW - 60), NOW)
    assert stale["status"] == "unhealthy" and "stale" in stale["problems"][0]
