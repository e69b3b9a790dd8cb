"""Confined file access's rule in Python (`use.server.access`), the reference the shim mirrors."""

from __future__ import annotations

import pytest

from access_support import rule_cases
from use.optimize.keys import ADMINS_KEY, ALLOWED_ROOTS_KEY, SESSION_USER_KEY
from use.server.access import PROTECTED_KEYS, is_allowed, normalize, parse_roots


def test_every_case_of_the_rule(tmp_path) -> None:
    wrong = [(path, roots, allowed) for path, roots, allowed in rule_cases(tmp_path) if is_allowed(path, roots) != allowed]
    assert wrong == []


def test_normalize_resolves_links_and_dot_dot(tmp_path) -> None:
    cases = rule_cases(tmp_path)
    assert cases  # the tree exists
    assert normalize(f"{tmp_path}/data/warehouse/escape/secret.txt") == str((tmp_path / "outside" / "secret.txt").resolve())
    assert normalize(f"file://{tmp_path}/data/./warehouse/") == str((tmp_path / "data" / "warehouse").resolve())
    assert normalize("hdfs://nn:8020/a/./b/../c") == "hdfs://nn:8020/a/c"


@pytest.mark.parametrize("value,roots", [("", []), (" /a , ,/b ", ["/a", "/b"]), ("/a", ["/a"])])
def test_roots_are_comma_separated(value, roots) -> None:
    assert parse_roots(value) == roots


def test_the_protected_keys_include_the_rule_itself() -> None:
    assert {ALLOWED_ROOTS_KEY, ADMINS_KEY, SESSION_USER_KEY} <= set(PROTECTED_KEYS)
    assert "spark.sql.legacy.allowNonEmptyLocationInCTAS" in PROTECTED_KEYS
    assert "spark.databricks.delta.retentionDurationCheck.enabled" in PROTECTED_KEYS
