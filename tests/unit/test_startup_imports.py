"""What a process imports before it does anything: `tinyjobs supervise` is on the path from a
deploy to the first job started (benchmarks/startup.py), and `import tinyjobs` on every web
process's start. Each check runs a fresh interpreter, as a user's process starts."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

import tinyjobs


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running `code`."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_the_version_the_supervisor_reports_is_the_installed_one():
    # The supervisor logs and serves tinyjobs.__version__ rather than asking importlib.metadata.
    assert tinyjobs.__version__ == importlib.metadata.version("tinyjobs")


def test_import_tinyjobs_loads_neither_asyncio_nor_the_async_stores():
    loaded = loaded_after("import tinyjobs")
    assert "asyncio" not in loaded
    assert "tinyjobs.stores.aio" not in loaded


def test_the_supervisor_loads_only_what_its_workers_run():
    loaded = loaded_after(
        "import tinyjobs.cli, tinyjobs.cli.supervise, tinyjobs.supervisor, tinyjobs.worker, tinyjobs.log\n"
        "tinyjobs.log.configure()"
    )
    for module in (
        "importlib.metadata",
        "tinyjobs.stores.aio",
        "tinyjobs.dashboard",
        "croniter",
        "tinyjobs.stores.sqlite",
        "tinyjobs.stores.postgres",
        "tinyjobs.stores.redis",
        "psycopg",
        "redis",
    ):
        assert module not in loaded, f"{module} is imported before the app names its store"


def test_the_async_calls_and_handlers_still_work_with_asyncio_loaded_late(tmp_path):
    # A fresh interpreter: asyncio comes with the first coroutine, steps too.
    code = f"""
import asyncio, tinyjobs
app = tinyjobs.App("sqlite:///{tmp_path}/a.db")

@app.task
async def hello(run, who):
    return await run.step("echo", lambda: who)

async def main():
    job = await app.aenqueue("hello", {{"who": "a"}})
    assert (await app.aget(job.id)).state == "waiting"
    await app.aclose()

asyncio.run(main())
app.drain()
assert app.get(job_id := app.jobs()[0].id).result == "a", app.get(job_id)
"""
    subprocess.run([sys.executable, "-c", code], check=True)
