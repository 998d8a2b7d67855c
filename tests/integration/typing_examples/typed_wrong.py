"""Calls mypy must reject: each line that ends with a "rejected" comment naming an error code
must be reported with that code, and nothing else (tests/integration/test_typing.py)."""

from __future__ import annotations

import tinyjobs

app = tinyjobs.App("memory://")


@app.task
def reply(run: tinyjobs.Run, message_id: int) -> dict[str, int]:
    return {"chars": message_id}


reply.enqueue(message_id="41")  # rejected: arg-type
reply.enqueue(mesage_id=41)  # rejected: call-arg
reply.enqueue(message_id=41, delay=[10])  # rejected: arg-type
count: int = reply.enqueue(message_id=41)  # rejected: assignment


async def main() -> None:
    await reply.aenqueue(message_id=None)  # rejected: arg-type
