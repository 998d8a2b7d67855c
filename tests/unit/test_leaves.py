"""Durations, rates, sizes, JSON checks, backoff, URL masking and holder liveness."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest

from tinyjobs.durations import parse_duration, parse_rate, parse_size
from tinyjobs.errors import ConfigError, PayloadTooLarge, SerializationError
from tinyjobs.holder import Holder, is_alive, process_start
from tinyjobs.retry import backoff
from tinyjobs.serialization import dump, dump_args
from tinyjobs.urls import mask, store_kind


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (10, 10.0),
        ("10", 10.0),
        ("10s", 10.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("7d", 604800.0),
        ("250ms", 0.25),
    ],
)
def test_durations_accept_numbers_and_units(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "5 minutes", "-1", "1y", "abc", True, float("inf")])
def test_bad_durations_name_the_setting(bad):
    with pytest.raises(ConfigError, match="timeout"):
        parse_duration(bad, "timeout")


def test_rates_and_sizes():
    assert parse_rate("100/s") == (100, 1.0)
    assert parse_rate("10/m") == (10, 60.0)
    assert parse_rate("5/10s") == (5, 10.0)
    assert parse_size("512MB") == 512_000_000
    assert parse_size("1MiB") == 1024 * 1024
    with pytest.raises(ConfigError, match="rate"):
        parse_rate("100 per second")
    with pytest.raises(ConfigError, match="max-memory"):
        parse_size("lots", "max-memory")


def test_json_refusals_name_the_argument():
    with pytest.raises(SerializationError, match="argument 'when'"):
        dump_args({"ok": 1, "when": object()})
    with pytest.raises(SerializationError, match=r"argument 'items'\[2\]"):
        dump_args({"items": [1, 2, {3}]})
    with pytest.raises(SerializationError, match="step 'answer'"):
        dump(float("nan"), "step 'answer'")
    with pytest.raises(SerializationError, match="key 1"):
        dump({1: "a"}, "result")


def test_payload_limit_names_sizes():
    with pytest.raises(PayloadTooLarge, match="over the payload limit of 100 bytes"):
        dump_args({"blob": "x" * 200}, limit=100)
    assert dump_args({"blob": "x" * 50}, limit=100).startswith('{"blob"')


def test_backoff_doubles_to_an_hour_with_ten_percent_jitter():
    rng = random.Random(7)
    for attempt, base in [(1, 1), (2, 2), (3, 4), (10, 512), (13, 3600), (40, 3600)]:
        waits = [backoff(attempt, rng) for _ in range(200)]
        assert min(waits) >= base * 0.9 and max(waits) <= base * 1.1
        assert max(waits) - min(waits) > base * 0.1  # it really is spread


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("redis://:s3cret@h:6379/0", "s3cret"),
        ("postgresql://u:s3cret@db/app", "s3cret"),
        ("postgresql://db/app?password=s3cret&sslmode=require", "s3cret"),
        ("redis://:@h", None),
        ("postgres://u:p@ss:w0rd@host/db", "w0rd"),
    ],
)
def test_mask_hides_passwords(url, secret):
    masked = mask(url)
    if secret:
        assert secret not in masked and "***" in masked


def test_store_kind_names_an_unknown_scheme():
    assert store_kind("sqlite:///x.db") == "sqlite"
    assert store_kind("postgres://x") == "postgres"
    with pytest.raises(ConfigError, match="unknown scheme 'mysql'"):
        store_kind("mysql://u:pw@h/db")
    with pytest.raises(ConfigError, match="no scheme"):
        store_kind("tinyjobs.db")


def test_holder_liveness_sees_dead_and_zombie_processes():
    me = Holder.current()
    assert not me.is_gone()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = None
    while started is None and child.poll() is None:
        started = process_start(child.pid)
    # The child exits but is not reaped yet: a zombie counts as gone.
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    if started is not None:
        assert not is_alive(child.pid, started)
    child.wait()
    assert Holder(me.host, child.pid, started or 1).is_gone()
    assert not Holder("elsewhere/other-boot", child.pid, 1).is_gone()  # other hosts: not judged
    assert Holder.parse(me.id) == me
