"""Run test tiers at once, each in a pytest process of its own, and print each tier's output whole
when it ends (what `make test` runs after the lint).

    python tests/run_tiers.py [--log-dir DIR] TIER... [-- PYTEST_ARGS...]

The tiers wait on different things (tests/spark mostly on its local Spark and the oracle engines'
JVMs, tests/server on `use serve` subprocesses), so on two cores they finish together sooner than
one after the other. Their outputs would interleave line by line; instead each goes to
DIR/<tier>.log (build/test-logs by default) and is printed, framed by the tier's name, exit code and
wall time, as soon as that tier ends, while the others run on. A line every few minutes says which
tiers still run. The exit code is 0 only when every tier passed. Ctrl-C (or SIGTERM) interrupts
every tier as Ctrl-C interrupts one pytest, and their logs so far are printed.
"""

from __future__ import annotations

import argparse
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATUS_EVERY_S = 180.0
RULE = "=" * 100


def _wait(name: str, proc: subprocess.Popen[bytes], done: queue.Queue[tuple[str, int]]) -> None:
    done.put((name, proc.wait()))


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in args:
        extra = args[args.index("--") + 1 :]
        args = args[: args.index("--")]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--log-dir", type=Path, default=ROOT / "build" / "test-logs")
    parser.add_argument("tiers", nargs="+", help="folders under tests/, e.g. unit spark server")
    opts = parser.parse_args(args)
    for tier in opts.tiers:
        if not (ROOT / "tests" / tier).is_dir():
            parser.error(f"tests/{tier} is not a folder of tests (the tiers are tests/unit, tests/spark, tests/server)")
    opts.log_dir.mkdir(parents=True, exist_ok=True)

    done: queue.Queue[tuple[str, int]] = queue.Queue()
    procs: dict[str, subprocess.Popen[bytes]] = {}
    logs: dict[str, Path] = {}
    started = time.monotonic()
    for tier in opts.tiers:
        logs[tier] = opts.log_dir / f"{tier}.log"
        with logs[tier].open("wb") as log:
            # a session of its own: Ctrl-C in the terminal reaches this runner only, which passes it on
            procs[tier] = subprocess.Popen(
                [sys.executable, "-m", "pytest", "-q", f"tests/{tier}", *extra],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        threading.Thread(target=_wait, args=(tier, procs[tier], done), daemon=True).start()
        print(f"tests/{tier}: running (pid {procs[tier].pid}, output in {_shown(logs[tier])})", flush=True)

    def interrupt(signum: int, frame: object) -> None:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)

    codes: dict[str, int] = {}
    took: dict[str, float] = {}
    while len(codes) < len(procs):
        try:
            tier, code = done.get(timeout=STATUS_EVERY_S)
        except queue.Empty:
            running = [t for t in procs if t not in codes]
            print(f"... still running: {', '.join(f'tests/{t}' for t in running)} ({_minutes(started)})", flush=True)
            continue
        codes[tier], took[tier] = code, time.monotonic() - started
        print(f"\n{RULE}\ntests/{tier}: {_verdict(code)} in {took[tier]:.0f} s\n{RULE}", flush=True)
        sys.stdout.buffer.write(logs[tier].read_bytes())
        sys.stdout.flush()

    print(f"\n{RULE}")
    for tier in procs:
        print(f"tests/{tier}: {_verdict(codes[tier])} in {took[tier]:.0f} s (log: {_shown(logs[tier])})")
    print(RULE, flush=True)
    return 0 if all(code == 0 for code in codes.values()) else 1


def _shown(path: Path) -> str:
    """A log's path as the user can open it from the project's root (where make runs)."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _verdict(code: int) -> str:
    return "passed" if code == 0 else f"FAILED (pytest exit {code})"


def _minutes(since: float) -> str:
    return f"{(time.monotonic() - since) / 60:.0f} min"


if __name__ == "__main__":
    sys.exit(main())
