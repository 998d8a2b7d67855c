"""A small tinyjobs app: count the words of files, with a step and a retry.

Run a worker for it with `tinyjobs worker --app examples.wordcount:app`."""

from __future__ import annotations

import hashlib
from pathlib import Path

import tinyjobs

app = tinyjobs.App()  # $TINYJOBS_URL, else sqlite:///tinyjobs.db
app.queue("files", concurrency=4, timeout="1m")


@app.task(queue="files", attempts=5)
def count_words(run: tinyjobs.Run, path: str) -> dict:
    """Count the words of a file; the file's digest is a step, kept across attempts."""
    text = Path(path).read_text(errors="replace")
    digest = run.step("digest", lambda: hashlib.sha256(text.encode()).hexdigest()[:16])
    return {"path": path, "words": len(text.split()), "lines": text.count("\n"), "sha256": digest}


@app.task(queue="files")
async def longest_word(run: tinyjobs.Run, path: str) -> dict:
    """The same in an async handler."""
    words = Path(path).read_text(errors="replace").split()
    return {"path": path, "longest": max(words, key=len) if words else ""}
