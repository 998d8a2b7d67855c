"""The `memory://` store: jobs in this process's memory, for tests and for trying tinyjobs out."""

from __future__ import annotations

from .store import MemoryStore, open

__all__ = ["MemoryStore", "open"]
