"""LogStore: the few storage operations the Delta log needs, for local file systems.

The whole correctness of optimistic concurrency rests on one guarantee: **put-if-absent** of a
commit file (`_delta_log/<version>.json`) must be atomic and exclusive. Exactly one of several
concurrent writers of the same version may succeed, and a reader must never see a partially written
commit. A store that cannot give that guarantee (plain S3 without a coordination service, for
example) must not be plugged in here; it would silently lose commits.

The local implementation writes the bytes to a uniquely named temporary file in the same directory,
fsyncs it and then `os.link`s it to the final name: `link` fails with `EEXIST` if the name is taken,
and the file appears under its final name only complete. Other writes (checkpoints, `_last_checkpoint`)
are not exclusive: they go through a temporary file and `os.replace`, so readers never see torn files.
"""

from __future__ import annotations

import os
import urllib.parse
import uuid
from dataclasses import dataclass

from use.errors import InvalidArgumentError, StorageError


def resolve_table_root(location: str | os.PathLike[str]) -> str:
    """Turn a local path or a `file://` URI into an absolute, normalised local path."""
    text = os.fspath(location)
    if not isinstance(text, str) or not text:
        raise InvalidArgumentError(f"table location must be a non-empty path or file:// URI, got {location!r}")
    if "://" in text or text.startswith("file:"):
        parsed = urllib.parse.urlparse(text)
        if parsed.scheme != "file":
            raise InvalidArgumentError(
                f"unsupported table location {text!r}: only local paths and file:// URIs are supported "
                "(a store needs atomic put-if-absent for commits; see use.delta.storage)"
            )
        if parsed.netloc not in ("", "localhost"):
            raise InvalidArgumentError(f"file:// URI {text!r} names a remote host; use file:///absolute/path")
        text = urllib.parse.unquote(parsed.path)
    return os.path.abspath(os.path.expanduser(text))


def absolute_path(table_root: str, path: str) -> str:
    """A data file path as the log stores it (URL-encoded, relative to the table root, or an
    absolute `file:` URI) -> the local path to open."""
    if "://" in path or path.startswith("file:"):
        return urllib.parse.unquote(urllib.parse.urlparse(path).path)
    return table_root.rstrip("/") + "/" + urllib.parse.unquote(path)


@dataclass(frozen=True)
class FileInfo:
    """One entry of a directory listing."""

    name: str
    size: int
    modification_time: int  # ms since epoch


class LocalLogStore:
    """Local-filesystem store with an atomic, exclusive `put_if_absent`."""

    def list_dir(self, directory: str) -> list[FileInfo]:
        """Entries of `directory` sorted by name; empty if it does not exist."""
        try:
            entries = []
            with os.scandir(directory) as it:
                for entry in it:
                    if entry.name.startswith("."):
                        continue  # in-flight temporary files of concurrent writers
                    try:
                        if not entry.is_file():
                            continue
                        st = entry.stat()
                    except FileNotFoundError:
                        continue  # deleted while listing (cleanup, a writer's temp file)
                    entries.append(FileInfo(entry.name, st.st_size, st.st_mtime_ns // 1_000_000))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StorageError(f"cannot list {directory}: {exc}") from exc
        entries.sort(key=lambda e: e.name)
        return entries

    def list_names(self, directory: str) -> list[str]:
        """Names of the regular files in `directory`, sorted; empty if it does not exist.

        Unlike `list_dir` this stats nothing (the file type comes with the directory entry on
        local file systems), so listing a log of thousands of commits costs one directory read;
        callers stat only the few files whose size or time they need (`file_info`).
        """
        try:
            with os.scandir(directory) as it:
                names = [e.name for e in it if not e.name.startswith(".") and _is_file(e)]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StorageError(f"cannot list {directory}: {exc}") from exc
        names.sort()
        return names

    def file_info(self, path: str) -> FileInfo | None:
        """Size and modification time of one file, or None if it is gone (deleted by log cleanup)."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return FileInfo(os.path.basename(path), st.st_size, st.st_mtime_ns // 1_000_000)

    def read(self, path: str) -> bytes:
        with open(path, "rb") as fh:
            return fh.read()

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def modification_time(self, path: str) -> int:
        return os.stat(path).st_mtime_ns // 1_000_000

    def _temp_write(self, path: str, data: bytes) -> str:
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        return tmp

    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Create `path` with `data` atomically; False (and nothing written) if it already exists."""
        tmp = self._temp_write(path, data)
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        except OSError as exc:
            raise StorageError(
                f"cannot create {path} exclusively ({exc}); the log needs a file system with hard links for atomic put-if-absent"
            ) from exc
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass

    def write(self, path: str, data: bytes) -> None:
        """Replace `path` with `data` atomically (readers see the old or the new file, never a torn one)."""
        tmp = self._temp_write(path, data)
        try:
            os.replace(tmp, path)
        except OSError as exc:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise StorageError(f"cannot write {path}: {exc}") from exc

    def delete(self, path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except FileNotFoundError:
        return False  # deleted while listing (cleanup, a writer's temp file)


LogStore = LocalLogStore
"""The store type used by `DeltaLog`; any replacement must keep `put_if_absent` atomic and exclusive."""
