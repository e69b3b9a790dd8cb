"""Run every benchmark in turn (`make bench`), each in its own process so each gets a fresh JVM.

Each script prints its own table of side-by-side ratios; extra arguments after `--` go to all of
them unchanged only when they accept them, so pass per-script arguments by running it alone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = (
    "delta_snapshot.py",
    "delta_backends.py",
    "planner_scale.py",
    "insights_pure.py",
    "insights.py",
    "qbeast_write_read.py",
    "convergence.py",
    "drifting_revisions.py",
    "tradeoff.py",
    "sql_surface.py",
    "service.py",
)


def main() -> int:
    failed = []
    for script in SCRIPTS:
        print(f"\n##### {script}", flush=True)
        if subprocess.call([sys.executable, str(HERE / script)]) != 0:
            failed.append(script)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
