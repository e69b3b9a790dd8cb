"""`pip install .` without the test extras must be enough for every runtime path (issue 11, §6:
`QbeastTable.write` failed because mapInArrow needs pandas, which only the test extras installed)."""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from runtime_env import runtime_closure, runtime_only_env


def test_runtime_dependencies_cover_pysparks_arrow_needs() -> None:
    """USE runs mapInArrow and Arrow conversions on every write and rewrite: what pyspark lists in
    its `sql` extra for those paths must be among the runtime dependencies."""
    needed = {
        canonicalize_name(req.name)
        for req in map(Requirement, md.requires("pyspark") or [])
        if req.marker is not None and req.marker.evaluate({"extra": "sql"})
    }
    assert needed, "pyspark's metadata lists no `sql` extra; revisit this check"
    missing = needed - runtime_closure()
    assert not missing, f"runtime dependencies lack {sorted(missing)}, which pyspark's Arrow paths need"


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, check=False)


def test_the_runtime_only_environment_hides_the_test_extras(tmp_path: Path) -> None:
    env = runtime_only_env(tmp_path / "site")
    hidden = _run(["-c", "import deltalake"], env)
    assert hidden.returncode != 0 and "not a runtime dependency" in hidden.stderr
    seen = _run(["-c", "import pyspark, pyarrow, pandas, use.tables, use.server"], env)
    assert seen.returncode == 0, seen.stderr


def test_write_read_optimize_run_with_runtime_dependencies_only(tmp_path: Path) -> None:
    env = runtime_only_env(tmp_path / "site")
    script = Path(__file__).resolve().parents[1] / "runtime_paths.py"
    done = _run([str(script), str(tmp_path / "tables")], env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
