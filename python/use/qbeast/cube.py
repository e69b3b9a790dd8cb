"""Cube identifiers of the OTree (qbeast-format spec §1).

A cube is a region of the transformed space [0,1]^d reached by halving every dimension `depth`
times. The Delta log stores cubes only as strings (one base64-alphabet symbol per 6 dimensions per
level, root = ""), so the string is the interchange form and `CubeId` is the small scalar model
used for navigation, bounds and ordering. Everything that touches one value per *row* (the writer's
point -> cube assignment, the reader's bounds checks over all cubes of a table) goes through the
numpy helpers at the bottom of this module instead, which never build per-row Python objects.

Ordering is the pre-order (z-order) of the tree: an ancestor sorts before its descendants and
siblings sort in their `children()` order. That is lexicographic order on *symbol indexes*, not on
ASCII (`'0'` is index 52 but sorts before `'A'` in ASCII), so vectorized code sorts on
`cube_sort_key`/`cube_sort_keys` bytes, which compare correctly as plain bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from use.errors import CorruptIndexMetadataError, InvalidArgumentError

SYMBOLS: str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
"""The 64 symbols of the string encoding, in index order (the base64 alphabet)."""

_SYMBOL_INDEX: dict[str, int] = {c: i for i, c in enumerate(SYMBOLS)}
# ASCII code -> symbol index (255 marks a byte that is not a symbol); used by the vectorized decoders.
_ASCII_TO_INDEX: np.ndarray = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate(SYMBOLS):
    _ASCII_TO_INDEX[ord(_c)] = _i
# symbol index -> ASCII code.
_INDEX_TO_ASCII: np.ndarray = np.frombuffer(SYMBOLS.encode("ascii"), dtype=np.uint8).copy()
# str.translate table for the scalar sort key: each symbol becomes the byte `index + 1`. The +1 keeps
# NUL out of keys, because numpy `S` arrays strip trailing NULs (so "AA" would collide with "").
_SORT_TRANSLATION: dict[int, int] = {ord(c): i + 1 for i, c in enumerate(SYMBOLS)}
_VALID_CUBE_STRING = re.compile(r"[A-Za-z0-9+/]*")


def symbols_per_level(dimensions: int) -> int:
    """Symbols written per tree level: one 6-bit symbol packs up to 6 dimensions."""
    if dimensions < 1:
        raise InvalidArgumentError(f"a cube needs at least one dimension, got dimensions={dimensions}")
    return (dimensions + 5) // 6


@dataclass(frozen=True, slots=True)
class CubeId:
    """One OTree cube: `bits` has bit `level*dimensions + dim` set when, at split `level`, the cube
    takes the upper half of dimension `dim`. Bits at or beyond `dimensions*depth` are always 0, so
    dataclass equality and hashing are the cube identity.
    """

    dimensions: int
    depth: int
    bits: int = 0

    def __post_init__(self) -> None:
        if self.dimensions < 1:
            raise InvalidArgumentError(f"a cube needs at least one dimension, got dimensions={self.dimensions}")
        if self.depth < 0:
            raise InvalidArgumentError(f"a cube depth cannot be negative, got depth={self.depth}")
        if self.bits < 0 or self.bits >> (self.dimensions * self.depth):
            # Canonicalize rather than fail: the Scala class may carry extra bits and ignores them.
            object.__setattr__(self, "bits", self.bits & ((1 << (self.dimensions * self.depth)) - 1))

    # --- construction ------------------------------------------------------------------------

    @classmethod
    def root(cls, dimensions: int) -> CubeId:
        return cls(dimensions, 0, 0)

    @classmethod
    def from_string(cls, dimensions: int, s: str) -> CubeId:
        """Decode the §1.2 string form; the dimension count comes from the revision."""
        spl = symbols_per_level(dimensions)
        if len(s) % spl:
            raise CorruptIndexMetadataError(
                f"cube id {s!r} has {len(s)} symbols, which is not a multiple of {spl} "
                f"(the symbols per level for {dimensions} dimensions); the blocks metadata does not "
                f"match the revision's column count"
            )
        depth = len(s) // spl
        bits = 0
        for level in range(depth):
            for k in range(spl):
                c = s[level * spl + k]
                value = _SYMBOL_INDEX.get(c)
                if value is None:
                    raise CorruptIndexMetadataError(
                        f"cube id {s!r} has the symbol {c!r}, which is not in the alphabet A-Z a-z 0-9 + /"
                    )
                used = min(6, dimensions - 6 * k)
                if value & ((1 << (6 - used)) - 1):
                    raise CorruptIndexMetadataError(
                        f"cube id {s!r} sets unused bits in symbol {c!r} (only {used} of 6 bits carry "
                        f"dimensions for {dimensions} dimensions)"
                    )
                for i in range(used):
                    if value & (1 << (5 - i)):
                        bits |= 1 << (level * dimensions + 6 * k + i)
        return cls(dimensions, depth, bits)

    @classmethod
    def containers(cls, point: Sequence[float]) -> Iterator[CubeId]:
        """All cubes holding `point`, root first, one per level, forever (callers stop)."""
        coords = _checked_point(point)
        d = len(coords)
        depth = 0
        bits = 0
        yield cls(d, 0, 0)
        while True:
            for dim in range(d):
                x = coords[dim] * 2.0
                if x >= 1.0:
                    bits |= 1 << (depth * d + dim)
                    x -= 1.0
                coords[dim] = x
            depth += 1
            yield cls(d, depth, bits)

    @classmethod
    def container(cls, point: Sequence[float], depth: int) -> CubeId:
        if depth < 0:
            raise InvalidArgumentError(f"a cube depth cannot be negative, got depth={depth}")
        for i, cube in enumerate(cls.containers(point)):
            if i == depth:
                return cube
        raise AssertionError("unreachable")

    # --- encoding ----------------------------------------------------------------------------

    def to_string(self) -> str:
        d = self.dimensions
        spl = symbols_per_level(d)
        out: list[str] = []
        for level in range(self.depth):
            level_bits = self.bits >> (level * d)
            for k in range(spl):
                value = 0
                for i in range(min(6, d - 6 * k)):
                    if level_bits & (1 << (6 * k + i)):
                        value |= 1 << (5 - i)
                out.append(SYMBOLS[value])
        return "".join(out)

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"CubeId({self.dimensions}, {self.to_string()!r})"

    # --- navigation --------------------------------------------------------------------------

    @property
    def is_root(self) -> bool:
        return self.depth == 0

    @property
    def parent(self) -> CubeId | None:
        if self.depth == 0:
            return None
        return CubeId(self.dimensions, self.depth - 1, self.bits & ((1 << (self.dimensions * (self.depth - 1))) - 1))

    def children(self) -> list[CubeId]:
        """The 2^d children in sibling order: child `c` takes the upper half of dim `j` iff bit
        `d-1-j` of `c` is set (the last dimension is the fastest-changing one)."""
        d = self.dimensions
        base = d * self.depth
        out: list[CubeId] = []
        for c in range(1 << d):
            level_bits = 0
            for j in range(d):
                if c & (1 << (d - 1 - j)):
                    level_bits |= 1 << j
            out.append(CubeId(d, self.depth + 1, self.bits | (level_bits << base)))
        return out

    def is_ancestor_of(self, other: CubeId) -> bool:
        """True when `other` lies inside this cube; a cube is its own ancestor."""
        if other.dimensions != self.dimensions or self.depth > other.depth:
            return False
        mask = (1 << (self.dimensions * self.depth)) - 1
        return (other.bits & mask) == self.bits

    def bounds(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """`(from, to)`: the half-open box [from, to) (closed at 1.0) this cube covers."""
        d = self.dimensions
        lo = [0.0] * d
        for level in range(self.depth):
            step = 0.5 ** (level + 1)
            level_bits = self.bits >> (level * d)
            for dim in range(d):
                if level_bits & (1 << dim):
                    lo[dim] += step
        width = 0.5**self.depth
        return tuple(lo), tuple(x + width for x in lo)

    # --- ordering ----------------------------------------------------------------------------

    def sort_key(self) -> bytes:
        return cube_sort_key(self.to_string())

    def _check_comparable(self, other: object) -> CubeId | None:
        """`other` if it is a cube of as many dimensions; None if it is no cube (not comparable)."""
        if not isinstance(other, CubeId):
            return None
        if other.dimensions != self.dimensions:
            raise InvalidArgumentError(
                f"cannot order cubes of {self.dimensions} and {other.dimensions} dimensions "
                f"({self!r} vs {other!r}); they belong to different revisions"
            )
        return other

    def __lt__(self, other: object) -> bool:
        o = self._check_comparable(other)
        if o is None:
            return NotImplemented
        return self.sort_key() < o.sort_key()

    def __le__(self, other: object) -> bool:
        o = self._check_comparable(other)
        if o is None:
            return NotImplemented
        return self.sort_key() <= o.sort_key()

    def __gt__(self, other: object) -> bool:
        o = self._check_comparable(other)
        if o is None:
            return NotImplemented
        return self.sort_key() > o.sort_key()

    def __ge__(self, other: object) -> bool:
        o = self._check_comparable(other)
        if o is None:
            return NotImplemented
        return self.sort_key() >= o.sort_key()


def _checked_point(point: Sequence[float]) -> list[float]:
    coords = [float(x) for x in point]
    if not coords:
        raise InvalidArgumentError("a point needs at least one coordinate")
    for dim, x in enumerate(coords):
        if not (0.0 <= x <= 1.0):
            raise InvalidArgumentError(
                f"point coordinate {dim} is {x}; transformed coordinates must lie in [0, 1] "
                f"(the value is outside the revision's range: the revision must be widened first)"
            )
    return coords


# --- string helpers ---------------------------------------------------------------------------


def cube_sort_key(s: str) -> bytes:
    """A key whose plain byte order is the cube order (§1.5): each symbol becomes `index + 1`.

    Equal to the rows of `cube_sort_keys`, so scalar and vectorized keys can be mixed."""
    if not _VALID_CUBE_STRING.fullmatch(s):
        raise CorruptIndexMetadataError(f"cube id {s!r} has symbols outside the alphabet A-Z a-z 0-9 + /")
    return s.translate(_SORT_TRANSLATION).encode("ascii")


def cube_sort_keys(cube_strings: np.ndarray) -> np.ndarray:
    """Vectorized `cube_sort_key` over a numpy `S` array (or anything convertible to one).

    Returns an `S` array of the same width; `np.argsort` / `np.sort` on it gives the cube order,
    because numpy compares `S` values as bytes and a prefix (an ancestor) sorts first.
    """
    arr = np.asarray(cube_strings)
    if arr.dtype.kind != "S":
        arr = arr.astype("S")
    width = arr.dtype.itemsize
    if arr.size == 0 or width == 0:
        return arr.copy()
    raw = np.ascontiguousarray(arr).view(np.uint8).reshape(arr.size, width)
    mapped = _ASCII_TO_INDEX[raw]
    # NUL padding (shorter strings) stays NUL so a prefix (an ancestor) still sorts first.
    keys = np.where(raw == 0, np.uint8(0), mapped + np.uint8(1))
    if np.any((raw != 0) & (mapped == 255)):
        bad = arr.reshape(-1)[np.any((raw != 0) & (mapped == 255), axis=1)][0]
        raise CorruptIndexMetadataError(f"cube id {bad!r} has symbols outside the alphabet A-Z a-z 0-9 + /")
    return np.ascontiguousarray(keys).view(f"S{width}").reshape(arr.shape)


def cube_depths(cube_strings: np.ndarray, dimensions: int) -> np.ndarray:
    """Depth of each cube string (int32), from its length."""
    arr = np.asarray(cube_strings)
    if arr.dtype.kind not in "SU":
        arr = arr.astype("S")
    lengths = np.char.str_len(arr) if arr.size else np.zeros(arr.shape, dtype=np.int64)
    return (lengths // symbols_per_level(dimensions)).astype(np.int32)


# --- vectorized point -> cube -----------------------------------------------------------------


class CubeSymbols(np.ndarray):
    """A `(n, max_depth*spl)` uint8 array of ASCII symbol codes that remembers its
    `symbols_per_level`, so `cube_strings_at_depth(symbols, depth)` needs no dimension count."""

    symbols_per_level: int

    def __array_finalize__(self, obj: object) -> None:
        self.symbols_per_level = getattr(obj, "symbols_per_level", 0)


def container_symbols(points: np.ndarray, max_depth: int) -> CubeSymbols:
    """Symbols of every row's container cubes down to `max_depth`, as ASCII codes.

    Row `r`'s cube at depth `L` is `bytes(result[r, :L*spl])`. The arithmetic is the Scala one
    (double `x*2`, `x >= 1 -> upper half, x -= 1`), so boundaries (0.5, 1.0) land the same way.
    """
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] < 1:
        raise InvalidArgumentError(f"points must be an (n, d) array with d >= 1, got shape {pts.shape}")
    if max_depth < 0:
        raise InvalidArgumentError(f"max_depth cannot be negative, got {max_depth}")
    n, d = pts.shape
    if n and not np.all((pts >= 0.0) & (pts <= 1.0)):
        bad_row, bad_dim = np.argwhere(~((pts >= 0.0) & (pts <= 1.0)))[0]
        raise InvalidArgumentError(
            f"point {bad_row} has coordinate {bad_dim} = {pts[bad_row, bad_dim]}; transformed coordinates "
            f"must lie in [0, 1] (the value is outside the revision's range: the revision must be widened first)"
        )
    spl = symbols_per_level(d)
    out = np.empty((n, max_depth * spl), dtype=np.uint8)
    coords = pts.copy()
    for level in range(max_depth):
        coords *= 2.0
        upper = coords >= 1.0
        coords -= upper
        for k in range(spl):
            value = np.zeros(n, dtype=np.uint8)
            for i in range(min(6, d - 6 * k)):
                value |= upper[:, 6 * k + i].astype(np.uint8) << np.uint8(5 - i)
            out[:, level * spl + k] = _INDEX_TO_ASCII[value]
    result = out.view(CubeSymbols)
    result.symbols_per_level = spl
    return result


def _spl_of(symbols: np.ndarray, dimensions: int | None) -> int:
    if dimensions is not None:
        return symbols_per_level(dimensions)
    spl = getattr(symbols, "symbols_per_level", 0)
    if not spl:
        raise InvalidArgumentError(
            "the symbols array does not carry its symbols-per-level; pass dimensions= (the revision's column count)"
        )
    return int(spl)


def cube_strings_at_depth(symbols: np.ndarray, depth: int, dimensions: int | None = None) -> np.ndarray:
    """Every row's cube string at `depth`, as a numpy `S` array (root: `b""`)."""
    spl = _spl_of(symbols, dimensions)
    sym = np.asarray(symbols, dtype=np.uint8)
    width = depth * spl
    if depth < 0 or width > sym.shape[1]:
        raise InvalidArgumentError(f"depth {depth} is outside the computed symbols (0..{sym.shape[1] // spl})")
    if width == 0:
        return np.zeros(sym.shape[0], dtype="S1")
    return np.ascontiguousarray(sym[:, :width]).view(f"S{width}").reshape(sym.shape[0])


