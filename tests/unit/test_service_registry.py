"""The table registry and the location source: properties come from each Delta log, commits by other
processes are seen at the next refresh, catalog events are applied at once. Real tables (delta-rs
and our own log), no Spark."""

from __future__ import annotations

import os
import shutil

import pytest
from deltalake import DeltaTable

from service_support import AUTO, corrupt_log, plain_table, set_properties
from use.errors import InvalidArgumentError
from use.service import ALTERED, CREATED, DROPPED, LocationSource, TableEvent, TableInfo, TableRegistry
from use.service.sources import read_table


def registry_with(source, changes: list) -> TableRegistry:
    reg = TableRegistry(source, read_table)
    reg.subscribe(changes.append)
    return reg


def test_location_source_lists_paths_and_warehouse_directories(tmp_path) -> None:
    wh = tmp_path / "warehouse"
    plain_table(str(wh / "t1"), AUTO)
    plain_table(str(wh / "sales.db" / "t2"))
    (wh / "not_a_table" / "data").mkdir(parents=True)
    plain_table(str(wh / "_hidden"))
    plain_table(str(wh / "sales.db" / "t2" / "nested"))  # inside a table: data, not a table
    single = plain_table(str(tmp_path / "single"), {"use.gc.enabled": "true"})
    source = LocationSource(paths=[single, str(tmp_path / "missing")], directories=[str(wh), str(tmp_path / "nowhere")])
    tables = {os.path.relpath(t.location, tmp_path): t for t in source.list_tables()}
    assert sorted(tables) == ["single", "warehouse/sales.db/t2", "warehouse/t1"]
    assert dict(tables["warehouse/t1"].properties) == AUTO
    assert dict(tables["single"].properties) == {"use.gc.enabled": "true"}
    assert tables["single"].name == tables["single"].location and tables["single"].version == 1
    with pytest.raises(InvalidArgumentError, match="lists of paths"):
        LocationSource(paths=single)


def test_refresh_sees_commits_of_other_processes(tmp_path) -> None:
    path = plain_table(str(tmp_path / "t"))
    changes: list = []
    reg = registry_with(LocationSource([path]), changes)
    assert [c.kind for c in reg.refresh()] == [CREATED] and dict(reg.get(path).properties) == {}
    assert reg.refresh() == []  # nothing changed, nothing reported
    # delta-rs (another process) sets a property: seen at the next refresh.
    DeltaTable(path).alter.set_table_properties(AUTO, raise_if_not_exists=False)
    (change,) = reg.refresh()
    assert change.kind == ALTERED and dict(change.after.properties) == AUTO and dict(change.before.properties) == {}
    set_properties(path, unset=AUTO)
    (change,) = reg.refresh()
    assert dict(change.after.properties) == {}
    shutil.rmtree(path)
    (change,) = reg.refresh()
    assert change.kind == DROPPED and reg.get(path) is None
    assert [c.kind for c in changes] == [CREATED, ALTERED, ALTERED, DROPPED] and reg.refreshes == 5


def test_a_corrupt_log_keeps_the_table_with_its_error_and_last_properties(tmp_path) -> None:
    path = plain_table(str(tmp_path / "t"), AUTO)
    reg = registry_with(LocationSource([path]), [])
    reg.refresh()
    corrupt_log(path)
    (change,) = reg.refresh()
    info = reg.get(path)
    assert info.error and "CorruptLogError" in info.error and dict(info.properties) == AUTO
    assert change.kind == ALTERED
    # A table first seen corrupt is listed too, with the error and no properties.
    info2 = read_table(path)
    assert info2.error and info2.properties == {}


def test_events_are_applied_at_once(tmp_path) -> None:
    path = plain_table(str(tmp_path / "t"))
    changes: list = []
    reg = registry_with(LocationSource([]), changes)  # the source knows nothing: only events
    change = reg.on_event(TableEvent(CREATED, path, "spark_catalog.default.t"))  # properties read from the log
    assert change.kind == CREATED and reg.get(path).name == "spark_catalog.default.t" and reg.get(path).version == 0
    set_properties(path, AUTO)
    change = reg.on_event(TableEvent(ALTERED, "file:" + path, "spark_catalog.default.t"))  # a metastore URI
    assert change.kind == ALTERED and dict(reg.get(path).properties) == AUTO
    assert reg.on_event(TableEvent(ALTERED, path, "spark_catalog.default.t")) is None  # no change
    assert reg.find("SPARK_CATALOG.default.T").location == path
    # Properties given with the event are taken as they are.
    reg.on_event(TableEvent(ALTERED, path, "spark_catalog.default.t", {"use.optimization.type": "BinPacking"}))
    assert dict(reg.get(path).properties) == {"use.optimization.type": "BinPacking"}
    change = reg.on_event(TableEvent(DROPPED, path))
    assert change.kind == DROPPED and reg.get(path) is None
    assert reg.on_event(TableEvent(DROPPED, path)) is None
    assert reg.on_event(TableEvent(CREATED, str(tmp_path / "nothing"))) is None  # no table there
    assert [c.kind for c in changes] == [CREATED, ALTERED, ALTERED, DROPPED]


def test_pushed_tables_survive_refreshes_and_follow_their_log(tmp_path) -> None:
    listed = plain_table(str(tmp_path / "listed"))
    pushed = plain_table(str(tmp_path / "pushed"))
    reg = registry_with(LocationSource([listed]), [])
    reg.on_event(TableEvent(CREATED, pushed, "db.pushed"))
    reg.refresh()
    assert set(reg.tables()) == {listed, pushed}
    set_properties(pushed, AUTO)  # another process
    reg.refresh()
    assert dict(reg.get(pushed).properties) == AUTO and reg.get(pushed).name == "db.pushed"
    reg.on_event(TableEvent(DROPPED, pushed))
    reg.refresh()
    assert set(reg.tables()) == {listed}


def test_a_failing_source_changes_nothing(tmp_path) -> None:
    path = plain_table(str(tmp_path / "t"))

    class Flaky:
        fail = False

        def list_tables(self):
            if self.fail:
                raise OSError("listing failed")
            return [read_table(path)]

    source = Flaky()
    reg = registry_with(source, [])
    reg.refresh()
    source.fail = True
    with pytest.raises(OSError):
        reg.refresh()
    assert set(reg.tables()) == {path}


def test_bad_events_and_infos_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="kind"):
        TableEvent("renamed", "/t")
    with pytest.raises(InvalidArgumentError, match="location"):
        TableEvent(CREATED, "")
    with pytest.raises(InvalidArgumentError, match="location"):
        TableInfo("", "x")
