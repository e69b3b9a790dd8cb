"""CubeId against the spec's vectors (§1, §10) and the vectorized helpers against the scalar model."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from use.errors import CorruptIndexMetadataError, InvalidArgumentError
from use.qbeast.cube import (
    SYMBOLS,
    CubeId,
    container_symbols,
    cube_depths,
    cube_sort_key,
    cube_sort_keys,
    cube_strings_at_depth,
    cube_strings_for_depths,
    intersects,
    string_bounds,
    symbols_per_level,
)


def test_containers_of_spec_point():
    cubes = list(itertools.islice(CubeId.containers((0.66, 0.83)), 5))
    assert [c.to_string() for c in cubes] == ["", "w", "wQ", "wQg", "wQgQ"]
    assert cubes[0].bounds() == ((0.0, 0.0), (1.0, 1.0))
    assert cubes[1].bounds() == ((0.5, 0.5), (1.0, 1.0))
    assert cubes[2].bounds() == ((0.5, 0.75), (0.75, 1.0))
    assert cubes[3].bounds() == ((0.625, 0.75), (0.75, 0.875))
    assert CubeId.container((0.66, 0.83), 3) == cubes[3]


def test_depth3_containers_of_corners():
    assert CubeId.container((1.0, 1.0), 3).bounds() == ((0.875, 0.875), (1.0, 1.0))
    assert CubeId.container((1.0, 0.0), 3).bounds() == ((0.875, 0.0), (1.0, 0.125))
    assert CubeId.container((0.0, 0.0), 3).bounds() == ((0.0, 0.0), (0.125, 0.125))
    assert CubeId.container((0.5, 0.5), 1).to_string() == "w"  # 0.5 goes to the upper half


def test_root_children_sibling_order_and_symbols():
    assert [c.to_string() for c in CubeId.root(2).children()] == ["A", "Q", "g", "w"]
    for d in range(1, 7):
        kids = CubeId.root(d).children()
        assert [c.to_string() for c in kids] == [SYMBOLS[c << (6 - d)] for c in range(1 << d)]
        assert kids == sorted(kids)


def test_eight_dimensions_two_symbols_per_level():
    p = (0.66, 0.83, 0.2, 0.7, 0.4, 0.3, 0.1, 0.9)
    assert CubeId.container(p, 1).to_string() == "0Q"
    assert CubeId.container(p, 2).to_string() == "0QTQ"
    assert symbols_per_level(8) == 2 and symbols_per_level(6) == 1 and symbols_per_level(13) == 3
    c = CubeId.from_string(8, "0QTQ")
    assert c.depth == 2 and c.to_string() == "0QTQ"
    assert c.parent == CubeId.from_string(8, "0Q")


def test_string_round_trip_and_parent_chain():
    s = "wQwwwQ" + "Q" * 10
    c = CubeId.from_string(2, s)
    assert c.to_string() == s and c.depth == len(s)
    assert c.parent == CubeId.from_string(2, s[:-1])
    assert CubeId.root(2).parent is None
    assert CubeId.from_string(2, "") == CubeId.root(2)
    for d in (1, 3, 7, 12):
        for depth in range(4):
            rng = np.random.default_rng(d * 10 + depth)
            cube = CubeId(d, depth, int(rng.integers(0, 2 ** min(62, d * depth))) if depth else 0)
            assert CubeId.from_string(d, cube.to_string()) == cube


def test_extra_bits_are_ignored_for_identity():
    assert CubeId(2, 1, 0b1111) == CubeId(2, 1, 0b11)
    assert hash(CubeId(2, 1, 0b1111)) == hash(CubeId.from_string(2, "w"))


def test_ancestry():
    root = CubeId.root(2)
    w = CubeId.from_string(2, "w")
    wq = CubeId.from_string(2, "wQ")
    assert root.is_ancestor_of(wq) and w.is_ancestor_of(wq) and wq.is_ancestor_of(wq)
    assert not wq.is_ancestor_of(w)
    assert not CubeId.from_string(2, "g").is_ancestor_of(wq)


def test_order_is_preorder_by_symbol_index():
    cubes = [CubeId.root(2)]
    frontier = [CubeId.root(2)]
    for _ in range(3):
        frontier = [ch for c in frontier for ch in c.children()]
        cubes += frontier
    rng = np.random.default_rng(1)
    shuffled = [cubes[i] for i in rng.permutation(len(cubes))]

    def preorder(c):
        yield c
        if c.depth < 3:
            for ch in c.children():
                yield from preorder(ch)

    expected = list(preorder(CubeId.root(2)))
    assert sorted(shuffled) == expected
    # ASCII order would put '0' before 'A'; symbol order must not.
    a, zero = CubeId.from_string(6, "A"), CubeId.from_string(6, "0")
    assert a < zero and zero > a and a <= a and zero >= a
    assert cube_sort_key("0") > cube_sort_key("A") > cube_sort_key("")
    strings = np.array([c.to_string() for c in shuffled], dtype="S")
    assert [s.decode() for s in strings[np.argsort(cube_sort_keys(strings), kind="stable")]] == [c.to_string() for c in expected]
    # scalar and vectorized keys agree (and survive numpy's trailing-NUL stripping: "AA" != "")
    keys = cube_sort_keys(np.array([b"AA", b"", b"A0"]))
    assert list(keys) == [cube_sort_key("AA"), cube_sort_key(""), cube_sort_key("A0")]


def test_order_between_dimensions_is_an_error():
    with pytest.raises(InvalidArgumentError, match="dimensions"):
        _ = CubeId.root(2) < CubeId.root(3)


@pytest.mark.parametrize(
    "d,s,fragment",
    [(2, "w-", "alphabet"), (8, "0QT", "multiple of 2"), (2, "B", "unused bits"), (2, "wé", "alphabet")],
)
def test_bad_strings(d, s, fragment):
    with pytest.raises(CorruptIndexMetadataError, match=fragment):
        CubeId.from_string(d, s)


def test_bad_inputs():
    with pytest.raises(InvalidArgumentError):
        CubeId.root(0)
    with pytest.raises(InvalidArgumentError, match="coordinate 1"):
        CubeId.container((0.5, 1.5), 2)
    with pytest.raises(InvalidArgumentError):
        CubeId.container((0.5, float("nan")), 2)
    with pytest.raises(InvalidArgumentError, match="point 1"):
        container_symbols(np.array([[0.1, 0.2], [0.1, -0.1]]), 3)
    with pytest.raises(CorruptIndexMetadataError):
        cube_sort_key("w!")
    with pytest.raises(CorruptIndexMetadataError):
        cube_sort_keys(np.array([b"w!"]))
    with pytest.raises(InvalidArgumentError, match="dimensions="):
        cube_strings_at_depth(np.zeros((2, 4), dtype=np.uint8), 1)


@pytest.mark.parametrize("d", [1, 2, 3, 6, 7, 13])
def test_vectorized_containers_match_scalar(d):
    rng = np.random.default_rng(d)
    pts = rng.random((200, d))
    pts[0] = 1.0
    pts[1] = 0.0
    pts[2] = 0.5
    max_depth = 6
    sym = container_symbols(pts, max_depth)
    assert sym.shape == (200, max_depth * symbols_per_level(d))
    for depth in range(max_depth + 1):
        got = cube_strings_at_depth(sym, depth)
        assert got.dtype.kind == "S"
        expected = [CubeId.container(tuple(p), depth).to_string() for p in pts]
        assert [g.decode() for g in got] == expected
    depths = rng.integers(0, max_depth + 1, size=200)
    got = cube_strings_for_depths(sym, depths)
    assert [g.decode() for g in got] == [
        CubeId.container(tuple(p), int(L)).to_string() for p, L in zip(pts, depths, strict=False)
    ]
    # a plain ndarray needs the dimension count
    assert list(cube_strings_at_depth(np.asarray(sym).copy(), 2, dimensions=d)) == list(cube_strings_at_depth(sym, 2))
    assert list(cube_depths(cube_strings_at_depth(sym, 3), d)) == [3] * 200


def test_string_bounds_and_intersects():
    cubes = ["", "w", "wQ", "wQg", "A", "g"]
    lo, hi = string_bounds(np.array(cubes, dtype="S"), 2)
    for i, s in enumerate(cubes):
        f, t = CubeId.from_string(2, s).bounds()
        assert tuple(lo[i]) == f and tuple(hi[i]) == t
    hit = intersects(lo, hi, (0.6, 0.8), (0.7, 0.9))
    assert list(hit) == [True, True, True, True, False, False]
    # a query point at exactly 1.0 belongs to the cube whose upper bound is 1.0
    hit1 = intersects(lo, hi, (1.0, 1.0), (1.0, 1.0))
    assert list(hit1) == [True, True, False, False, False, False]
    lo8, hi8 = string_bounds(["0QTQ"], 8)
    f8, t8 = CubeId.from_string(8, "0QTQ").bounds()
    assert tuple(lo8[0]) == f8 and tuple(hi8[0]) == t8
