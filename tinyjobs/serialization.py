"""JSON in and out of the store. Anything that is not plain JSON is refused with an error that
names where it sits (`message_id`, `args.items[2]`, `step 'answer'`, `result`)."""

from __future__ import annotations

import json
import json.encoder
import math
from collections.abc import Callable
from typing import Any

from .errors import PayloadTooLarge, SerializationError

DEFAULT_MAX_PAYLOAD = 1024 * 1024


def check_json(value: Any, where: str) -> None:
    """Raise SerializationError naming the first part of `value` that JSON cannot hold exactly."""
    if value is None or isinstance(value, bool | str):
        return
    if isinstance(value, int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SerializationError(f"{where}: {value!r} is not a finite number; JSON cannot hold it")
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_json(item, f"{where}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise SerializationError(
                    f"{where}: key {key!r} is {a(type(key).__name__)}; JSON object keys must be strings"
                )
            check_json(item, f"{where}.{key}")
        return
    raise SerializationError(
        f"{where}: {a(type(value).__name__)} is not JSON; pass strings, numbers, booleans, "
        "None, lists or dicts (convert it first, e.g. a datetime to an ISO string)"
    )


def a(noun: str) -> str:
    """`noun` with its indefinite article: "an int", "a datetime"."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


# One encoder for every dump: json.dumps builds a new JSONEncoder per call when given any
# option (separators, ensure_ascii), which costs about as much as encoding a job's arguments.
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


def _strict_encoder() -> Callable[[Any], str]:
    """`_compact` without its per-call setup, and strict: the C encoder that JSONEncoder.encode
    builds anew at every call, built once, refusing what `check_json` refuses of a value
    without nested objects (a non-finite float: ValueError; anything not JSON: TypeError).
    Its text is `_compact`'s; where the C encoder is missing, or does not give `_compact`'s text
    for a sample, this is `_compact` with the same refusals (check_json first)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    sample = {"s": 'é"\n', "i": -3, "f": 0.1, "b": [True, False, None], "t": (1.5e300,)}

    def checked(value: Any) -> str:
        check_json(value, "value")  # raises SerializationError, a TypeError
        return _compact(value)

    if make is None:
        return checked
    try:
        # markers None: no cycle check, as a payload with a nested object is walked by
        # check_json first (dump_args), which a cycle sends into RecursionError as before.
        c_encode = make(None, _refuse, json.encoder.encode_basestring, None, ":", ",", False, False, False)

        def strict(value: Any) -> str:
            return "".join(c_encode(value, 0))

        if strict(sample) != _compact(sample):
            return checked
    except Exception:  # an interpreter whose private encoder differs: the slow way
        return checked
    return strict


_strict = _strict_encoder()


def dump(value: Any, where: str) -> str:
    """Compact JSON text of `value`, after `check_json`."""
    check_json(value, where)
    return _compact(value)


def dump_args(args: dict[str, Any], limit: int = DEFAULT_MAX_PAYLOAD) -> str:
    """JSON text of a job's keyword arguments; each offending argument is named by its keyword.
    Raises SerializationError (what cannot be JSON exactly) or PayloadTooLarge (over `limit`
    bytes of UTF-8).

    Runs once per job of an enqueue, so the common case is taken without walking the values in
    Python: a dict whose keys are strings is encoded by the strict encoder, which refuses a
    non-finite float or a value that is not JSON; what it cannot see is a nested object's
    non-string key (JSON would turn it into a string), so a text with a `{` past its first
    character (a nested object, or a string that holds one) is walked by check_json as well.
    Anything refused goes the walking way, which names the offending argument."""
    if type(args) is dict:
        for name in args:
            if type(name) is not str:
                break
        else:
            try:
                text = _strict(args)
            except (TypeError, ValueError):
                pass  # the walk below names the culprit
            else:
                if text.find("{", 1) < 0:
                    return _within(text, limit)
    if not isinstance(args, dict):
        raise SerializationError(f"arguments must be a dict of keyword arguments, got {type(args).__name__}")
    for name, item in args.items():
        if not isinstance(name, str):
            raise SerializationError(f"argument name {name!r} must be a string")
        check_json(item, f"argument {name!r}")
    return _within(_compact(args), limit)


def dump_many(many: list[Any], limit: int = DEFAULT_MAX_PAYLOAD) -> list[str] | None:
    """dump_args's text for each of a batch's arguments, or None when this shortcut does not
    apply (then call dump_args for each, which refuses the first bad one with its message);
    never raises. One encoder call for the whole batch instead of one per job.

    It applies when every item is a dict with string keys, the strict encoder takes the list,
    and each item is one flat object (the text holds exactly one `{` per item): then no
    string holds a `{`, so `},{` occurs only between two items and splitting on it gives each
    item's text exactly (checked: tests/unit/test_enqueue_build.py), each within `limit`."""
    if not many:
        return []
    for args in many:
        if type(args) is not dict:
            return None
        for name in args:
            if type(name) is not str:
                return None
    try:
        text = _strict(many)
    except (TypeError, ValueError):
        return None
    if text.count("{") != len(many):
        return None  # a nested object, or a `{` inside a string
    parts = text[2:-2].split("},{")
    if len(parts) != len(many):  # cannot happen given the count; cheap to be sure
        return None
    payloads = ["{" + part + "}" for part in parts]
    if text.isascii():
        if max(map(len, payloads)) > limit:
            return None
    elif any(len(payload.encode()) > limit for payload in payloads):
        return None
    return payloads


def _within(text: str, limit: int) -> str:
    """`text`, unless its UTF-8 is over `limit` bytes (PayloadTooLarge)."""
    size = len(text) if text.isascii() else len(text.encode())
    if size > limit:
        raise PayloadTooLarge(
            f"arguments are {size} bytes as JSON, over the payload limit of {limit} bytes; "
            "store large data elsewhere and pass its key, or raise App(max_payload=...)"
        )
    return text


# The C scanner json.loads runs, called directly: json.loads adds two whitespace matches and
# three Python calls around it, about half the cost of reading a job's arguments.
_scan: Callable[[str, int], tuple[Any, int]] = json.decoder.JSONDecoder().scan_once  # type: ignore[attr-defined]


def load(text: str | bytes | None) -> Any:
    """The value of JSON text (None stays None), as json.loads gives it or raises.

    Runs once per job snapshot (an enqueue's, a claim's): text that is one JSON value with
    nothing around it (what this library writes) is read by the scanner alone; anything else
    (bytes, whitespace around the value, more than one value, not JSON) goes to json.loads,
    which reads it or raises its own error."""
    if type(text) is str:
        try:
            value, end = _scan(text, 0)
        except (StopIteration, ValueError):
            return json.loads(text)
        if end == len(text):
            return value
    return None if text is None else json.loads(text)
