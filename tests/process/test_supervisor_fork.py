"""The supervisor keeps its store open across fork. That is safe because every store records
the pid that opened its connections and a forked child opens its own, never using nor closing
an inherited one (https://www.sqlite.org/howtocorrupt.html, "Carrying an open database
connection across a fork()"). This shows it for SQLite in a real fork, run in a subprocess so
that the test process (which may have threads) never forks."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import os, sqlite3, sys
    from tinyjobs.stores import open_store
    from tinyjobs.stores.base import NewJob

    store = open_store(sys.argv[1])
    store.enqueue([NewJob(id="before-fork", task="t")])
    pid = os.fork()
    if pid == 0:
        try:
            store.enqueue([NewJob(id="in-child", task="t")])   # through a connection of its own
            os._exit(0)
        except BaseException as err:
            print("child failed:", err, file=sys.stderr)
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    store.enqueue([NewJob(id="after-fork", task="t")])   # the parent's connection still works
    ids = sorted(j.id for j in store.jobs())
    assert ids == ["after-fork", "before-fork", "in-child"], ids
    path = sys.argv[1].split("://", 1)[1][1:]
    check = sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0]
    assert check == "ok", check
    print("ok")
    """
)


def test_a_store_opened_before_fork_is_not_reused_by_the_child(tmp_path):
    url = f"sqlite:///{tmp_path}/jobs.db"
    result = subprocess.run([sys.executable, "-c", SCRIPT, url], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
