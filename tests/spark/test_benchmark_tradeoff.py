"""Smoke test of benchmarks/tradeoff.py's core on tiny sizes, so the yardstick cannot rot.

Every contender runs (k = 1 and 2, a few appends of the drifting shape) on the shared session; the
checks are about what the benchmark claims to measure, not about the figures: Z-order rounds rewrite
the whole table, a plain Delta sample reads every file, the read costs are the files a real read
scans, and the report, plot and saved rounds come out.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "benchmarks"))

import tradeoff

TINY = tradeoff.Settings(appends=3, rows_per_append=200, cube_size=1000, every=(1, 2), shapes=("drift",),
                         autocompact_min_files=2, ref_every=1, jobs=2)  # fmt: skip


def test_every_contender_runs_and_reports(spark, tmp_path):
    runs = tradeoff.run_benchmark(spark, TINY, str(tmp_path / "work"), log=lambda _: None)
    assert [(r.contender, r.k) for r in runs] == [(c, k) for k in (1, 2) for c in tradeoff.CONTENDERS]
    for r in runs:
        assert [p.appends for p in r.rounds] == TINY.round_points(r.k)
        assert all(p.appended_bytes > 0 and p.ref_appends == p.appends for p in r.rounds)
        if r.contender != "ours":
            last = r.rounds[-1]  # a plain Delta sample scans the whole table
            assert (last.reads.sample_files, last.reads.sample_bytes) == (last.table_files, last.table_bytes)
        if r.contender in ("zorder", "hilbert"):
            # every round re-sorts the whole table (Delta's OPTIMIZE ZORDER BY), not only the new files
            for before, after in zip(r.rounds, r.rounds[1:], strict=False):
                new = after.appended_bytes - before.appended_bytes
                assert after.round_bytes == before.table_bytes + new
    drift_ours = next(r for r in runs if r.contender == "ours" and r.k == 1)
    assert drift_ours.rounds[-1].revisions >= 1

    text = tradeoff.report(TINY, runs)
    assert all(c in text for c in tradeoff.CONTENDERS) and "goals" in text
    txt, png, js = tradeoff.save(TINY, runs, text, str(tmp_path / "out"))
    assert os.path.getsize(png) > 0 and open(txt).read().startswith(text)
    settings, loaded = tradeoff.load(js)
    assert settings == TINY and loaded == runs


def test_read_cost_is_what_a_read_scans(spark, tmp_path):
    """The metadata-only read costs equal the files Spark's scan of the real read lists."""
    from deltalake import write_deltalake

    from use import DeltaTable, QbeastTable
    from use.qbeast.reader import load_snapshot

    q, d = str(tmp_path / "q"), str(tmp_path / "d")
    for i in range(3):
        data = tradeoff.batch(TINY, "drift", i)
        tradeoff.write_qbeast(spark, TINY, "drift", data, q)
        write_deltalake(d, data, mode="append")
    flt = TINY.range_filter("drift")
    qt, dt = QbeastTable.for_path(spark, q), DeltaTable.for_path(spark, d)
    measure = tradeoff.Measurer(spark, TINY, "drift")
    reads_q, reads_d = measure(load_snapshot(q)), tradeoff.Measurer(spark, TINY, "drift")(load_snapshot(d))
    assert reads_q.sample_files == len(qt.read(sample=tradeoff.SAMPLE).inputFiles())
    assert reads_q.range_files == len(qt.read(filter=flt).inputFiles())
    assert reads_d.sample_files == len(dt.read().sample(tradeoff.SAMPLE).inputFiles()) == 3
    assert reads_d.range_files == len(dt.read(filter=flt).inputFiles())


def test_ours_properties_reach_the_settings_and_survive_a_saved_run(tmp_path):
    s, _ = tradeoff.parse_args(["--quick", "--ours-property", "tiering.ratio=0", "--ours-property", "tiering.max-fragments=2"])
    assert s.ours_properties == (("tiering.ratio", "0"), ("tiering.max-fragments", "2"))
    with pytest.raises(SystemExit):
        tradeoff.parse_args(["--ours-property", "tiering.ratio"])
    tradeoff.save_rounds(s, [], str(tmp_path / "r.json"))
    assert tradeoff.load(str(tmp_path / "r.json"))[0] == s
    assert "ours with tiering.ratio=0, tiering.max-fragments=2." in tradeoff.report(s, [])


def _run(shape, contender, k):
    reads = tradeoff.Reads(1, 10, 2, 20)
    point = tradeoff.Round(appends=k, appended_bytes=100, rewritten_bytes=50, round_bytes=50, table_files=2,
                           table_bytes=100, revisions=1, iterations=1, seconds=0.1, reads=reads, ref=reads,
                           ref_appends=k)  # fmt: skip
    return tradeoff.Run(shape, contender, k, [point])


def test_saved_runs_of_the_same_data_combine_into_one_table(tmp_path):
    """Baselines and ours measured in two invocations (ours after a rule change) give one table;
    runs of other data, of ours with other properties, or the same run twice are refused."""
    from _tradeoff_report import combine

    base = tradeoff.Settings(appends=4, every=(1, 2), contenders=("binpack", "zorder"))
    ours = tradeoff.Settings(appends=4, every=(2,), contenders=("ours",), ours_properties=(("tiering.ratio", "4"),))
    a = [_run(sh, c, k) for sh in tradeoff.SHAPES for k in (1, 2) for c in ("binpack", "zorder")]
    b = [_run(sh, "ours", 2) for sh in tradeoff.SHAPES]
    tradeoff.save_rounds(base, a, str(tmp_path / "a.json"))
    tradeoff.save_rounds(ours, b, str(tmp_path / "b.json"))
    s, runs = combine([tradeoff.load(str(tmp_path / "a.json")), tradeoff.load(str(tmp_path / "b.json"))])
    assert s.every == (1, 2) and s.contenders == ("ours", "binpack", "zorder")
    assert s.ours_properties == (("tiering.ratio", "4"),)
    assert [(r.shape, r.k, r.contender) for r in runs][:4] == [("fixed", 1, "binpack"), ("fixed", 1, "zorder"),
                                                               ("fixed", 2, "ours"), ("fixed", 2, "binpack")]  # fmt: skip
    assert "vs binpack" in tradeoff.report(s, runs)
    tradeoff.main(["--replot", f"{tmp_path / 'a.json'},{tmp_path / 'b.json'}", "--out", str(tmp_path / "out")])
    assert os.path.exists(tmp_path / "out" / "tradeoff.png")
    with pytest.raises(ValueError, match="cube_size"):
        combine([(base, a), (tradeoff.Settings(appends=4, cube_size=7), b)])
    with pytest.raises(ValueError, match="different properties"):
        combine([(ours, b), (tradeoff.Settings(appends=4, contenders=("ours",)), [_run("fixed", "ours", 1)])])
    with pytest.raises(ValueError, match="two saved runs"):
        combine([(base, a), (base, a[:1])])
