"""Typed use of tinyjobs that mypy --strict must accept (tests/integration/test_typing.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import tinyjobs

app = tinyjobs.App("memory://")


@app.task(queue="replies", attempts=3)
def reply(run: tinyjobs.Run, message_id: int) -> dict[str, int]:
    return {"chars": message_id}


@app.task
async def notify(run: tinyjobs.Run, user: str, urgent: bool = False) -> None:
    await run.step("send", lambda: user)


job: tinyjobs.Job = reply.enqueue(message_id=41)
reply.enqueue(message_id=41, id="reply:41", key="msg-41", delay="10m", group="customer:7")
reply.enqueue(message_id=42, at=datetime(2030, 1, 1, tzinfo=UTC), after=[job, "other"], priority=2)
notify.enqueue(user="ann")
jobs: list[tinyjobs.Job] = reply.enqueue_many([{"message_id": 1}, {"message_id": 2}])
result: dict[str, int] = reply.fn(tinyjobs.Run.__new__(tinyjobs.Run), 41)


async def main() -> None:
    first = await reply.aenqueue(message_id=41, delay=5)
    await notify.aenqueue(user="bob", urgent=True, queue="alerts", delay=timedelta(minutes=5))
    await reply.aenqueue_many([{"message_id": 3}])
    found: tinyjobs.Job | None = await app.aget(first.id)
    cancelled: bool = await app.acancel(first.id)
    retried: bool = await app.aretry(first.id)
    states: list[str] = [snapshot.state async for snapshot in app.awatch(first.id, timeout=1.0)]
    await app.aclose()
    del found, cancelled, retried, states
