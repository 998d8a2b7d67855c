"""The services tests talk to. PostgreSQL and Redis come from $TINYJOBS_TEST_POSTGRES and
$TINYJOBS_TEST_REDIS (defaults: the CI machine's). A missing service skips locally and fails
the run when CI=true: no silent skips in CI."""

from __future__ import annotations

import importlib
import os
import socket
from types import ModuleType
from urllib.parse import urlsplit

import pytest

POSTGRES_URL = os.environ.get("TINYJOBS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("TINYJOBS_TEST_REDIS", "redis://127.0.0.1:6379/15")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing_service(what: str) -> None:
    """Skip the test, or fail it under CI=true."""
    if IN_CI:
        pytest.fail(f"{what} is not available and CI=true: .ci/run must start it", pytrace=False)
    pytest.skip(f"{what} is not available", allow_module_level=True)


def require_module(name: str) -> ModuleType:
    """Import a test extra's package (`pip install -e '.[test]'`); missing, skip the test, or fail
    it under CI=true, where .ci/run installed the extras (pytest.importorskip would skip there)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        missing_service(f"the Python package {name!r} (a test extra)")
        raise  # unreachable: missing_service skips or fails


def reachable(url: str, timeout: float = 1.0) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 0), timeout):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def postgres_url() -> str:
    if not reachable(POSTGRES_URL):
        missing_service(f"PostgreSQL at {POSTGRES_URL}")
    return POSTGRES_URL


@pytest.fixture(scope="session")
def redis_url() -> str:
    if not reachable(REDIS_URL):
        missing_service(f"Redis at {REDIS_URL}")
    return REDIS_URL
