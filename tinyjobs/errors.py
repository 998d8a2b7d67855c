"""Exceptions that tinyjobs raises. Every message names what is wrong and never holds a password."""

from __future__ import annotations


class TinyjobsError(Exception):
    """Base of every error tinyjobs raises on purpose."""


class ConfigError(TinyjobsError, ValueError):
    """A setting, URL, duration or option that makes no sense."""


class SerializationError(TinyjobsError, TypeError):
    """A value that is not JSON: the message names the argument (or step, or result) at fault."""


class BadArguments(TinyjobsError, TypeError):
    """Arguments that the task's handler cannot take (missing, unexpected or misspelt)."""


class PayloadTooLarge(TinyjobsError, ValueError):
    """A job's arguments exceed the app's payload limit."""


class UnknownTask(TinyjobsError, LookupError):
    """A task name that no `@app.task` registered."""


class DuplicateTask(TinyjobsError, ValueError):
    """Two tasks registered under one name in one app."""


class StoreError(TinyjobsError):
    """The store refused or could not be reached."""


class StoreUnavailable(StoreError):
    """The store could not be reached (connection refused, file not writable, server down)."""


class NotSupported(TinyjobsError):
    """The store cannot do what was asked (for example `conn=` on Redis)."""


class LeaseLost(TinyjobsError):
    """This attempt's lease ended (expired and reclaimed, or the job was cancelled): its writes no
    longer count. Raised inside a handler by `run.step` so that the handler stops early."""


class JobNotFound(TinyjobsError, LookupError):
    """No job with that id."""
