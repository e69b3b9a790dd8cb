"""Snapshot-level rules: Delta duration properties (CalendarInterval syntax) and how tables use them."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from use.delta import DeltaLog
from use.delta.snapshot import TableConfig, parse_interval_ms, validate_configuration
from use.errors import ConfigError

KEY = "delta.logRetentionDuration"
SEC, MIN, HOUR, DAY = 1000, 60_000, 3_600_000, 86_400_000


@pytest.mark.parametrize(
    "value, ms",
    [
        ("interval 30 days", 30 * DAY),
        ("30 days", 30 * DAY),
        ("1 day", DAY),
        ("interval 1 day", DAY),
        ("interval 1 day 2 hours", DAY + 2 * HOUR),
        ("1 day 2 hours", DAY + 2 * HOUR),
        ("interval 2 weeks", 14 * DAY),
        ("1 week", 7 * DAY),
        ("INTERVAL 3 Hours 15 MINUTES", 3 * HOUR + 15 * MIN),
        ("90 seconds", 90 * SEC),
        ("1 second 500 milliseconds", 1500),
        ("2500 microseconds", 2),  # sub-millisecond remainders are truncated
        ("1 microsecond", 0),
        ("1.5 seconds", 1500),
        (".25 second", 250),
        ("1 microsecond 1 day", DAY),  # any order
        ("1 day 10 day", 11 * DAY),  # repeated units add up
        ("  interval\t1\tday  ", DAY),
        ("1 day -2 hours", DAY - 2 * HOUR),  # signs per term, as Spark parses them
        ("- 1 hour + 2 hours", HOUR),
        ("0 days", 0),
        # Spark's own multi-unit example: 860 days and 81480877567 microseconds.
        (
            "  interval  123  weeks   -1 day 23 hours -22 minutes 1 second  -123  millisecond    567 microseconds ",
            860 * DAY + 81_480_877,
        ),
    ],
)
def test_interval_syntax(value, ms):
    assert parse_interval_ms(KEY, value) == ms


@pytest.mark.parametrize(
    "value, reason",
    [
        ("forever", "cannot read 'forever'"),
        ("", "empty"),
        ("   ", "empty"),
        ("interval", "no '<number> <unit>' term"),
        ("30", "cannot read '30'"),
        ("1 day 2", "cannot read '2'"),
        ("30days", "cannot read '30days'"),
        ("interval1 day", "cannot read 'interval1 day'"),
        ("1 fortnight", "unknown unit 'fortnight'"),
        ("1 dayss", "unknown unit 'dayss'"),
        ("1 hourX", "unknown unit 'hourx'"),
        ("1.5 days", "only seconds may have a fraction"),
        ("1. hour", "only seconds may have a fraction"),
        ("0.1234567891 seconds", "more than nanosecond precision"),
        ("-1 day", "negative"),
        ("1 hour -2 hours", "negative"),
        ("1 month", "months are not allowed"),
        ("interval 2 months", "months are not allowed"),
        ("1 year", "years are not allowed"),
        ("interval 1 day 1 year", "years are not allowed"),
        ("\u0663 days", "cannot read"),  # non-ASCII digits are not numbers here
        ("9999999999999 weeks", "too long"),
    ],
)
def test_interval_refused_with_key_value_and_example(value, reason):
    with pytest.raises(ConfigError) as err:
        parse_interval_ms(KEY, value)
    text = str(err.value)
    assert reason in text
    assert KEY in text and repr(value) in text
    assert "'interval 30 days'" in text and "weeks" in text


def test_months_and_years_suggest_days():
    with pytest.raises(ConfigError, match=r"'interval 365 days' for a year"):
        parse_interval_ms("delta.deletedFileRetentionDuration", "1 year")


def test_table_config_reads_multi_unit_durations():
    conf = TableConfig.from_configuration(
        {"delta.logRetentionDuration": "interval 1 day 12 hours", "delta.deletedFileRetentionDuration": "2 weeks"}
    )
    assert conf.log_retention_ms == 36 * HOUR
    assert conf.deleted_file_retention_ms == 14 * DAY
    # A property another engine set and we do not change is not judged again ...
    validate_configuration({"delta.logRetentionDuration": "3 days"}, {"delta.logRetentionDuration": "3 days"})
    # ... but a new or changed one is.
    with pytest.raises(ConfigError, match="months are not allowed"):
        validate_configuration({"delta.logRetentionDuration": "1 month"}, {"delta.logRetentionDuration": "3 days"})


def test_create_with_multi_unit_duration_and_refusal_writes_nothing(table_path):
    schema = pa.schema([("id", pa.int64())])
    log = DeltaLog.for_path(table_path)
    with pytest.raises(ConfigError, match=r"delta\.deletedFileRetentionDuration='1 month'.*interval 30 days"):
        log.create(schema, configuration={"delta.deletedFileRetentionDuration": "1 month"})
    assert not os.path.exists(table_path)
    snap = log.create(schema, configuration={"delta.deletedFileRetentionDuration": "interval 1 week 1 day"})
    assert snap.config.deleted_file_retention_ms == 8 * DAY
    assert DeltaLog.for_path(table_path).snapshot().config.deleted_file_retention_ms == 8 * DAY
