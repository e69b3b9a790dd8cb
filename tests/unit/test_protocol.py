"""The shim protocol's Python side against its shared fixtures (tests/protocol/<Message>.json, one full
example of each message, which tests/spark/test_sql_protocol.py runs through the shim's case classes):
every message has a fixture that holds every field, and reads and writes back unchanged, so a field
added or renamed in `use.sql.protocol` alone fails here, and in `Protocol.scala` alone there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from use.sql.protocol import MESSAGES, REQUESTS, ErrorReply, ProtocolError, TableRef, decode, encode, wire_fields

FIXTURES = Path(__file__).resolve().parents[1] / "protocol"


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def test_every_message_has_a_fixture_and_every_fixture_a_message() -> None:
    assert sorted(p.stem for p in FIXTURES.glob("*.json")) == sorted(MESSAGES)


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_a_fixture_holds_every_field_and_reads_back_unchanged(name: str) -> None:
    data = _fixture(name)
    assert list(data) == list(wire_fields(MESSAGES[name]))
    message = decode(MESSAGES[name], data)
    assert encode(message) == data
    assert json.loads(json.dumps(encode(message))) == data


def test_each_method_has_one_request_and_its_reply_is_a_message() -> None:
    for method, request in REQUESTS.items():
        assert request.METHOD == method
        assert request.REPLY.__name__ in MESSAGES and MESSAGES[request.REPLY.__name__] is request.REPLY
    assert len(REQUESTS) == len({r.METHOD for r in MESSAGES.values() if hasattr(r, "METHOD")})


def test_the_bridge_has_a_function_for_every_method() -> None:
    from use.sql.bridge import _methods

    methods = _methods()
    assert sorted(methods) == sorted(REQUESTS)
    assert all(m.request is REQUESTS[name] for name, m in methods.items())


def test_a_message_the_other_side_cannot_have_sent_is_refused_naming_the_field() -> None:
    data = _fixture("TableRef")
    with pytest.raises(ProtocolError, match="TableRef has no field tableName"):
        decode(TableRef, {**data, "tableName": "t"})
    with pytest.raises(ProtocolError, match="TableRef lacks its field name"):
        decode(TableRef, {k: v for k, v in data.items() if k != "name"})
    with pytest.raises(ProtocolError, match=r"TableRef\.byPath must be bool"):
        decode(TableRef, {**data, "byPath": "yes"})
    with pytest.raises(ProtocolError, match=r"ErrorReply\.retryable must be bool"):
        decode(ErrorReply, {**_fixture("ErrorReply"), "retryable": 1})
    # optional fields may be left out (their default) and sent as null
    assert decode(TableRef, {"name": "t", "location": None}) == TableRef("t")


def test_python_decides_which_errors_a_new_attempt_may_win() -> None:
    from use import errors as E
    from use.sql.bridge import error_reply

    for retried in (E.ConcurrentAppendError, E.ConcurrentDeleteReadError, E.ConcurrentDeleteDeleteError, E.MetadataChangedError):
        reply = error_reply(retried("a concurrent commit won"), "rewriteRows")
        assert reply.retryable and reply.sql_state == "40001", retried
    for final in (E.ProtocolChangedError, E.ConcurrentTransactionError, E.InvalidArgumentError, E.TableNotFoundError):
        assert not error_reply(final("no"), "rewriteRows").retryable, final
    internal = error_reply(KeyError("x"), "describe")
    assert (internal.kind, internal.sql_state, internal.retryable) == ("USE_INTERNAL_ERROR", "XX000", False)


def test_a_call_s_arguments_are_read_into_their_parameters_types_once_in_python() -> None:
    """Spark passes each argument in the type it was given in; the procedure gets its parameter's
    type, or an error naming the argument and the form it takes."""
    import decimal

    from use.errors import InvalidArgumentError
    from use.sql.procedures import PROCEDURES, typed_arguments

    optimize, vacuum = PROCEDURES["optimize"], PROCEDURES["vacuum"]
    given = {"table": "t", "dry_run": "true", "max_iterations": "1", "bytes_per_iter": "1g", "revision_id": 2, "files": ["a"]}
    assert typed_arguments(optimize, given) == {
        "table": "t", "strategy": None, "revision_id": 2, "bytes_per_iter": "1g", "max_iterations": 1, "dry_run": True,
        "files": ["a"], "zorder_by": None, "where": None,
    }  # fmt: skip
    assert typed_arguments(optimize, {"bytes_per_iter": 1000})["bytes_per_iter"] == 1000
    typed = typed_arguments(vacuum, {"retention_hours": decimal.Decimal("200.5"), "dry_run": False, "force": None})
    assert typed == {"table": None, "retention_hours": 200.5, "dry_run": False, "force": None}
    assert typed_arguments(vacuum, {"retention_hours": 24})["retention_hours"] == 24.0
    with pytest.raises(InvalidArgumentError, match=r"argument dry_run of use_catalog\.system\.optimize must be true or false"):
        typed_arguments(optimize, {"dry_run": "maybe"})
    with pytest.raises(InvalidArgumentError, match=r"argument files of .* must be an array of text"):
        typed_arguments(optimize, {"files": "a.parquet"})
