"""The import graph of `python/use` as a contract, read from the source (nothing is imported).

The layers are declared once, in pyproject.toml's `[tool.use.layers]`. Every import counts: at module
level, inside a function, and under `if TYPE_CHECKING:`. The rules:

- every module belongs to exactly one layer;
- `import use` imports no module of the package (python/use/__init__.py runs before each of them);
- no import points to a higher layer;
- no cycle between packages (function-level imports included), none between modules at import time;
- a pure module (a module of a `pure` layer that is not in `spark_modules`) imports nothing, however
  indirectly, that imports pyspark or py4j at import time;
- an import inside a function is a deferral of a heavy import (pyspark, py4j, pandas, matplotlib,
  deltalake, pyarrow, numpy, or a `use` module that imports one the importing module does not
  import already) in a module that something light imports at import time (a pure module,
  `import use`, the CLI's `--help`), with a `# deferred: why` comment on or above its line (or above
  the run of imports it is in). Every other import is at module level.
"""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "use"
TABLE = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["use"]["layers"]
ORDER: list[str] = TABLE["order"]
PURE: list[str] = TABLE["pure"]
SPARK_MODULES: list[str] = TABLE["spark_modules"]

#: Libraries a pure module never imports, directly or through another module, at import time.
SPARK_LIBRARIES = ("pyspark", "py4j")
#: Libraries worth deferring for a light caller (each costs a noticeable part of a second to import).
HEAVY_LIBRARIES = (*SPARK_LIBRARIES, "pandas", "matplotlib", "deltalake", "pyarrow", "numpy")
#: What runs light besides the pure modules: `import use` (the public names load lazily) and the
#: command line, whose `--help` imports every subcommand module.
LIGHT_ENTRY_POINTS = ("use", "use.__main__", "use.cli")
#: Imports that break one of the rules and are kept anyway: (module, imported module) -> why.
#: At most a few deferred pyspark imports belong here; everything else is fixed in the structure.
EXCEPTIONS: Mapping[tuple[str, str], str] = {}
MAX_EXCEPTIONS = 3
ROOT_PACKAGE = "use"

FIX_UP = (
    "move the code that needs it up into a layer at or above that one, or move what it uses down "
    "into the layer that owns its data"
)


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    path: Path
    line: int
    target: str  # a module of `use`, or the dotted name of another library's module
    when: str  # "import" (runs when the module is imported), "call" (inside a function), "typing" (TYPE_CHECKING)
    deferred: bool  # a `# deferred: why` comment on or above the line

    @property
    def internal(self) -> bool:
        return self.target == "use" or self.target.startswith("use.")

    @property
    def library(self) -> str:
        return self.target.split(".")[0]

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
PACKAGES = {name for name, path in MODULES.items() if path.name == "__init__.py"}


def _resolve(name: str) -> str:
    """The module of `use` a dotted name lies in (a name imported from a module is that module)."""
    while name not in MODULES and "." in name:
        name = name.rpartition(".")[0]
    return name


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports_of(name: str, path: Path) -> list[Import]:
    source = path.read_text()
    lines = source.splitlines()
    found: list[Import] = []

    # the first line of the run of import statements (blank lines between them allowed) each import
    # belongs to: one `# deferred:` comment above a run covers the imports in it
    run_start: dict[int, int] = {}
    for parent in ast.walk(ast.parse(source)):
        for body in (getattr(parent, f, None) for f in ("body", "orelse", "finalbody")):
            if not isinstance(body, list):
                continue
            for prev, stmt in zip([None, *body], body, strict=False):
                if isinstance(stmt, ast.Import | ast.ImportFrom):
                    adjacent = isinstance(prev, ast.Import | ast.ImportFrom) and not any(
                        line.strip() for line in lines[(prev.end_lineno or prev.lineno) : stmt.lineno - 1]
                    )
                    run_start[stmt.lineno] = run_start[prev.lineno] if adjacent and prev is not None else stmt.lineno

    def deferred(node: ast.stmt) -> bool:
        first = run_start.get(node.lineno, node.lineno)
        span = lines[node.lineno - 1 : (node.end_lineno or node.lineno)]
        above = lines[first - 2].strip() if first >= 2 else ""
        return any("# deferred:" in line for line in span) or above.startswith("# deferred:")

    def targets(node: ast.Import | ast.ImportFrom) -> Iterable[str]:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
            return
        if node.level:
            base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        yield from dict.fromkeys(f"{module}.{a.name}" if f"{module}.{a.name}" in MODULES else module for a in node.names)

    def visit(node: ast.AST, when: str) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for target in targets(node):
                internal = target == "use" or target.startswith("use.")
                found.append(Import(name, path, node.lineno, _resolve(target) if internal else target, when, deferred(node)))
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, "typing")
            for child in node.orelse:
                visit(child, when)
            return
        inner = "call" if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and when != "typing" else when
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(source), "import")
    return found


