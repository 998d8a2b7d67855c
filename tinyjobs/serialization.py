"""JSON in and out of the store. Anything that is not plain JSON is refused with an error that
names where it sits (`message_id`, `args.items[2]`, `step 'answer'`, `result`)."""

from __future__ import annotations

import json
import math
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


def dump(value: Any, where: str) -> str:
    """Compact JSON text of `value`, after `check_json`."""
    check_json(value, where)
    return _compact(value)


def dump_args(args: dict[str, Any], limit: int = DEFAULT_MAX_PAYLOAD) -> str:
    """JSON text of a job's keyword arguments; each offending argument is named by its keyword."""
    if not isinstance(args, dict):
        raise SerializationError(f"arguments must be a dict of keyword arguments, got {type(args).__name__}")
    for name, item in args.items():
        if not isinstance(name, str):
            raise SerializationError(f"argument name {name!r} must be a string")
        check_json(item, f"argument {name!r}")
    text = _compact(args)
    size = len(text) if text.isascii() else len(text.encode())
    if size > limit:
        raise PayloadTooLarge(
            f"arguments are {size} bytes as JSON, over the payload limit of {limit} bytes; "
            "store large data elsewhere and pass its key, or raise App(max_payload=...)"
        )
    return text


def load(text: str | bytes | None) -> Any:
    """The value of JSON text (None stays None)."""
    return None if text is None else json.loads(text)
