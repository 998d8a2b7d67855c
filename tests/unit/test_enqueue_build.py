"""How an enqueue builds its jobs, once per job and so taken by shortcuts (app.new_jobs): the
arguments' JSON (serialization.dump_args), the argument check (Task.check_args) and the ids
(tinyjobs.ids). Each shortcut must give what the plain way gives: the same text, the same
refusal with the same message, ids unique across threads and forked processes."""

from __future__ import annotations

import enum
import json
import math
import os
import threading
from collections import OrderedDict
from typing import Any

import pytest

import tinyjobs
from tinyjobs import ids, serialization
from tinyjobs.errors import BadArguments, PayloadTooLarge, SerializationError
from tinyjobs.serialization import check_json, dump_args

# The plain way, as dump_args was before its shortcut: walk every value, then encode.
_plain_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def plain_dump_args(args: Any, limit: int) -> str:
    if not isinstance(args, dict):
        raise SerializationError(f"arguments must be a dict of keyword arguments, got {type(args).__name__}")
    for name, item in args.items():
        if not isinstance(name, str):
            raise SerializationError(f"argument name {name!r} must be a string")
        check_json(item, f"argument {name!r}")
    text = _plain_encode(args)
    size = len(text.encode())
    if size > limit:
        raise PayloadTooLarge(
            f"arguments are {size} bytes as JSON, over the payload limit of {limit} bytes; "
            "store large data elsewhere and pass its key, or raise App(max_payload=...)"
        )
    return text


class Color(enum.IntEnum):
    RED = 1


class Name(str):
    pass


CASES: list[Any] = [
    {},
    {"i": 1, "t": 0.5},
    {"s": "plain", "n": None, "b": True, "f": False, "neg": -7, "big": 10**30},
    {"u": "héllo ☃ \U0001f600", "esc": 'quote " backslash \\ newline \n tab \t nul \x00'},
    {"brace": "a { inside a string"},
    {"nested": {"a": [1, 2, {"b": None}]}},
    {"tuple": (1, "two", 3.0)},
    {"list": [1, [2, [3, []]]]},
    {"enum": Color.RED},
    {Name("sub"): Name("value")},
    {"f": 1e300, "tiny": 5e-324, "negzero": -0.0},
    # refused
    {"nan": math.nan},
    {"inf": [1, -math.inf]},
    {"obj": object()},
    {"set": {1, 2}},
    {"deep": [1, {"x": {2: "int key"}}]},
    {"nested": {1: "int key"}},
    {"nested": {None: "none key"}},
    {"nested": {True: "bool key"}},
    {"nested": {1.5: "float key"}},
    {"nested": {(1, 2): "tuple key"}},
    {1: "top int key"},
    {None: "top none key"},
    {"bytes": b"raw"},
    {"ok": 1, "when": object()},
    {"items": [1, 2, {3}]},
    OrderedDict(a=1, b=[2]),
    OrderedDict([(1, "int key in a dict subclass")]),
    [1, 2],
    None,
    "text",
    {"blob": "x" * 300},
    {"blob": "é" * 100},  # 201 bytes of UTF-8 in 103 characters
    {"blob": "é" * 99},
]


def outcome(fn: Any, args: Any, limit: int) -> tuple[str, str]:
    try:
        return ("text", fn(args, limit))
    except Exception as exc:  # the test compares whatever is raised
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize("args", CASES, ids=range(len(CASES)))
def test_dump_args_gives_the_plain_ways_text_or_refusal(args):
    assert outcome(dump_args, args, 200) == outcome(plain_dump_args, args, 200)


@pytest.mark.parametrize("args", CASES, ids=range(len(CASES)))
def test_without_the_c_encoder_dump_args_still_gives_the_same(args, monkeypatch):
    monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    monkeypatch.setattr(serialization, "_strict", serialization._strict_encoder())
    assert serialization._strict.__name__ == "checked"
    assert outcome(dump_args, args, 200) == outcome(plain_dump_args, args, 200)


@pytest.mark.parametrize("args", CASES, ids=range(len(CASES)))
def test_dump_many_gives_each_texts_or_none(args):
    # A batch around each case: dump_many gives what dump_args gives each item when every one
    # is taken; it never raises, and when it gives None dump_args gives them (or refuses one).
    batch = [{"a": 1}, args, {"b": "x}", "c": [1, 2]}, {}]
    made = serialization.dump_many(batch, 200)
    plain = [outcome(plain_dump_args, item, 200) for item in batch]
    if made is not None:
        assert [("text", text) for text in made] == plain
    else:
        assert [outcome(dump_args, item, 200) for item in batch] == plain
    flat = type(args) is dict and all(type(k) is str for k in args) and plain[1][0] == "text"
    if flat and "{" not in plain[1][1][1:]:
        assert made is not None  # the shortcut is taken where it can be


