"""Deletion vectors (DVs): the rows of a data file that a logical file of the table no longer has.

The Delta protocol ("Deletion Vectors", "Deletion Vector Format") gives an `add` or `remove` action an
optional `deletionVector` descriptor: `storageType` `u` (a file beside the data, named by a Z85 UUID
with an optional random directory prefix), `p` (a file by absolute path) or `i` (the bitmap inline, Z85
in the log); `offset` of the DV in its file, `sizeInBytes` of the bitmap, `cardinality` (rows deleted).
In the log state the descriptors stay an Arrow struct column (`deletion_vector` of `Snapshot.files`):
replay keys files by `(path, unique_ids(...))` without one Python object per file. Only a read of the
rows of files that have a DV turns descriptors into bitmaps, one file of DVs read once.

The bitmap is a `RoaringBitmapArray`: a little-endian magic number, then a 64-bit roaring bitmap in
the portable serialization (pyroaring's `BitMap64`). A DV file is a format version byte (1), then per DV
a big-endian size, the bitmap, and the big-endian CRC-32 of the bitmap. Every way a DV can disagree with
its descriptor raises `CorruptDeletionVectorError` naming the table, the data file and the DV; the
encoders are here too, for writers and for the tests that build damaged vectors.
"""

from __future__ import annotations

import os
import struct
import uuid
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap, BitMap64

from use.delta import z85
from use.delta.storage import absolute_path
from use.errors import CorruptDeletionVectorError

__all__ = [
    "DeletionVector",
    "DeletedRows",
    "STORAGE_TYPES",
    "bitmap_bytes",
    "decode_bitmap",
    "deleted_counts",
    "deleted_rows",
    "dv_file_bytes",
    "file_keys",
    "has_deletion_vectors",
    "new_uuid_path",
    "unique_ids",
]

#: `storageType`: u = relative path from a UUID, i = inline, p = absolute path
STORAGE_TYPES = frozenset({"u", "i", "p"})
#: the RoaringBitmapArray in the portable 64-bit format (the one the protocol defines, and Delta writes)
PORTABLE_MAGIC = 1681511377
#: the older native format delta-spark still reads (32-bit count, each bitmap after its size)
NATIVE_MAGIC = 1681511376
#: the first byte of a DV file
FILE_FORMAT_VERSION = 1
_SIZE = struct.Struct(">i")
_CRC = struct.Struct(">I")


def has_deletion_vectors(files: pa.Table) -> bool:
    """Does any row of `files` (a `Snapshot.files` or tombstones table) carry a DV? O(chunks)."""
    if "deletion_vector" not in files.column_names or files.num_rows == 0:
        return False
    return bool(files.column("deletion_vector").null_count != files.num_rows)


