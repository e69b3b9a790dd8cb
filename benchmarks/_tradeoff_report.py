"""The trade-off benchmark's results (benchmarks/tradeoff.py): what a run measured, and the table,
goals, plot and saved rounds made of it. No Spark here: a saved run (tradeoff.json) is re-rendered
or compared with this module alone.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from _common import fmt_table

CONTENDERS = ("ours", "binpack", "zorder", "hilbert")
SHAPES = ("fixed", "drift")
SAMPLE = 0.01
#: Delta's spark.databricks.delta.autoCompact.minNumFiles.
DELTA_AUTOCOMPACT_MIN_FILES = 50

#: The issue's goals for ours (issue 14 section 4).
GOAL_REWRITE = {10: 3.0, 1: 5.0}
GOAL_WORST = 1.5
GOAL_MEDIAN = 1.2


@dataclass(frozen=True)
class Settings:
    """What a run measures. The default sizes are the issue's own scenario (1,000 rows per append, cube
    size 2,000): a round of 10 appends is 5 cubes of rows. What a round must rewrite depends on that
    ratio (rows per round / cube size): keeping the root in one file after every round costs at least
    1 + C/R per byte appended (docs/benchmarks.md, "What the read goal costs at least"), 1.2 here, 2.0 at 500 rows and cube size 5,000
    (a round = one cube, the sizes of the run before); run both with --rows-per-append/--cube-size."""

    appends: int = 200
    rows_per_append: int = 1000
    cube_size: int = 2000
    every: tuple[int, ...] = (1, 10, 50)
    shapes: tuple[str, ...] = SHAPES
    contenders: tuple[str, ...] = CONTENDERS
    drift: float = 0.5
    autocompact_min_files: int = DELTA_AUTOCOMPACT_MIN_FILES
    ref_every: int = 10
    jobs: int = 2
    seed: int = 0
    #: `use.optimization.*` keys (without the prefix) given to ours' optimize() calls, e.g.
    #: (("tiering.ratio", "0"),): to compare settings of our default chain; empty = the defaults.
    ours_properties: tuple[tuple[str, str], ...] = ()

    def x_width(self, shape: str) -> float:
        """The width of x's range over all appends of a shape (x starts in [0, 100))."""
        return 100.0 + (self.drift * (self.appends - 1) if shape == "drift" else 0.0)

    def range_filter(self, shape: str) -> str:
        """1% of x's final range, in its middle."""
        w = self.x_width(shape)
        return f"x >= {w / 2:g} AND x < {w / 2 + w / 100:g}"

    def round_points(self, k: int) -> list[int]:
        """Appends done at the end of each round of a run optimized every k appends."""
        points = list(range(k, self.appends + 1, k))
        if not points or points[-1] != self.appends:
            points.append(self.appends)
        return points

    def ref_points(self) -> list[int]:
        needed = sorted({n for k in self.every for n in self.round_points(k)})
        return [n for n in needed if n % self.ref_every == 0 or n < self.ref_every or n == self.appends]


@dataclass(frozen=True)
class Reads:
    sample_files: int
    sample_bytes: int
    range_files: int
    range_bytes: int


@dataclass(frozen=True)
class Round:
    appends: int
    appended_bytes: int  # cumulative
    rewritten_bytes: int  # cumulative
    round_bytes: int  # rewritten by this round
    table_files: int
    table_bytes: int
    revisions: int  # indexed revisions (0 for plain Delta)
    iterations: int
    seconds: float
    reads: Reads
    ref: Reads  # the one-go table this round is held against
    ref_appends: int


@dataclass
class Run:
    shape: str
    contender: str
    k: int
    rounds: list[Round] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def rewrite_ratio(self) -> float:
        last = self.rounds[-1]
        return last.rewritten_bytes / max(1, last.appended_bytes)

    @property
    def round_share(self) -> float:
        """Median share of the table a round rewrites (1.0: every round is O(table))."""
        return statistics.median(r.round_bytes / max(1, r.table_bytes) for r in self.rounds)

    def ratios(self, attr: str) -> list[float]:
        return [getattr(r.reads, attr) / max(1, getattr(r.ref, attr)) for r in self.rounds]


# --- report ---------------------------------------------------------------------------------

HEADER = ["shape", "k", "contender", "rounds", "rewritten/appended", "round/table", "sample files", "sample bytes",
          "range files", "range bytes", "files", "revisions", "goals (ours)"]  # fmt: skip
READS = ("sample_files", "sample_bytes", "range_files", "range_bytes")


def med_worst(run: Run, attr: str) -> tuple[float, float]:
    """Median and worst round of a read ratio (run / one-go)."""
    ratios = run.ratios(attr)
    return statistics.median(ratios), max(ratios)


