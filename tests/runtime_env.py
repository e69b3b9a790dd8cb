"""A process environment in which only USE's runtime dependencies can be imported.

`pip install .` installs `[project] dependencies` and what they require, nothing else; the test
venv has much more (the test extras, their requirements, pip's own packages). A subprocess started
with `runtime_only_env()` gets a `sitecustomize` that refuses every top-level module of an installed
distribution outside that closure, as if it were not installed, in the driver and in every Python
worker Spark starts (workers inherit PYTHONPATH). Code that runs in such a process and imports,
directly or through pyspark, something only the test extras provide fails as a new user's would.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYTHON_DIR = ROOT / "python"


def declared_dependencies() -> list[Requirement]:
    """`[project] dependencies` of the pyproject.toml in this tree (not of the installed metadata,
    which may be older)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"]]


def _applies(req: Requirement, extras: frozenset[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({"extra": e}) for e in (extras or {""}))


def runtime_closure() -> set[str]:
    """Canonical names of every installed distribution that `pip install .` would install: the
    declared dependencies with their extras, and recursively what those require."""
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    todo = [(r, frozenset()) for r in declared_dependencies()]
    while todo:
        req, parent_extras = todo.pop()
        if not _applies(req, parent_extras):
            continue
        name = canonicalize_name(req.name)
        key = (name, frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        names.add(name)
        try:
            requires = md.requires(req.name) or []
        except md.PackageNotFoundError:
            continue  # an optional requirement not installed here; nothing to block or follow
        todo.extend((Requirement(r), frozenset(req.extras)) for r in requires)
    return names


def blocked_modules() -> set[str]:
    """Top-level import names provided only by installed distributions outside the runtime
    closure. Standard-library names are never blocked (the `future` package, a test-only
    requirement, also ships modules named `queue`, `http`, ...)."""
    allowed = runtime_closure() | {"use-engine"}
    blocked = set()
    for module, dists in md.packages_distributions().items():
        if module in sys.stdlib_module_names or module == "use":
            continue
        if not any(canonicalize_name(d) in allowed for d in dists):
            blocked.add(module)
    return blocked


_SITECUSTOMIZE = '''"""Written by tests/runtime_env.py: only USE's runtime dependencies can be imported here."""
import sys

_BLOCKED = frozenset({blocked!r})


class _NotARuntimeDependency:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] in _BLOCKED:
            raise ModuleNotFoundError(
                f"No module named {{name!r}} (not a runtime dependency of use-engine: `pip install .` "
                "would not install it; add it to [project] dependencies if runtime code needs it)",
                name=name,
            )
        return None


sys.meta_path.insert(0, _NotARuntimeDependency)

# Probes such as pyspark's `have_package` ask importlib.util.find_spec, which must answer "not
# installed" (None) for a blocked module rather than raise.
import importlib.util as _util

_find_spec = _util.find_spec


def _find_spec_unless_blocked(name, package=None):
    if name.partition(".")[0] in _BLOCKED:
        return None
    return _find_spec(name, package)


_util.find_spec = _find_spec_unless_blocked
'''


def runtime_only_env(directory: Path, extra_blocked: set[str] = frozenset(), env: dict[str, str] | None = None) -> dict[str, str]:
    """An environment (a copy of `env`, default this process's) whose Python processes import
    only runtime dependencies and this tree's `python/` package; the sitecustomize goes into
    `directory`. `extra_blocked` blocks more modules (to show what the check catches)."""
    directory.mkdir(parents=True, exist_ok=True)
    blocked = sorted(blocked_modules() | set(extra_blocked))
    (directory / "sitecustomize.py").write_text(_SITECUSTOMIZE.format(blocked=blocked))
    out = dict(os.environ if env is None else env)
    path = [str(directory), str(PYTHON_DIR), *filter(None, out.get("PYTHONPATH", "").split(os.pathsep))]
    out["PYTHONPATH"] = os.pathsep.join(path)
    out["PYSPARK_PYTHON"] = sys.executable
    out["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return out