def cube_strings_for_depths(symbols: np.ndarray, depths: np.ndarray, dimensions: int | None = None) -> np.ndarray:
    """Row `r`'s cube string at depth `depths[r]` (per-row depths), as a numpy `S` array."""
    spl = _spl_of(symbols, dimensions)
    sym = np.asarray(symbols, dtype=np.uint8)
    dep = np.asarray(depths, dtype=np.int64)
    if dep.shape != (sym.shape[0],):
        raise InvalidArgumentError(f"depths must have one entry per row ({sym.shape[0]}), got shape {dep.shape}")
    if dep.size and (dep.min() < 0 or dep.max() * spl > sym.shape[1]):
        raise InvalidArgumentError(f"depths must lie in 0..{sym.shape[1] // spl}")
    width = max(1, sym.shape[1])
    keep = np.arange(sym.shape[1])[None, :] < (dep * spl)[:, None]
    masked = np.zeros((sym.shape[0], width), dtype=np.uint8)
    masked[:, : sym.shape[1]] = np.where(keep, sym, np.uint8(0))
    return masked.view(f"S{width}").reshape(sym.shape[0])


def string_bounds(cube_strings: np.ndarray | Iterable[str], dimensions: int) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of many cube strings at once: `(from, to)` arrays of shape `(m, d)` (float64)."""
    arr = np.asarray(list(cube_strings) if not isinstance(cube_strings, np.ndarray) else cube_strings)
    if arr.dtype.kind == "U" or arr.dtype == object:
        arr = np.char.encode(arr.astype("U"), "ascii") if arr.size else arr.astype("S1")
    m = arr.shape[0]
    d = dimensions
    spl = symbols_per_level(d)
    width = max(1, arr.dtype.itemsize)
    raw = np.ascontiguousarray(arr.astype(f"S{width}")).view(np.uint8).reshape(m, width)
    idx = _ASCII_TO_INDEX[raw]
    valid = raw != 0
    if np.any(valid & (idx == 255)):
        raise CorruptIndexMetadataError("a cube id has symbols outside the alphabet A-Z a-z 0-9 + /")
    lengths = valid.sum(axis=1)
    if np.any(lengths % spl):
        raise CorruptIndexMetadataError(
            f"a cube id's length is not a multiple of {spl} (the symbols per level for {d} dimensions)"
        )
    depths = lengths // spl
    lo = np.zeros((m, d), dtype=np.float64)
    for level in range(width // spl):
        step = 0.5 ** (level + 1)
        present = depths > level
        for k in range(spl):
            col = np.where(present, idx[:, level * spl + k], 0).astype(np.uint8)
            for i in range(min(6, d - 6 * k)):
                lo[:, 6 * k + i] += ((col >> (5 - i)) & 1) * step
    hi = lo + (0.5**depths)[:, None]
    return lo, hi


def intersects(cube_from: np.ndarray, cube_to: np.ndarray, query_from: npt.ArrayLike, query_to: npt.ArrayLike) -> np.ndarray:
    """Which cubes intersect a query box (§1.7), vectorized: bool array of shape `(m,)`.

    `query_from`/`query_to` are already-transformed bounds in [0,1]; a caller turning `x <= t` into
    a half-open bound adds the spec's epsilon to `t` itself. Per dimension the test is
    `(f <= cf < t) or (cf <= f < ct) or (f == 1 and ct == 1)`.
    """
    cf = np.asarray(cube_from, dtype=np.float64)
    ct = np.asarray(cube_to, dtype=np.float64)
    f = np.asarray(query_from, dtype=np.float64)[None, :]
    t = np.asarray(query_to, dtype=np.float64)[None, :]
    per_dim = ((f <= cf) & (cf < t)) | ((cf <= f) & (f < ct)) | ((f == 1.0) & (ct == 1.0))
    hit: np.ndarray = np.all(per_dim, axis=1)
    return hit