def unique_ids(descriptors: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """The protocol's derived `uniqueId` of each descriptor (`<storageType><pathOrInlineDv>` and
    `@<offset>` when an offset is given), null where a file has no DV. Vectorized."""
    storage = pc.struct_field(descriptors, "storageType")
    where = pc.struct_field(descriptors, "pathOrInlineDv")
    offset = pc.struct_field(descriptors, "offset")
    base = pc.binary_join_element_wise(storage, where, "")
    with_offset = pc.binary_join_element_wise(base, pc.cast(offset, pa.string()), "@")
    return pc.if_else(pc.is_null(offset), base, with_offset)


def file_keys(files: pa.Table, with_dv: bool) -> pa.ChunkedArray | pa.Array:
    """The key of each logical file of `files` in log replay: its path alone when no file of the
    replay has a DV (the common case, at no cost), else `path NUL uniqueId` (NUL appears in no path),
    the protocol's `(path, deletionVector.uniqueId)` primary key."""
    paths = files.column("path")
    if not with_dv:
        return paths
    ids = pc.fill_null(unique_ids(files.column("deletion_vector")), "")
    return pc.binary_join_element_wise(paths, ids, "\x00")


def deleted_counts(files: pa.Table) -> pa.ChunkedArray | pa.Array:
    """Rows deleted from each file by its DV (its `cardinality`; 0 without a DV), as int64."""
    if "deletion_vector" not in files.column_names:
        return pa.array(np.zeros(files.num_rows, dtype=np.int64))
    return pc.fill_null(pc.struct_field(files.column("deletion_vector"), "cardinality"), 0)


@dataclass(frozen=True)
class DeletionVector:
    """One descriptor, for the few places that handle a single DV (reading its bitmap, messages)."""

    storage_type: str
    path_or_inline_dv: str
    offset: int | None
    size_in_bytes: int
    cardinality: int

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> DeletionVector:
        """From a row of the `deletion_vector` struct (or the JSON object of the log)."""
        return cls(
            storage_type=d.get("storageType") or "",
            path_or_inline_dv=d.get("pathOrInlineDv") or "",
            offset=d.get("offset"),
            size_in_bytes=int(d.get("sizeInBytes") or 0),
            cardinality=int(d.get("cardinality") or 0),
        )

    @property
    def unique_id(self) -> str:
        base = f"{self.storage_type}{self.path_or_inline_dv}"
        return base if self.offset is None else f"{base}@{self.offset}"

    def file_path(self, table_root: str) -> str | None:
        """The local path of the file holding this DV (None for an inline one). ValueError when the
        descriptor names no file (a bad UUID); unknown storage types are the caller's to refuse."""
        if self.storage_type == "u":
            where = self.path_or_inline_dv
            if len(where) < z85.UUID_LENGTH:
                raise ValueError(f"{where!r} is too short for a Z85 UUID ({z85.UUID_LENGTH} characters)")
            prefix, encoded = where[: -z85.UUID_LENGTH], where[-z85.UUID_LENGTH :]
            name = f"deletion_vector_{z85.decode_uuid(encoded)}.bin"
            return os.path.join(table_root, prefix, name) if prefix else os.path.join(table_root, name)
        if self.storage_type == "p":
            return absolute_path(table_root, self.path_or_inline_dv)
        return None

    def describe(self) -> str:
        return f"deletion vector {self.unique_id!r} ({self.cardinality} rows, {self.size_in_bytes} bytes)"


def decode_bitmap(data: bytes) -> BitMap64:
    """The row indexes of a serialized RoaringBitmapArray. ValueError when it is not one."""
    if len(data) < 4:
        raise ValueError(f"a RoaringBitmapArray has at least 4 bytes, this one {len(data)}")
    (magic,) = struct.unpack_from("<i", data)
    if magic == PORTABLE_MAGIC:
        try:
            bitmap = BitMap64.deserialize(data[4:])
        except ValueError:
            raise ValueError("its portable 64-bit roaring bitmap does not deserialize") from None
        if bitmap and bitmap.max() >= 1 << 63:
            raise ValueError("it holds a row index with the most significant bit set, which the format forbids")
        return bitmap
    if magic == NATIVE_MAGIC:
        return _decode_native(data)
    raise ValueError(f"magic number {magic} is neither {PORTABLE_MAGIC} (portable) nor {NATIVE_MAGIC} (native)")


def _decode_native(data: bytes) -> BitMap64:
    """delta-spark's native RoaringBitmapArray: a count, then (size, 32-bit bitmap) per high word."""
    (count,) = struct.unpack_from("<i", data, 4)
    if count < 0:
        raise ValueError(f"negative bitmap count {count}")
    out = BitMap64()
    pos = 8
    for high in range(count):
        if pos + 4 > len(data):
            raise ValueError("it ends inside its bitmaps")
        (size,) = struct.unpack_from("<i", data, pos)
        pos += 4
        try:
            part = BitMap.deserialize(data[pos : pos + size])
        except ValueError:
            raise ValueError(f"its bitmap {high} does not deserialize") from None
        pos += size
        if part:
            out.update((np.asarray(part.to_array(), dtype=np.uint64) + np.uint64(high << 32)).tolist())
    return out


def bitmap_bytes(rows: Iterable[int] | BitMap64) -> bytes:
    """A RoaringBitmapArray (portable format) of these row indexes: what an inline DV holds and a DV
    file stores between size and checksum."""
    bitmap = rows if isinstance(rows, BitMap64) else BitMap64(rows)
    return struct.pack("<i", PORTABLE_MAGIC) + bitmap.serialize()


def dv_file_bytes(bitmaps: Iterable[bytes]) -> tuple[bytes, list[int]]:
    """A DV file holding these serialized bitmaps, and the offset of each (for its descriptor)."""
    out = bytearray([FILE_FORMAT_VERSION])
    offsets = []
    for data in bitmaps:
        offsets.append(len(out))
        out += _SIZE.pack(len(data)) + data + _CRC.pack(zlib.crc32(data))
    return bytes(out), offsets


# --- reading the deleted rows of a scan's files -------------------------------------------------------


@dataclass(frozen=True)
class DeletedRows:
    """The deleted row indexes of the files of a scan that have DVs, in a form each engine takes
    without per-row Python objects: per file (as the log names it), the sorted row indexes (uint64)
    and the RoaringBitmapArray bytes (for the JVM, whose RoaringBitmap reads the same format)."""

    paths: list[str]
    rows: list[np.ndarray]
    bitmaps: list[bytes]

    def __len__(self) -> int:
        return len(self.paths)

    def as_table(self) -> pa.Table:
        """One row per deleted row: `file` (its index in `paths`) and `row_index`, for a join against
        a scan's rows."""
        counts = np.array([len(r) for r in self.rows], dtype=np.int64)
        return pa.table(
            {
                "file": pa.array(np.repeat(np.arange(len(self.paths), dtype=np.int32), counts)),
                "row_index": pa.array(np.concatenate(self.rows).astype(np.int64) if self.rows else np.zeros(0, np.int64)),
            }
        )


def deleted_rows(table_root: str, files: pa.Table, table: str) -> DeletedRows:
    """The deleted rows of every file of `files` (rows of `Snapshot.files`) that has a DV, each DV
    checked against its descriptor; a DV file is opened once however many DVs it holds.
    CorruptDeletionVectorError (naming the table, the data file and the DV) on the first bad one."""
    if not has_deletion_vectors(files):
        return DeletedRows([], [], [])
    with_dv = files.filter(pc.is_valid(files.column("deletion_vector")))
    paths = with_dv.column("path").to_pylist()
    descriptors = [DeletionVector.of(d) for d in with_dv.column("deletion_vector").to_pylist()]
    cache: dict[str, bytes] = {}
    out = DeletedRows([], [], [])
    for path, dv in zip(paths, descriptors, strict=True):
        data = _bitmap_of(table_root, path, dv, table, cache)
        try:
            bitmap = decode_bitmap(data)
        except ValueError as exc:
            raise _corrupt(table, path, dv, f"its bitmap is not a RoaringBitmapArray: {exc}") from None
        if len(bitmap) != dv.cardinality:
            raise _corrupt(table, path, dv, f"its bitmap holds {len(bitmap)} rows but the log says cardinality {dv.cardinality}")
        out.paths.append(path)
        out.rows.append(np.asarray(bitmap.to_array(), dtype=np.uint64))
        out.bitmaps.append(data)
    return out


def _corrupt(table: str, data_file: str, dv: DeletionVector, why: str) -> CorruptDeletionVectorError:
    return CorruptDeletionVectorError(
        f"the {dv.describe()} of data file {data_file} in table {table} cannot be read: {why}. "
        "No row of that file was read and nothing was changed; restore the deletion vector file from a "
        "backup, or rewrite the file from a copy of the table"
    )


def _bitmap_of(table_root: str, data_file: str, dv: DeletionVector, table: str, cache: dict[str, bytes]) -> bytes:
    """The serialized bitmap of `dv` (its checksum and size checked when it is in a file)."""
    if dv.storage_type not in STORAGE_TYPES:
        raise _corrupt(table, data_file, dv, f"storage type {dv.storage_type!r} is none of 'u', 'i', 'p'")
    if dv.size_in_bytes < 0 or dv.cardinality < 0:
        raise _corrupt(table, data_file, dv, "its size or cardinality is negative")
    if dv.storage_type == "i":
        try:
            return z85.decode(dv.path_or_inline_dv, dv.size_in_bytes)
        except z85.Z85Error as exc:
            raise _corrupt(
                table, data_file, dv, f"its inline data is not valid Z85 of {dv.size_in_bytes} bytes ({exc})"
            ) from None
    try:
        location = dv.file_path(table_root)
    except ValueError as exc:
        raise _corrupt(table, data_file, dv, f"its path does not name a file ({exc})") from None
    assert location is not None
    content = cache.get(location)
    if content is None:
        try:
            with open(location, "rb") as fh:
                content = fh.read()
        except FileNotFoundError:
            raise _corrupt(table, data_file, dv, f"its file {location} is missing") from None
        except OSError as exc:
            raise _corrupt(table, data_file, dv, f"its file {location} cannot be read ({exc.strerror})") from None
        if not content or content[0] != FILE_FORMAT_VERSION:
            version = "empty" if not content else f"format version {content[0]}"
            raise _corrupt(table, data_file, dv, f"its file {location} is {version}, not format version {FILE_FORMAT_VERSION}")
        cache[location] = content
    offset = 1 if dv.offset is None else dv.offset  # absent: the first (only) DV after the version byte
    end = offset + _SIZE.size + dv.size_in_bytes + _CRC.size
    if offset < 1 or end > len(content):
        raise _corrupt(
            table,
            data_file,
            dv,
            f"its file {location} has {len(content)} bytes, too few for offset {offset} and size {dv.size_in_bytes}",
        )
    (stored_size,) = _SIZE.unpack_from(content, offset)
    if stored_size != dv.size_in_bytes:
        raise _corrupt(table, data_file, dv, f"its file {location} stores a size of {stored_size} bytes at offset {offset}")
    data = content[offset + _SIZE.size : offset + _SIZE.size + dv.size_in_bytes]
    (checksum,) = _CRC.unpack_from(content, offset + _SIZE.size + dv.size_in_bytes)
    if zlib.crc32(data) != checksum:
        raise _corrupt(
            table,
            data_file,
            dv,
            f"its checksum in {location} does not match its data (CRC-32 {zlib.crc32(data)}, stored {checksum})",
        )
    return data


def new_uuid_path(prefix: str = "") -> tuple[str, str]:
    """A fresh `u` DV location: (pathOrInlineDv, the file name relative to the table root)."""
    value = uuid.uuid4()
    name = f"deletion_vector_{value}.bin"
    return prefix + z85.encode_uuid(value), (f"{prefix}/{name}" if prefix else name)
