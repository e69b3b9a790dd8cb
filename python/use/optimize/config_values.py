"""The forms a setting's value is written in (integers, byte counts, fractions, ratios, durations,
booleans, timestamps): each parser returns the typed value or raises `BadValue` with the accepted
form, and `use.optimize.config` adds the key and the value to the message. Kept apart from the key
table, whose parsers for columns and strategies stay with it, so that it reads as the list of
settings it is."""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

__all__ = [
    "BadValue",
    "parse_at_least",
    "parse_bool",
    "parse_count_threshold",
    "parse_depth_threshold",
    "parse_duration",
    "parse_float_text",
    "parse_fraction",
    "parse_int_text",
    "parse_max_fragments",
    "parse_max_wait",
    "parse_non_negative_bytes",
    "parse_positive_bytes",
    "parse_positive_int",
    "parse_revision_id",
    "parse_stagger",
    "parse_tier_ratio",
    "parse_timestamp_ms",
]


class BadValue(ValueError):
    """A value does not have the accepted form; the caller adds key and value to the message."""


#: Every integer setting is a Java long on the JVM side (Delta's and Spark's own settings too).
_LONG_MAX = 2**63 - 1


def parse_int_text(value: Any, form: str) -> int:
    if isinstance(value, bool):
        raise BadValue(form)
    if isinstance(value, int):
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    else:
        text = str(value).strip()
        if not re.fullmatch(r"[+-]?\d+", text):
            raise BadValue(form)
        n = int(text)
    if abs(n) > _LONG_MAX:
        raise BadValue(f"{form}, at most {_LONG_MAX} (a 64-bit integer)")
    return n


def parse_at_least(value: Any, minimum: int, form: str) -> int:
    n = parse_int_text(value, form)
    if n < minimum:
        raise BadValue(form)
    return n


def parse_positive_bytes(value: Any) -> int:
    return parse_at_least(value, 1, "a positive integer number of bytes, e.g. 5000000")


def parse_non_negative_bytes(value: Any) -> int:
    return parse_at_least(value, 0, "a non-negative integer number of bytes, e.g. 4194304")


def parse_revision_id(value: Any) -> int:
    return parse_at_least(value, 0, "a revision id: an integer >= 0 (0 is the staging revision)")


def parse_count_threshold(value: Any) -> int:
    return parse_at_least(value, 2, "an integer >= 2 (the number of small files that triggers a merge)")


def parse_depth_threshold(value: Any) -> int:
    return parse_at_least(value, 1, "an integer >= 1 (the overlap depth above which files are merged)")


def parse_positive_int(value: Any) -> int:
    return parse_at_least(value, 1, "an integer >= 1")


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise BadValue("true or false")


def parse_float_text(value: Any, form: str) -> float:
    """A number given as text or a number (not a bool); `BadValue(form)` otherwise."""
    if isinstance(value, bool):
        raise BadValue(form)
    try:
        return float(str(value).strip()) if not isinstance(value, (int, float)) else float(value)
    except ValueError:
        raise BadValue(form) from None


def parse_fraction(value: Any) -> float:
    form = "a number strictly between 0 and 1, e.g. 0.1"
    f = parse_float_text(value, form)
    if not 0.0 < f < 1.0:
        raise BadValue(form)
    return f


def parse_tier_ratio(value: Any) -> float:
    form = "0 (tiering off: every fragmented inner cube is merged into one file) or a number >= 1.5, e.g. 4"
    f = parse_float_text(value, form)
    if not (f == 0.0 or 1.5 <= f <= 1e6):
        raise BadValue(form)
    return f


def parse_stagger(value: Any) -> float:
    form = "a number >= 1 (1: no stagger), e.g. 2"
    f = parse_float_text(value, form)
    if not 1.0 <= f <= 1e6:
        raise BadValue(form)
    return f


def parse_max_wait(value: Any) -> float | None:
    """`off` switches the time factor off; anything else is a duration."""
    if isinstance(value, str) and value.strip().lower() == "off":
        return None
    try:
        return parse_duration(value)
    except BadValue:
        raise BadValue("'off' or a positive duration with a unit, e.g. '1h', '30 minutes', '500ms'") from None


def parse_max_fragments(value: Any) -> int:
    form = "an integer >= 1 (the files an inner cube may be spread over)"
    n = parse_int_text(value, form)
    if n < 1:
        raise BadValue(form)
    return n


_TS_FORM = "epoch milliseconds (integer >= 0) or a UTC time 'YYYY-MM-DD HH:MM:SS' (or 'YYYY-MM-DD')"


def parse_timestamp_ms(value: Any) -> int:
    if isinstance(value, _dt.datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=_dt.UTC)
        return int(dt.timestamp() * 1000)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        n = parse_int_text(value, _TS_FORM)
        if n < 0:
            raise BadValue(_TS_FORM)
        return n
    text = str(value).strip()
    if re.fullmatch(r"\d+", text):
        return int(text)
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d"):
        try:
            dt = _dt.datetime.strptime(text, fmt).replace(tzinfo=_dt.UTC)
        except ValueError:
            continue
        return int(dt.timestamp() * 1000)
    raise BadValue(_TS_FORM)


_DURATION_UNITS = {
    "ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}  # fmt: skip


def parse_duration(value: Any) -> float:
    """A Spark-style duration ("10 minutes", "30s", "1h", "500ms") in seconds; must be > 0."""
    form = "a positive duration with a unit, e.g. '10 minutes', '30s', '1h', '500ms'"
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*", str(value))
    if not m or m.group(2).lower() not in _DURATION_UNITS:
        raise BadValue(form)
    seconds = float(m.group(1)) * _DURATION_UNITS[m.group(2).lower()]
    if seconds <= 0:
        raise BadValue(form)
    return seconds