def goal_text(run: Run) -> str:
    """The issue's goals for ours at this k, each marked ok or MISS."""
    if run.contender != "ours":
        return ""
    out = []
    limit = GOAL_REWRITE.get(run.k)
    if limit is not None:
        out.append(f"rw<={limit:g} {'ok' if run.rewrite_ratio <= limit else 'MISS'}")
    if run.k == 10:
        med = max(med_worst(run, "sample_files")[0], med_worst(run, "range_files")[0])
        worst = max(med_worst(run, "sample_files")[1], med_worst(run, "range_files")[1])
        out.append(f"worst<={GOAL_WORST:g} {'ok' if worst <= GOAL_WORST else 'MISS'}")
        out.append(f"med<={GOAL_MEDIAN:g} {'ok' if med <= GOAL_MEDIAN else 'MISS'}")
    return ", ".join(out) or "-"


def dominance_lines(runs: Sequence[Run]) -> list[str]:
    """Per shape and k and baseline: the goal "ahead of every baseline on reads at equal or lower
    cost": ours' median read ratios all <= the baseline's, and ours rewrites no more than it."""
    lines = []
    for shape in dict.fromkeys(r.shape for r in runs):
        for k in dict.fromkeys(r.k for r in runs):
            group = {r.contender: r for r in runs if r.shape == shape and r.k == k}
            ours = group.get("ours")
            if ours is None:
                continue
            for name, other in group.items():
                if name == "ours":
                    continue
                behind = [a for a in READS if med_worst(ours, a)[0] > med_worst(other, a)[0]]
                cost_ok = ours.rewrite_ratio <= other.rewrite_ratio
                reads = "reads ahead" if not behind else "reads behind on " + ", ".join(behind)
                cost = f"rewrites {ours.rewrite_ratio:.2f}x vs {other.rewrite_ratio:.2f}x"
                lines.append(f"  {shape:5} k={k:<3} vs {name:8} {reads}; {cost}: "
                             f"{'ok' if cost_ok and not behind else 'MISS'}")  # fmt: skip
    return lines


def table(s: Settings, runs: Sequence[Run]) -> str:
    body = []
    for r in runs:
        expected = len(s.round_points(r.k))  # fewer: a run cut short (a saved partial run)
        done = len(r.rounds) if len(r.rounds) == expected else f"{len(r.rounds)} of {expected}"
        cells: list[Any] = [r.shape, r.k, r.contender, done, r.rewrite_ratio, r.round_share]
        cells += ["{:.2f} / {:.2f}".format(*med_worst(r, attr)) for attr in READS]
        last = r.rounds[-1]
        cells += [last.table_files, last.revisions, goal_text(r)]
        body.append(cells)
    return fmt_table(HEADER, body)


def report(s: Settings, runs: Sequence[Run]) -> str:
    compaction = (f"SmallFiles: bin-packs once {s.autocompact_min_files} files < maxFileSize/2 exist"
                  if s.autocompact_min_files >= 2 else "BinPacking every round")  # fmt: skip
    lines = [
        (f"{s.appends} appends of {s.rows_per_append} rows, cube size {s.cube_size}, optimized every k in "
         f"{list(s.every)} appends; drift shape: x shifts {s.drift:g} per append. Reads: sample({SAMPLE}) and "
         f"`{s.range_filter('fixed')}` (drift: `{s.range_filter('drift')}`), files and bytes as "
         f"median / worst round of (table / the same rows written at once; one-go tables every {s.ref_every} "
         f"appends). round/table: median bytes a round rewrites / table bytes. "
         + (f"ours with {', '.join(f'{k}={v}' for k, v in s.ours_properties)}. " if s.ours_properties else "")
         + f"binpack = Delta auto-compaction ({compaction})."),
        "",
        table(s, runs),
        "",
        (f"goals (issue 14, ours): k=10 rewritten/appended <= {GOAL_REWRITE[10]:g}, sample and range files <= "
         f"{GOAL_WORST:g}x one-go at every round, median <= {GOAL_MEDIAN:g}x; k=1 rewritten/appended <= "
         f"{GOAL_REWRITE[1]:g}; ahead of every baseline on reads (medians) at equal or lower cost:"),
        *dominance_lines(runs),
        "Plain Delta tables (binpack, zorder, hilbert) cannot prune a sample: df.sample(0.01) reads every file.",
    ]  # fmt: skip
    return "\n".join(lines)


