"""The layers of the design, checked on the source: a layer imports only the layers below it, and
pure planning code never imports Spark (function-level imports count too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "use"

# layer -> packages it must never import
FORBIDDEN = {
    "use.delta": (
        "pyspark",
        "use.qbeast",
        "use.optimize",
        "use.insights",
        "use.service",
        "use.table",
        "use.cli",
        "use.server",
        "use.sql",
    ),
    "use.qbeast": ("use.optimize", "use.insights", "use.service", "use.table", "use.cli", "use.server", "use.sql"),
    "use.optimize": ("use.insights", "use.service", "use.table", "use.cli", "use.server", "use.sql"),
    # insights are pure functions of table facts: no Spark at all, nothing above them
    "use.insights": ("pyspark", "use.service", "use.table", "use.cli", "use.server", "use.sql"),
    "use.service": ("use.table", "use.cli", "use.server", "use.sql"),
}
# Modules that run Spark; every other module of these layers is pure (no pyspark).
SPARK_MODULES = {
    "use.service.metastore",
    "use.qbeast.writer",
    "use.qbeast.index_plan",
    "use.qbeast.write_tasks",
    "use.qbeast.write_scope",
    "use.qbeast.jvm_write",
    "use.qbeast.reader",
    "use.qbeast.convert",
    "use.qbeast.datasource",
    "use.optimize.executor",
    "use.optimize.clustering",
    "use.optimize.loop",
    "use.optimize.delta_table",
    "use.optimize.partition_filter",
    "use.service.runner",
}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out.append((name, path))
    return out


@pytest.mark.parametrize("name,path", _modules(), ids=lambda v: v if isinstance(v, str) else "")
def test_module_respects_its_layer(name: str, path: Path) -> None:
    imported = _imports(path)
    for layer, forbidden in FORBIDDEN.items():
        if name == layer or name.startswith(layer + "."):
            bad = sorted(i for i in imported for f in forbidden if i == f or i.startswith(f + "."))
            assert not bad, f"{name} imports {bad}, above its layer"
    if name.startswith(("use.qbeast.", "use.optimize.", "use.service.")) and name not in SPARK_MODULES:
        assert not any(i == "pyspark" or i.startswith("pyspark.") for i in imported), f"{name} is pure but imports pyspark"
