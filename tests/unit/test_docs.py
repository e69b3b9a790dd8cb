"""The generated reference pages (docs/configuration.md, docs/architecture.md) are what the generator
makes of the code now: a changed key, module, layer or docstring fails here until they are regenerated."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATE = _generator()


@pytest.mark.parametrize("page", sorted(GENERATE.pages()), ids=lambda p: p.name)
def test_generated_page_matches_the_code(page: Path) -> None:
    expected = GENERATE.pages()[page]
    assert page.read_text(encoding="utf-8") == expected, (
        f"{page.relative_to(ROOT)} differs from what the code says: run `{GENERATE.COMMAND}` and commit the page"
    )


def test_first_sentence_stops_at_the_sentence_not_at_abbreviations() -> None:
    first = GENERATE.first_sentence
    assert first("One thing, e.g. this. Then more.") == "One thing, e.g. this."
    assert first("Delta's `OPTIMIZE ... WHERE`: the partitions.\n\nMore.") == "Delta's `OPTIMIZE ... WHERE`: the partitions."
    assert first("A list follows:\n - one\n - two") == "A list follows:"
    assert first("a | b") == "a \\| b"


def test_a_module_belongs_to_the_layer_of_its_nearest_package() -> None:
    layers = {"order": ["base", "delta", "app"], "base": ["use.errors"], "delta": ["use.delta"], "app": ["use", "use.cli"]}
    assert GENERATE.layer_of("use.delta.log", layers) == "delta"
    assert GENERATE.layer_of("use.errors", layers) == "base"
    assert GENERATE.layer_of("use", layers) == "app"
    assert GENERATE.layer_of("use.cli.serve", layers) == "app"
    assert GENERATE.layer_of("use.qbeast.cube", layers) is None  # the root package does not swallow what the table forgets


def test_the_module_map_lists_every_module_and_scala_file() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for path in (ROOT / "python" / "use").rglob("*.py"):
        parts = path.relative_to(ROOT / "python").with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        assert f"| `{name}`" in text, name
    for path in (ROOT / "jvm-shim").rglob("*.scala"):
        assert f"`{path.parent.relative_to(ROOT).as_posix()}/`" in text and f"| `{path.name}` |" in text, path
