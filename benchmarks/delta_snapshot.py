"""Snapshot load time on a large Delta log: ours vs delta-rs vs reading the checkpoint alone.

Builds (once, cached under --data-dir) a table with `--files` live files added over `--commits`
commits, with a classic checkpoint every 10 commits written by our checkpoint code, and per-file
stats on four columns. Data files are not written: a snapshot never opens them. Then, in one run and
alternating the contenders, times
  ours     DeltaLog.for_path(p).snapshot() and touching .files (fresh DeltaLog: no cache)
  delta-rs DeltaTable(p) plus its file list (get_add_actions)
  floor    pyarrow reading the last checkpoint parquet alone
and prints median seconds and the ratios ours/delta-rs and ours/floor.

    .venv/bin/python benchmarks/delta_snapshot.py [--files N --commits M --runs R]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from use.delta import DeltaLog

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", pa.timestamp("us", "UTC")), ("score", pa.float64())])
CHECKPOINT_EVERY = 10


def _commit_lines(version: int, first_file: int, count: int, now_ms: int) -> bytes:
    """One commit: commitInfo + `count` adds with Delta-style stats (written directly, fast)."""
    info = {
        "commitInfo": {
            "timestamp": now_ms,
            "operation": "WRITE",
            "operationParameters": {"mode": "Append", "partitionBy": "[]"},
            "readVersion": version - 1,
            "isBlindAppend": True,
            "engineInfo": "USE-benchmark",
        }
    }
    lines = [json.dumps(info, separators=(",", ":"))]
    for k in range(first_file, first_file + count):
        stats = (
            f'{{"numRecords":1000,"minValues":{{"id":{k * 1000},"name":"n{k:08d}","ts":"2024-01-01T00:00:00.000Z","score":0.5}},'
            f'"maxValues":{{"id":{k * 1000 + 999},"name":"n{k:08d}z","ts":"2024-01-02T00:00:00.000Z","score":9.5}},'
            f'"nullCount":{{"id":0,"name":0,"ts":0,"score":{k % 3}}}}}'
        )
        add = {
            "add": {
                "path": f"{uuid.UUID(int=k)}.parquet",
                "partitionValues": {},
                "size": 100_000 + k % 1000,
                "modificationTime": now_ms,
                "dataChange": True,
                "stats": stats,
            }
        }
        lines.append(json.dumps(add, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode()


def build_table(path: Path, files: int, commits: int) -> None:
    marker = path / "_built.json"
    want = {"files": files, "commits": commits, "format": 1}
    if marker.exists() and json.loads(marker.read_text()) == want:
        return
    if path.exists():
        shutil.rmtree(path)
    t0 = time.perf_counter()
    log = DeltaLog.for_path(str(path))
    log.create(SCHEMA, configuration={"delta.checkpointInterval": str(CHECKPOINT_EVERY)})
    log_dir = path / "_delta_log"
    per_commit, extra = divmod(files, commits)
    now_ms = int(time.time() * 1000)
    next_file = 0
    for v in range(1, commits + 1):
        n = per_commit + (1 if v <= extra else 0)
        (log_dir / f"{v:020d}.json").write_bytes(_commit_lines(v, next_file, n, now_ms))
        next_file += n
        if v % CHECKPOINT_EVERY == 0:
            log.checkpoint(log.snapshot(version=v))
    marker.write_text(json.dumps(want))
    print(f"built {files} files over {commits} commits in {time.perf_counter() - t0:.1f}s at {path}", file=sys.stderr)


def _median_time(fn: Callable[[], object], runs: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--commits", type=int, default=1_005)  # 5 JSON commits after the last checkpoint
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--data-dir", default=str(Path(__file__).resolve().parent / "data"))
    args = ap.parse_args(argv)
    if args.files < args.commits or args.commits < 1:
        ap.error("need --commits >= 1 and --files >= --commits")
    import deltalake

    path = Path(args.data_dir) / f"delta_snapshot_{args.files}_{args.commits}"
    build_table(path, args.files, args.commits)
    last_cp = json.loads((path / "_delta_log" / "_last_checkpoint").read_text())["version"]
    cp_path = path / "_delta_log" / f"{last_cp:020d}.checkpoint.parquet"

    def ours() -> int:
        snap = DeltaLog.for_path(str(path)).snapshot()
        return snap.files.num_rows

    def delta_rs() -> int:
        t = deltalake.DeltaTable(str(path))
        return len(t.get_add_actions(flatten=False))

    def delta_rs_uris() -> int:
        return len(deltalake.DeltaTable(str(path)).file_uris())

    def floor() -> int:
        return pq.read_table(cp_path).num_rows

    assert ours() == args.files, "our snapshot lost files"
    assert delta_rs() == args.files, "delta-rs sees another file count"
    contenders = {
        "ours": ours,
        "delta-rs (get_add_actions)": delta_rs,
        "delta-rs (file_uris)": delta_rs_uris,
        "floor (checkpoint read)": floor,
    }
    results: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(args.runs):  # interleaved, so drift in machine load hits everyone alike
        for name, fn in contenders.items():
            results[name].append(_median_time(fn, 1)[0])
    med = {k: statistics.median(v) for k, v in results.items()}
    print(
        f"\nDelta snapshot load: {args.files} live files, {args.commits} commits, checkpoint every {CHECKPOINT_EVERY} "
        f"(last at v{last_cp}, {args.commits - last_cp} commits after it), median of {args.runs} runs\n"
    )
    print(f"{'contender':<28}{'median s':>10}{'min s':>10}{'ours / this':>13}")
    for name, m in med.items():
        print(f"{name:<28}{m:>10.4f}{min(results[name]):>10.4f}{med['ours'] / m:>13.2f}")
    ratio_rs = med["ours"] / med["delta-rs (get_add_actions)"]
    print(
        f"\nours / delta-rs = {ratio_rs:.2f}x (goal <= 1.5x)   ours / floor = {med['ours'] / med['floor (checkpoint read)']:.2f}x"
    )

    # Stats parsing for data skipping over the whole snapshot (the snapshot itself not timed).
    from use.delta.predicates import Comparison
    from use.delta.skipping import files_matching
    from use.delta.stats_parse import parse_stats

    snap = DeltaLog.for_path(str(path)).snapshot()
    rs_table = deltalake.DeltaTable(str(path))
    pred = Comparison("id", "<", 5_000_000)
    expected = 5_000
    assert files_matching(snap.files, pred, snap.schema).true_count == expected

    def ours_stats() -> object:
        s = DeltaLog.for_path(str(path)).snapshot()
        return parse_stats(s.files, s.schema)

    stats_contenders = {
        "ours load + parse_stats": ours_stats,
        "delta-rs load + flat stats": lambda: deltalake.DeltaTable(str(path)).get_add_actions(flatten=True),
        "ours parse_stats alone": lambda: parse_stats(snap.files, snap.schema),
        "ours files_matching alone": lambda: files_matching(snap.files, pred, snap.schema),
        "delta-rs flat stats alone": lambda: rs_table.get_add_actions(flatten=True),
    }
    sres: dict[str, list[float]] = {k: [] for k in stats_contenders}
    for _ in range(args.runs):
        for name, fn in stats_contenders.items():
            sres[name].append(_median_time(fn, 1)[0])
    smed = {k: statistics.median(v) for k, v in sres.items()}
    base = smed["delta-rs load + flat stats"]
    print(f"\nSnapshot + typed per-file stats (what data skipping needs), same table, median of {args.runs}")
    print("(delta-rs parses stats while loading, so its 'alone' row is only a conversion)\n")
    print(f"{'contender':<28}{'median s':>10}{'this / delta-rs':>17}")
    for name, m in smed.items():
        print(f"{name:<28}{m:>10.4f}{m / base:>17.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