def plot(s: Settings, runs: Sequence[Run], png: str) -> None:
    """Per (shape, k) row: cumulative bytes rewritten per byte appended, and sample/range files vs one-go."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    keys = list(dict.fromkeys((r.shape, r.k) for r in runs))
    cols = (("rewritten / appended", None), ("sample(0.01) files / one-go", "sample_files"),
            ("1% range files / one-go", "range_files"))  # fmt: skip
    fig, axes = plt.subplots(len(keys), len(cols), figsize=(5 * len(cols), 3 * len(keys)), squeeze=False)
    colors = dict(zip(CONTENDERS, ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=False))
    styles = dict(zip(CONTENDERS, ("-", "-", "--", ":"), strict=False))  # zorder and hilbert often coincide
    for row, (shape, k) in enumerate(keys):
        for col, (title, attr) in enumerate(cols):
            ax = axes[row][col]
            for r in runs:
                if (r.shape, r.k) != (shape, k):
                    continue
                xs = [p.appends for p in r.rounds]
                ys = ([p.rewritten_bytes / max(1, p.appended_bytes) for p in r.rounds] if attr is None
                      else r.ratios(attr))  # fmt: skip
                ax.plot(xs, ys, label=r.contender, color=colors.get(r.contender), linestyle=styles.get(r.contender),
                        marker="." if len(xs) < 30 else None)  # fmt: skip
            if attr is None and k in GOAL_REWRITE:
                ax.axhline(GOAL_REWRITE[k], color="gray", linestyle="--", linewidth=0.8, label=f"goal k={k}")
            if attr is not None:
                ax.set_yscale("log")
                ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
                ax.yaxis.set_minor_formatter(ticker.NullFormatter())
                ax.axhline(GOAL_WORST, color="gray", linestyle="--", linewidth=0.8, label="goal worst")
                ax.axhline(GOAL_MEDIAN, color="gray", linestyle=":", linewidth=0.8, label="goal median")
            ax.set_title(f"{shape}, k={k}: {title}", fontsize=9)
            ax.set_xlabel("appends", fontsize=8)
            ax.tick_params(labelsize=7)
            if col == 0:  # every row: rows may hold different contenders (zorder/hilbert not run at some k)
                ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=80)
    plt.close(fig)


def save_rounds(s: Settings, runs: Sequence[Run], path: str) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump({"settings": asdict(s), "runs": [asdict(r) for r in runs]}, f, indent=1)
    os.replace(path + ".tmp", path)


def save(s: Settings, runs: Sequence[Run], text: str, out: str) -> tuple[str, str, str]:
    """The table (txt), the curves (png) and every round (json) in `out`: their paths."""
    os.makedirs(out, exist_ok=True)
    txt, png, js = (os.path.join(out, f"tradeoff.{ext}") for ext in ("txt", "png", "json"))
    with open(txt, "w") as f:
        f.write(text + "\n")
    plot(s, runs, png)
    save_rounds(s, runs, js)
    return txt, png, js


#: Settings that define the data and the yardstick: saved runs combine only when these agree.
SAME_DATA = ("appends", "rows_per_append", "cube_size", "drift", "autocompact_min_files", "ref_every", "seed")


def combine(saved: Sequence[tuple[Settings, Sequence[Run]]]) -> tuple[Settings, list[Run]]:
    """Saved runs of several invocations on the same data (e.g. the baselines in one, ours in another
    after a change to our rule) as one: settings with the union of their k values, shapes and
    contenders, and the runs ordered as one invocation would have them. Refused when they differ in
    the data or the yardstick (`SAME_DATA`), or in ours' properties where two hold an ours run, or when
    two hold the same (shape, contender, k) run."""
    if not saved:
        raise ValueError("combine: no saved runs")
    first = saved[0][0]
    for s, _ in saved[1:]:
        bad = [name for name in SAME_DATA if getattr(s, name) != getattr(first, name)]
        if bad:
            raise ValueError(f"combine: saved runs differ in {', '.join(bad)}: not the same data")
    props = {s.ours_properties for s, runs in saved if any(r.contender == "ours" for r in runs)}
    if len(props) > 1:
        raise ValueError(f"combine: ours ran with different properties {sorted(props)}")
    runs = [r for _, rs in saved for r in rs]
    keys = [(r.shape, r.contender, r.k) for r in runs]
    if len(set(keys)) < len(keys):
        raise ValueError("combine: the same (shape, contender, k) run is in two saved runs")
    every = tuple(sorted({k for s, _ in saved for k in s.every}))
    shapes = tuple(x for x in SHAPES if any(x in s.shapes for s, _ in saved))
    contenders = tuple(c for c in CONTENDERS if any(c in s.contenders for s, _ in saved))
    merged = replace(first, every=every, shapes=shapes, contenders=contenders,
                     ours_properties=next(iter(props), ()), jobs=max(s.jobs for s, _ in saved))  # fmt: skip
    runs.sort(key=lambda r: (shapes.index(r.shape), every.index(r.k), contenders.index(r.contender)))
    return merged, runs


def load(path: str) -> tuple[Settings, list[Run]]:
    """A saved run (tradeoff.json) back as settings and runs, to re-render or compare without Spark."""
    with open(path) as f:
        data = json.load(f)
    st = data["settings"]
    st["ours_properties"] = [tuple(p) for p in st.get("ours_properties", [])]
    s = Settings(**{k: tuple(v) if isinstance(v, list) else v for k, v in st.items()})
    runs = []
    for r in data["runs"]:
        rounds = [Round(**{**p, "reads": Reads(**p["reads"]), "ref": Reads(**p["ref"])}) for p in r["rounds"]]
        runs.append(Run(r["shape"], r["contender"], r["k"], rounds, r["seconds"]))
    return s, runs
