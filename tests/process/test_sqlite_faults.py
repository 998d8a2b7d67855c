"""SQLite under the faults of its disk (issue 17): the file system fills up, and processes are
killed with SIGKILL while the WAL is being checkpointed."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.wait import wait_until

HERE = Path(__file__).resolve().parent
KILLS = 15


def can_mount() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=10)
    return probe.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not can_mount(), reason="needs root and unshare -m to mount a small tmpfs")
def test_a_full_disk_fails_enqueue_clearly_loses_nothing_and_work_resumes_by_itself(tmp_path):
    mountpoint, outdir = tmp_path / "disk", tmp_path / "out"
    mountpoint.mkdir()
    outdir.mkdir()
    done = subprocess.run(
        ["unshare", "-m", sys.executable, str(HERE / "fault_diskfull.py"), str(mountpoint), str(outdir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    # enqueue raised tinyjobs' own error, saying what is wrong ...
    assert "StoreError" in facts["error_classes"], facts
    assert "full" in facts["error"] and str(mountpoint) in facts["error"]
    # ... every job it acknowledged before survived and ran once space returned, with no help ...
    assert facts["acked"] > 0 and facts["not_done"] == []
    # ... and the file is sound.
    assert facts["integrity"] == "ok"
    assert facts["worker_exit"] == 0
    log = (outdir / "worker-0.log").read_text()
    assert log.count('"store.unreachable"') == 1 and log.count('"store.reachable"') == 1


@pytest.mark.slow
def test_kill_9_during_wal_checkpoints_keeps_the_file_sound_and_every_acknowledged_job(tmp_path):
    url = f"sqlite:///{tmp_path}/jobs.db"
    acked_path = tmp_path / "acked.txt"
    rng = random.Random(17)
    kills = 0

    def acked_count() -> int:
        return len(acked_path.read_text().split()) if acked_path.exists() else 0

    for _ in range(KILLS):
        before = acked_count()
        with open(tmp_path / "enqueuer.stderr", "a") as stderr:
            script = str(HERE / "fault_checkpoint.py")
            proc = subprocess.Popen(
                [sys.executable, script, url, str(acked_path), str(kills * 1_000_000)], stderr=stderr
            )
        wait_until(lambda b=before: acked_count() > b, timeout=20, what="the enqueuer to acknowledge jobs")
        time.sleep(rng.uniform(0.0, 0.2))  # a random moment to kill at (the point of the test)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        kills += 1
    conn = sqlite3.connect(f"{tmp_path}/jobs.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = {row[0] for row in conn.execute("SELECT id FROM jobs")}
    finally:
        conn.close()
    acked = acked_path.read_text().split()
    assert len(acked) > KILLS * 20
    missing = [i for i in acked if i not in stored]
    assert missing == [], f"{len(missing)} acknowledged jobs lost after {kills} kills, e.g. {missing[:5]}"