def test_dump_many_of_mixed_batches_and_edges():
    assert serialization.dump_many([], 10) == []
    assert serialization.dump_many([{}, {}], 10) == ["{}", "{}"]
    assert serialization.dump_many([{"s": "}},"}, {"t": 1}], 100) == ['{"s":"}},"}', '{"t":1}']
    assert serialization.dump_many([{"s": "},{"}, {"t": 1}], 100) is None  # holds a `{`
    assert serialization.dump_many([{"s": "a{b"}, {"t": 1}], 100) is None  # a `{` in a string
    assert serialization.dump_many([{"s": "x" * 20}, {"t": 1}], 20) is None  # over the limit
    assert serialization.dump_many([{"s": "é" * 9}, {"t": 1}], 22) is None  # 26 bytes, 17 chars
    assert serialization.dump_many([{"s": "é" * 7}, {"t": 1}], 22) == ['{"s":"' + "é" * 7 + '"}', '{"t":1}']


def test_the_strict_encoder_is_the_c_one_here():
    # The shortcut is only a shortcut with the C encoder; CPython has it.
    assert serialization._strict.__name__ == "strict"


def test_a_refused_job_in_a_batch_adds_nothing():
    app = tinyjobs.App("memory://", max_payload=100)

    @app.task
    def send(run, to):
        return to

    good = [{"to": f"x{i}"} for i in range(50)]
    for bad, error in (
        ({"to": math.inf}, SerializationError),
        ({"to": {1: "a"}}, SerializationError),
        ({"to": "x" * 200}, PayloadTooLarge),
        ({"too": "x"}, BadArguments),
        ({}, BadArguments),
    ):
        with pytest.raises(error):
            send.enqueue_many([*good, bad, *good])
    assert app.jobs() == []


# -- Task.check_args -----------------------------------------------------------------------


def _closed(run, a, b=1, *, c, d=2):
    return None


def _open(run, a, **rest):
    return None


def _varargs(run, *args, a=1):
    return None


def _positional_only(run, p, /, a):
    return None


@pytest.mark.parametrize("handler", [_closed, _open, _varargs, _positional_only, len])
@pytest.mark.parametrize(
    "args",
    [
        {},
        {"a": 1},
        {"a": 1, "c": 2},
        {"a": 1, "b": 2, "c": 3, "d": 4},
        {"a": 1, "c": 2, "e": 5},
        {"p": 1, "a": 2},
    ],
)
def test_check_args_refuses_exactly_what_argument_problems_lists(handler, args):
    app = tinyjobs.App("memory://")
    task = app.task(name="t")(handler) if handler is not len else _unreadable(app)
    problems = task.argument_problems(args)
    if problems:
        with pytest.raises(BadArguments) as raised:
            task.check_args(args)
        assert "; ".join(problems) in str(raised.value)
    else:
        task.check_args(args)


def _unreadable(app: tinyjobs.App) -> Any:
    task = app.task(name="t")(lambda run, **kw: None)
    task._accepts = None  # a handler whose signature cannot be read: nothing is checked
    return task


# -- ids ------------------------------------------------------------------------------------


def test_ids_sort_by_creation_and_a_batch_shares_its_millisecond():
    first = ids.new_id()
    batch = ids.new_ids(1000)
    assert len(set(batch)) == 1000
    assert {i[:12] for i in batch} == {batch[0][:12]}
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in [first, *batch])
    assert first[:12] <= batch[0][:12]
    assert ids.new_ids(0) == [] and len(ids.new_ids(1)) == 1


def test_ids_are_unique_across_threads():
    seen: list[list[str]] = []

    def draw() -> None:
        mine = [ids.new_id() for _ in range(3000)]
        mine += ids.new_ids(500)
        seen.append(mine)

    threads = [threading.Thread(target=draw) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for part in seen for i in part]
    assert len(every) == 8 * 3500 and len(set(every)) == len(every)


def _ids_from_children(children: int, count: int) -> list[list[str]]:
    """Fork `children` real processes; each makes `count` single ids (from the pool it
    inherited, were it not emptied) and sends them back through a pipe."""
    results = []
    for _ in range(children):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            try:
                os.close(read)
                text = ",".join(ids.new_id() for _ in range(count)).encode()
                with os.fdopen(write, "wb") as out:
                    out.write(text)
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as inp:
            results.append(inp.read().decode().split(","))
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    return results


def test_forked_processes_never_share_ids():
    ids._spare.clear()
    ids.new_id()  # the parent's pool is now full: every child starts with a copy of it
    assert len(ids._spare) >= 10
    pending = list(ids._spare)
    children = _ids_from_children(4, 10)
    parent = [ids.new_id() for _ in range(10)]
    tails = [i[12:] for part in [*children, parent] for i in part]
    assert len(set(tails)) == len(tails) == 50
    # the parent still hands out the tails it held before the forks; no child took them
    assert {i[12:] for i in parent} <= set(pending)
    assert not {t for part in children for t in (i[12:] for i in part)} & set(pending)


def test_ids_made_later_in_another_process_sort_after():
    import time

    before = ids.new_id()
    time.sleep(0.005)
    [child] = _ids_from_children(1, 1)
    time.sleep(0.005)
    after = ids.new_ids(3)
    assert before < child[0] < min(after)