IMPORTS: list[Import] = [imp for name, path in MODULES.items() for imp in _imports_of(name, path)]
#: module -> the other libraries it imports at import time
LIBRARIES_AT_IMPORT: dict[str, list[Import]] = defaultdict(list)
for _imp in IMPORTS:
    if not _imp.internal and _imp.when == "import":
        LIBRARIES_AT_IMPORT[_imp.module].append(_imp)


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _package(module: str) -> str:
    """Packages are `use` (the root module alone), `use.<x>` for a top-level module and every
    module of the sub-package `use.<x>`."""
    return ".".join(module.split(".")[:2])


def _layer_entries() -> dict[str, str]:
    entries: dict[str, str] = {}
    for layer in ORDER:
        for entry in TABLE.get(layer, []):
            assert entry not in entries, (
                f"pyproject.toml [tool.use.layers]: {entry} is listed in {entries[entry]!r} and {layer!r}"
            )
            entries[entry] = layer
    return entries


def _matches(entry: str, module: str) -> bool:
    """A layer entry names a module, or a package and every module in it; the root package `use`
    stands for python/use/__init__.py alone (each other module is listed under its own name)."""
    return module == entry or (entry != "use" and entry in PACKAGES and module.startswith(entry + "."))


@cache
def layer_of(module: str) -> str:
    layers = [layer for entry, layer in _layer_entries().items() if _matches(entry, module)]
    assert len(layers) == 1, f"{module} is in {len(layers)} layers"
    return layers[0]


def _rank(module: str) -> int:
    return ORDER.index(layer_of(module))


def _import_time_edges() -> dict[str, list[Import]]:
    """module -> the `use` modules importing it runs (the imported module's packages included:
    importing `use.a.b` runs `use/a/__init__.py` first)."""
    edges: dict[str, list[Import]] = defaultdict(list)
    for imp in IMPORTS:
        if imp.internal and imp.when == "import":
            for target in (*_ancestors(imp.target), imp.target):
                if target != imp.module and target not in _ancestors(imp.module):
                    edges[imp.module].append(Import(imp.module, imp.path, imp.line, target, imp.when, imp.deferred))
    return edges


EDGES = _import_time_edges()


def _chain_to(start: str, wanted: Iterable[str]) -> list[Import] | None:
    """The shortest chain of import-time imports from `start` (and the packages it lies in, which
    importing it runs first) to an import of one of `wanted` (libraries), or None."""
    wanted = tuple(wanted)
    seen = {start, *_ancestors(start)}
    queue: deque[tuple[str, list[Import]]] = deque([(m, []) for m in (start, *_ancestors(start))])
    while queue:
        module, chain = queue.popleft()
        for imp in LIBRARIES_AT_IMPORT.get(module, []):
            if imp.library in wanted:
                return [*chain, imp]
        for imp in EDGES.get(module, []):
            if imp.target not in seen:
                seen.add(imp.target)
                queue.append((imp.target, [*chain, imp]))
    return None


def _describe(chain: list[Import]) -> str:
    return " -> ".join(f"{imp.target} ({imp.where})" for imp in chain)


@cache
def _heavy_libraries(module: str) -> frozenset[str]:
    """The heavy libraries importing `module` imports (through any module, at import time)."""
    return frozenset(lib for lib in HEAVY_LIBRARIES if _chain_to(module, (lib,)) is not None)


def _runs_spark(module: str) -> bool:
    """Whether `module` imports pyspark or py4j, when imported or when called, through any module."""
    seen = {module}
    queue = deque([module])
    while queue:
        current = queue.popleft()
        for imp in IMPORTS:
            if imp.module != current or imp.when == "typing":
                continue
            if not imp.internal and imp.library in SPARK_LIBRARIES:
                return True
            if imp.internal and imp.target not in seen:
                seen.add(imp.target)
                queue.append(imp.target)
    return False


