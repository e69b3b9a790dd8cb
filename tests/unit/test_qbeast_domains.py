"""Cube-domain estimation (§3.2): the level-by-level numpy builder equals the row-by-row greedy one."""

from __future__ import annotations

import numpy as np
import pytest

from use.errors import InvalidArgumentError
from use.qbeast.cube import CubeId
from use.qbeast.domains import CubeDomains, ExistingInnerCubes, estimate_domains, group_cube_size
from use.qbeast.weight import MAX_WEIGHT, fraction


def _greedy(points: np.ndarray, weights: np.ndarray, limit: int, existing: dict[str, int]) -> dict[str, float]:
    """The upstream builder, row by row: ascending weight, first cube on the path that accepts."""
    state: dict[str, list] = {}
    for i in np.argsort(weights, kind="stable"):
        w = int(weights[i])
        for cube in CubeId.containers(points[i]):
            s = cube.to_string()
            st = state.setdefault(s, [0, None])
            ew = existing.get(s, MAX_WEIGHT)
            if st[0] < limit and (ew >= MAX_WEIGHT or w < ew):
                st[0] += 1
                st[1] = w
                break
    spl = (points.shape[1] + 5) // 6
    nw = {}
    for s, (cnt, last) in state.items():
        ew = existing.get(s, MAX_WEIGHT)
        nw[s] = fraction(last) if cnt >= limit else (fraction(ew) if ew < MAX_WEIGHT else limit / cnt)
    tree = {s: float(v[0]) for s, v in state.items()}
    out = {}
    for s in sorted(state, key=len, reverse=True):
        if s:
            out[s] = tree[s] / (1 - nw[s[:-spl]])
            tree[s[:-spl]] += tree[s]
        else:
            out[s] = tree[s]
    return out


@pytest.mark.parametrize("dims", [1, 2, 3, 7])
@pytest.mark.parametrize("with_existing", [False, True])
def test_matches_greedy_builder(dims: int, with_existing: bool) -> None:
    rng = np.random.default_rng(dims)
    n = 2500
    points = rng.random((n, dims))
    points[:5] = 1.0  # the closed upper boundary
    points[5:10] = 0.5
    weights = rng.integers(-(2**31), 2**31, n).astype(np.int32)
    existing = {"": -1_000_000_000, CubeId.root(dims).children()[0].to_string(): 0} if with_existing else {}
    existing[CubeId.root(dims).children()[-1].to_string()] = MAX_WEIGHT  # a leaf: behaves as new
    got = estimate_domains(points, weights, group_cube_size=40, existing=ExistingInnerCubes(existing)).to_dict()
    expected = _greedy(points, weights, 40, existing)
    assert set(got) == set(expected)
    for cube, domain in expected.items():
        assert got[cube] == pytest.approx(domain, rel=1e-12)


def test_existing_inner_cube_is_strict() -> None:
    points = np.full((10, 2), 0.25)
    weights = np.arange(10, dtype=np.int32)
    got = estimate_domains(points, weights, group_cube_size=30, existing=ExistingInnerCubes({"": 5})).to_dict()
    # Rows 0..4 stay in the root (weight < 5); 5..9 (5 included) go down to "A".
    assert set(got) == {"", "A"}
    assert got[""] == pytest.approx(10.0)
    assert got["A"] == pytest.approx(5 / (1 - fraction(5)))


def test_buffers_are_separate_local_trees() -> None:
    rng = np.random.default_rng(3)
    points = rng.random((1000, 2))
    weights = rng.integers(-(2**31), 2**31, 1000).astype(np.int32)
    whole = CubeDomains.concat(
        [
            estimate_domains(points[:400], weights[:400], group_cube_size=30),
            estimate_domains(points[400:800], weights[400:800], group_cube_size=30),
            estimate_domains(points[800:], weights[800:], group_cube_size=30),
        ]
    ).to_dict()
    buffered = estimate_domains(points, weights, group_cube_size=30, buffer_capacity=400).to_dict()
    assert buffered.keys() == whole.keys()
    for k in whole:
        assert buffered[k] == pytest.approx(whole[k])
    assert buffered[""] == pytest.approx(1000.0)


def test_root_domain_is_row_count_and_domains_estimate_regions() -> None:
    rng = np.random.default_rng(5)
    n = 20_000
    points = rng.random((n, 2))
    weights = rng.integers(-(2**31), 2**31, n).astype(np.int32)
    got = estimate_domains(points, weights, group_cube_size=200).to_dict()
    assert got[""] == pytest.approx(n)
    for child in ("A", "Q", "g", "w"):  # each quarter holds ~n/4 rows
        assert got[child] == pytest.approx(n / 4, rel=0.1)


def test_duplicate_points_go_deep_without_failing() -> None:
    points = np.full((300, 2), 0.3)
    weights = np.full(300, 7, dtype=np.int32)
    got = estimate_domains(points, weights, group_cube_size=30).to_dict()
    assert len(got) == 10
    assert max(len(c) for c in got) == 9


def test_group_cube_size_formula() -> None:
    assert group_cube_size(5_000_000, 8, 1_000_000, 100_000) == 500_000
    assert group_cube_size(5_000_000, 2, 10_000_000, 100_000) == 50_000
    assert group_cube_size(100, 8, 1000, 100_000) == 30  # the floor
    with pytest.raises(InvalidArgumentError):
        group_cube_size(0, 1, 1, 1)


def test_bad_shapes_raise() -> None:
    with pytest.raises(InvalidArgumentError):
        estimate_domains(np.zeros((3, 2)), np.zeros(2, dtype=np.int32), group_cube_size=30)
    with pytest.raises(InvalidArgumentError):
        estimate_domains(np.zeros((3, 2)), np.zeros(3, dtype=np.int32), group_cube_size=0)


def test_empty_input() -> None:
    got = estimate_domains(np.zeros((0, 2)), np.zeros(0, dtype=np.int32), group_cube_size=30)
    assert len(got) == 0


def test_estimation_fraction() -> None:
    from use.errors import InvalidArgumentError
    from use.qbeast.domains import ESTIMATION_MIN_ROWS, estimation_fraction

    assert estimation_fraction(1_000, ESTIMATION_MIN_ROWS) == 1.0  # small inputs: every row
    assert estimation_fraction(1_500, 10_000_000) == 1.0  # a sample over one half is not worth it
    assert estimation_fraction(100_000, 5_000_000) == pytest.approx(0.02)  # 1,000 rows per cube
    assert estimation_fraction(50_000_000, 1_000_000_000) == pytest.approx(1e-4)  # at least 100k rows
    with pytest.raises(InvalidArgumentError, match="desired_cube_size"):
        estimation_fraction(0, 10)


def test_joint_lookup_answers_like_two_lookups() -> None:
    import numpy as np

    from use.qbeast.domains import CubeLookup, JointLookup

    first = CubeLookup({"": 5, "A": 7, "AQ": 9, "AAAAAAAAAA": 11})
    second = CubeLookup({"": 0, "B": 1, "AQ": 2})
    probe = np.array([b"", b"A", b"B", b"AQ", b"C", b"AAAAAAAAAA", b"AAAAAAAAAB"], dtype="S10")
    v1, h1, v2, h2 = JointLookup(first, second).lookup(probe, (-1, -2))
    e1, f1 = first.lookup(probe, -1)
    e2, f2 = second.lookup(probe, -2)
    assert v1.tolist() == e1.tolist() and h1.tolist() == f1.tolist()
    assert v2.tolist() == e2.tolist() and h2.tolist() == f2.tolist()
    empty = JointLookup(CubeLookup({}), CubeLookup({}))
    v1, h1, v2, h2 = empty.lookup(probe, (-1, -2))
    assert set(v1.tolist()) == {-1} and set(v2.tolist()) == {-2} and not h1.any() and not h2.any()