def _pure(module: str) -> bool:
    return layer_of(module) in PURE and module not in SPARK_MODULES


@cache
def _light_modules() -> frozenset[str]:
    """Every module something light imports at import time: the pure modules, `import use` and the CLI."""
    roots = [m for m in MODULES if _pure(m)] + [m for m in LIGHT_ENTRY_POINTS if m in MODULES]
    roots += [p for m in roots for p in _ancestors(m)]
    seen = set(roots)
    queue = deque(roots)
    while queue:
        for imp in EDGES.get(queue.popleft(), []):
            if imp.target not in seen:
                seen.add(imp.target)
                queue.append(imp.target)
    return frozenset(seen)


def _strongly_connected(nodes: Iterable[str], edges: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components with more than one node (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def _excepted(imp: Import) -> bool:
    return (imp.module, imp.target) in EXCEPTIONS


def _fail(problems: list[str], rule: str) -> None:
    if problems:
        pytest.fail(f"{rule}\n" + "\n".join(f"  {p}" for p in sorted(set(problems))), pytrace=False)


# --- the table ---------------------------------------------------------------------------------


def test_layer_table_is_well_formed() -> None:
    assert set(PURE) <= set(ORDER), f"pure layers {sorted(set(PURE) - set(ORDER))} are not in order"
    assert all(layer in TABLE for layer in ORDER), f"layers without a key: {[layer for layer in ORDER if layer not in TABLE]}"
    unknown = [entry for entry in _layer_entries() if entry not in MODULES]
    assert not unknown, f"pyproject.toml [tool.use.layers] lists {unknown}, which are not modules of python/use"
    for module in SPARK_MODULES:
        assert module in MODULES, f"spark_modules lists {module}, which is not a module of python/use"
        assert layer_of(module) in PURE, f"spark_modules lists {module}, which is not in a pure layer (only those need listing)"
        assert _runs_spark(module), (
            f"spark_modules lists {module}, which imports no Spark at all: it is pure, drop it from the list"
        )


def test_every_module_is_in_exactly_one_layer() -> None:
    problems = []
    for module, path in MODULES.items():
        layers = [layer for entry, layer in _layer_entries().items() if _matches(entry, module)]
        if len(layers) != 1:
            problems.append(
                f"{path.relative_to(ROOT)}: {module} is in {len(layers)} layers {layers}; list it (or its package) under "
                "exactly one layer of [tool.use.layers] in pyproject.toml"
            )
    _fail(problems, "Every module of python/use belongs to exactly one layer:")


# --- the graph ---------------------------------------------------------------------------------


def test_no_import_points_to_a_higher_layer() -> None:
    problems = [
        f"{imp.where}: {imp.module} ({layer_of(imp.module)}) imports {imp.target} ({layer_of(imp.target)}, a higher layer; "
        f"{imp.when}-time import): {FIX_UP}"
        for imp in IMPORTS
        if imp.internal and _rank(imp.target) > _rank(imp.module) and not _excepted(imp)
    ]
    _fail(problems, f"A layer imports only its own layer and those below it (bottom-up: {' < '.join(ORDER)}):")


def test_no_cycle_between_packages() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    by_pair: dict[tuple[str, str], list[Import]] = defaultdict(list)
    for imp in IMPORTS:
        if imp.internal and _package(imp.module) != _package(imp.target) and not _excepted(imp):
            edges[_package(imp.module)].add(_package(imp.target))
            by_pair[(_package(imp.module), _package(imp.target))].append(imp)
    problems = []
    for component in _strongly_connected(sorted({_package(m) for m in MODULES}), edges):
        closing = [
            f"{imp.where} {imp.module} ({layer_of(imp.module)}) -> {imp.target} ({layer_of(imp.target)})"
            for (a, b), imps in by_pair.items()
            if a in component and b in component
            for imp in imps
            if _rank(imp.target) >= _rank(imp.module)
        ]
        problems.append(
            f"packages {sorted(component)} import each other; the imports among them that do not point down a layer:\n    "
            + "\n    ".join(sorted(set(closing)))
            + f"\n  remove them: {FIX_UP}"
        )
    _fail(problems, "No cycle between packages (imports inside functions count):")


def _shortest_cycle(component: set[str]) -> list[Import]:
    """One shortest cycle of import-time imports through the modules of `component`."""
    best: list[Import] = []
    for start in sorted(component):
        paths: dict[str, list[Import]] = {start: []}
        queue = deque([start])
        while queue:
            module = queue.popleft()
            for imp in EDGES.get(module, []):
                if imp.target == start and (not best or len(paths[module]) + 1 < len(best)):
                    best = [*paths[module], imp]
                if imp.target in component and imp.target not in paths:
                    paths[imp.target] = [*paths[module], imp]
                    queue.append(imp.target)
    return best


def test_no_cycle_between_modules_at_import_time() -> None:
    edges = {module: {imp.target for imp in imps} for module, imps in EDGES.items()}
    problems = []
    for component in _strongly_connected(sorted(MODULES), edges):
        cycle = _shortest_cycle(component)
        problems.append(
            f"{len(component)} modules import each other when imported, e.g. {cycle[0].module} -> "
            + " -> ".join(f"{imp.target} ({imp.where})" for imp in cycle)
            + "; move what they share into a module below them, or remove the import that points up"
        )
    _fail(problems, "No cycle between modules at import time (package __init__ files count):")


def test_pure_modules_import_no_spark() -> None:
    problems = []
    for module in MODULES:
        if _pure(module):
            chain = _chain_to(module, SPARK_LIBRARIES)
            if chain and not any(_excepted(imp) for imp in chain):
                problems.append(
                    f"{module} ({layer_of(module)}, pure) imports Spark when imported: {_describe(chain)}; defer the "
                    "last import into the function that needs it with a `# deferred:` comment, move the pure code it "
                    "uses out of the Spark module, or list the module in spark_modules if it runs Spark"
                )
    _fail(problems, "Pure modules (of the pure layers, not in spark_modules) import nothing that imports pyspark at import time:")


def test_imports_inside_functions_are_deferrals_of_heavy_modules() -> None:
    light = _light_modules()
    problems = []
    for imp in IMPORTS:
        if imp.when != "call" or _excepted(imp):
            continue
        brings = _heavy_libraries(imp.target) if imp.internal else frozenset({imp.library}) & set(HEAVY_LIBRARIES)
        spared = brings - _heavy_libraries(imp.module)
        if imp.module == ROOT_PACKAGE and imp.internal:
            spared = frozenset({"every use module"})  # the root package runs before every module: it names all lazily
        if not spared:
            problems.append(
                f"{imp.where}: {imp.module} imports {imp.target} inside a function, but that spares its importers no "
                f"heavy library ({', '.join(HEAVY_LIBRARIES)}) the module does not import already: import it at "
                "module level (if that makes an import cycle, move the code both need into a module below them both)"
            )
        elif imp.module not in light:
            problems.append(
                f"{imp.where}: {imp.module} defers {imp.target}, but nothing light (a pure module, `import use`, the "
                "CLI) imports it at import time, so the deferral spares no one: import it at module level"
            )
        elif not imp.deferred:
            problems.append(
                f"{imp.where}: {imp.module} defers {imp.target} for its light callers: say so on or above the line "
                "(`# deferred: <heavy thing> for <which caller>`)"
            )
    _fail(problems, "An import inside a function only defers a heavy import for a light caller, and says so:")


def test_the_root_package_imports_nothing_of_use_when_imported() -> None:
    problems = [
        f"{imp.where}: {ROOT_PACKAGE} imports {imp.target} when imported; python/use/__init__.py runs before every "
        "module of the package, so it loads its public names lazily (in `__getattr__`, with a `# deferred:` comment)"
        for imp in IMPORTS
        if imp.module == ROOT_PACKAGE and imp.internal and imp.when == "import"
    ]
    _fail(problems, "`import use` imports no module of the package:")


def test_exceptions_are_few_and_still_needed() -> None:
    assert len(EXCEPTIONS) <= MAX_EXCEPTIONS, f"{len(EXCEPTIONS)} exceptions; at most {MAX_EXCEPTIONS}: fix the structure instead"
    for (module, target), why in EXCEPTIONS.items():
        assert why.strip(), f"the exception {module} -> {target} must say why it is kept"
        assert any(imp.module == module and imp.target == target for imp in IMPORTS), (
            f"the exception {module} -> {target} is not needed any more: remove it from EXCEPTIONS"
        )
