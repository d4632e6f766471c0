"""The ObjectStore on a local filesystem: one regular file per object under a root directory.

Key ``a/b/c.sst`` is the file ``<root>/a/b/c.sst``. Writes go to a private staging directory on
the same filesystem first and are then renamed (or hard-linked) into place, so readers only ever
see complete objects, and a crash leaves at worst an orphan staging file, reaped by the next open.

Layout::

    <root>/.staging/<instance>/   one per open store, flock()ed while the store is alive
    <root>/<key>                  the objects
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
import uuid
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import BinaryIO

from gnomon.errors import InvalidArgument, NotFound, Unavailable
from objectstore.api import ObjectMeta

#: Reserved first key segment: the staging area lives at ``<root>/.staging``.
STAGING_DIR = ".staging"

# Bounds the retries of a put racing deletes that prune its parent directory. Each retry needs a
# delete to empty and remove the directory in the few microseconds between our mkdir and rename,
# so reaching the bound means something else is removing directories under the root.
_PUBLISH_ATTEMPTS = 100


def _valid_segment(segment: str) -> bool:
    return (
        segment not in ("", ".")
        and ".." not in segment
        and "/" not in segment
        and "\\" not in segment
        and "\x00" not in segment
    )


def check_key(key: str) -> list[str]:
    """The segments of ``key``; InvalidArgument unless it is a well-formed object key.

    The rules are backend-neutral (no leading "/", no "..", no "." or empty segments, no backslash
    or NUL) so that a key valid on one backend is valid on all of them.
    """
    if not isinstance(key, str) or not key:
        raise InvalidArgument(f"invalid object key {key!r}: must be a non-empty string")
    if key.startswith("/"):
        raise InvalidArgument(f"invalid object key {key!r}: must not start with '/'")
    segments = key.split("/")
    if not all(_valid_segment(s) for s in segments):
        raise InvalidArgument(
            f"invalid object key {key!r}: no '..', no '.' or empty segments, "
            "no backslash or NUL allowed"
        )
    return segments


@contextmanager
def _os_errors(subject: str) -> Iterator[None]:
    """Turn the OS errors not handled on purpose into gnomon errors naming ``subject``."""
    try:
        yield
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:
            raise InvalidArgument(f"{subject} is too long for the local filesystem") from e
        raise Unavailable(f"local object store failed on {subject}: {e}") from e


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _discard(path: str) -> None:
    with suppress(FileNotFoundError):
        os.unlink(path)


def _meta(key: str, st: os.stat_result) -> ObjectMeta:
    return ObjectMeta(key=key, size=st.st_size, mtime_ms=st.st_mtime_ns // 1_000_000)


def _conflict(key: str) -> InvalidArgument:
    return InvalidArgument(
        f"object key {key!r} conflicts with an existing key: the local store cannot hold both "
        "a key and keys below it (such as 'a' and 'a/b')"
    )


def _reap_staging(staging: str) -> None:
    """Remove the staging directories of stores that are no longer open.

    A live store holds an exclusive flock on its directory, and the kernel drops the lock when
    the owning process dies, so a directory we can lock belongs to a closed or crashed writer.
    Process ids would not do: a restarted container often gets the crashed process's pid back.
    """
    with os.scandir(staging) as entries:
        stale = list(entries)
    for entry in stale:
        if not entry.is_dir(follow_symlinks=False):
            _discard(entry.path)
            continue
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            continue  # reaped by a concurrent open
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its store is open
            shutil.rmtree(entry.path, ignore_errors=True)
        finally:
            os.close(fd)


def _claim_staging(staging: str) -> tuple[str, int]:
    """Create and lock this store's staging directory; returns its path and the locked fd."""
    while True:
        path = os.path.join(staging, uuid.uuid4().hex)
        os.mkdir(path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            continue  # a concurrent open reaped it before we could even open it
        claimed = False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # A concurrent open may have reaped the directory between our mkdir and flock; once
            # we hold the lock and it still exists, no one else will remove it.
            claimed = os.path.isdir(path)
        except BlockingIOError:
            pass  # that concurrent reaper holds the lock and is removing the directory
        finally:
            if not claimed:
                os.close(fd)
        if claimed:
            return path, fd


def _release_staging(path: str, fd: int) -> None:
    shutil.rmtree(path, ignore_errors=True)
    os.close(fd)


class LocalObjectStore:
    """:class:`objectstore.api.ObjectStore` over the directory ``root`` (created if absent).

    Several stores, in one process or many, may share a root. Each put is atomic and durable
    when it returns: the data is fsynced before the rename and the directory entry after it.
    """

    def __init__(self, root: str) -> None:
        self._root = os.path.abspath(root)
        staging = os.path.join(self._root, STAGING_DIR)
        with _os_errors(f"object store root {self._root!r}"):
            os.makedirs(staging, exist_ok=True)
            _reap_staging(staging)
            self._staging, fd = _claim_staging(staging)
        self._finalizer = weakref.finalize(self, _release_staging, self._staging, fd)
        # At interpreter exit daemon threads may still be writing; the process's death releases
        # the lock and the next open reaps the directory instead.
        self._finalizer.atexit = False

    @property
    def root(self) -> str:
        return self._root

    def __repr__(self) -> str:
        return f"LocalObjectStore({self._root!r})"

    # -- writes ---------------------------------------------------------------------------------

    def put(self, key: str, data: bytes) -> ObjectMeta:
        segments = self._segments(key)
        with _os_errors(f"object {key!r}"):
            staged = self._staged_path()
            try:
                with open(staged, "xb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                    st = os.fstat(f.fileno())
                self._publish(key, segments, staged, exclusive=False)
            except BaseException:
                _discard(staged)
                raise
        return _meta(key, st)

    def put_file(self, key: str, path: str) -> ObjectMeta:
        segments = self._segments(key)
        with _os_errors(f"object {key!r} from local file {path!r}"):
            try:
                source_mode = os.stat(path).st_mode
            except FileNotFoundError:
                raise NotFound(f"local file {path!r} to store as {key!r} not found") from None
            if not stat.S_ISREG(source_mode):
                raise InvalidArgument(f"{path!r} to store as {key!r} is not a regular file")
            staged = self._staged_path()
            try:
                try:
                    os.replace(path, staged)
                except OSError as e:
                    if e.errno != errno.EXDEV:
                        raise
                    shutil.copyfile(path, staged)
                fd = os.open(staged, os.O_RDONLY)
                try:
                    # A moved file keeps the mtime of its last write; the object's mtime is the
                    # time it was stored, as on other backends.
                    os.utime(fd)
                    os.fsync(fd)
                    st = os.fstat(fd)
                finally:
                    os.close(fd)
                self._publish(key, segments, staged, exclusive=False)
            except BaseException:
                _discard(staged)
                raise
        return _meta(key, st)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        segments = self._segments(key)
        with _os_errors(f"object {key!r}"):
            staged = self._staged_path()
            try:
                with open(staged, "xb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                return self._publish(key, segments, staged, exclusive=True)
            finally:
                _discard(staged)

    def delete(self, key: str) -> bool:
        segments = self._segments(key)
        path = os.path.join(self._root, *segments)
        with _os_errors(f"object {key!r}"):
            try:
                os.unlink(path)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                return False
            self._prune(os.path.dirname(path))
        return True

    # -- reads ----------------------------------------------------------------------------------

    def get(self, key: str) -> bytes:
        with self._open(key) as f, _os_errors(f"object {key!r}"):
            return f.read()

    def get_range(self, key: str, start: int, length: int) -> bytes:
        if start < 0 or length < 0:
            raise InvalidArgument(
                f"invalid range of object {key!r}: start {start} and length {length} "
                "must not be negative"
            )
        with self._open(key) as f, _os_errors(f"object {key!r}"):
            # Objects never change in place (a put replaces the file), so the size is stable;
            # clamping matters because read(n) allocates n bytes up front.
            available = os.fstat(f.fileno()).st_size - start
            if available <= 0:
                return b""
            f.seek(start)
            return f.read(min(length, available))

    def open_input(self, key: str) -> BinaryIO:
        return self._open(key)

    def head(self, key: str) -> ObjectMeta:
        return _meta(key, self._stat(key)[1])

    def uri(self, key: str) -> str:
        """``key`` as a ``file:`` URI (for readers given URIs, such as Spark)."""
        return "file://" + os.path.join(self._root, *check_key(key))

    def local_path(self, key: str) -> str:
        """The file holding the object, for readers that need a path rather than a file object;
        NotFound if absent. A put replaces the file rather than rewriting it, so once opened
        the file keeps reading as the version it was when opened."""
        return self._stat(key)[0]

    def list(self, prefix: str = "") -> Iterator[ObjectMeta]:
        if not isinstance(prefix, str):
            raise InvalidArgument(f"invalid object key prefix {prefix!r}: must be a string")
        *dir_segments, name_prefix = prefix.split("/")
        # Every key below a directory shares its full segments, so a prefix whose complete
        # segments could not appear in a key matches nothing (and must not escape the root).
        if (
            not all(_valid_segment(s) for s in dir_segments)
            or ".." in name_prefix
            or (dir_segments and dir_segments[0] == STAGING_DIR)
        ):
            return iter(())
        directory = os.path.join(self._root, *dir_segments)
        key_prefix = "".join(s + "/" for s in dir_segments)
        return self._scan(directory, key_prefix, name_prefix)

    # -- internals ------------------------------------------------------------------------------

    def _segments(self, key: str) -> Sequence[str]:
        segments = check_key(key)
        if segments[0] == STAGING_DIR:
            raise InvalidArgument(
                f"invalid object key {key!r}: {STAGING_DIR!r} is reserved by the local store"
            )
        return segments

    def _staged_path(self) -> str:
        return os.path.join(self._staging, uuid.uuid4().hex)

    def _stat(self, key: str) -> tuple[str, os.stat_result]:
        path = os.path.join(self._root, *self._segments(key))
        with _os_errors(f"object {key!r}"):
            try:
                st = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                raise NotFound(f"object {key!r} not found") from None
        if not stat.S_ISREG(st.st_mode):
            raise NotFound(f"object {key!r} not found")
        return path, st

    def _open(self, key: str) -> BinaryIO:
        path = os.path.join(self._root, *self._segments(key))
        with _os_errors(f"object {key!r}"):
            try:
                return open(path, "rb")
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                raise NotFound(f"object {key!r} not found") from None

    def _publish(self, key: str, segments: Sequence[str], staged: str, *, exclusive: bool) -> bool:
        """Move (or, if ``exclusive``, hard-link) ``staged`` to the key's path and make the new
        directory entry durable. False if ``exclusive`` and the object already exists."""
        target = os.path.join(self._root, *segments)
        for _ in range(_PUBLISH_ATTEMPTS):
            try:
                self._make_parents(key, segments)
                if exclusive:
                    # link(2), unlike rename(2), fails when the target exists: an atomic
                    # create-if-absent that still never exposes a partial object.
                    os.link(staged, target)
                else:
                    os.replace(staged, target)
            except FileNotFoundError:
                # A concurrent delete removed a parent that it had just emptied; rmdir(2) only
                # removes empty directories, so nothing was lost and the directories can be
                # made again.
                continue
            except (FileExistsError, IsADirectoryError):
                if os.path.isdir(target):
                    self._remove_empty_dir(key, target)
                elif exclusive:
                    return False  # link(2) found an existing object
                continue
            except NotADirectoryError:
                raise _conflict(key) from None
            # Missing: a concurrent delete already removed the object and its directory.
            with suppress(FileNotFoundError):
                _fsync_dir(os.path.dirname(target))
            return True
        raise Unavailable(f"could not store object {key!r}: its directory kept disappearing")

    def _remove_empty_dir(self, key: str, target: str) -> None:
        """Clear the way for an object at ``target``, a directory. An empty one holds no keys: a
        crash between a delete's unlink and its rmdir leaves it behind."""
        try:
            os.rmdir(target)
        except FileNotFoundError:
            pass
        except OSError:
            raise _conflict(key) from None

    def _make_parents(self, key: str, segments: Sequence[str]) -> None:
        """Create the key's missing parent directories, each made durable in its parent (an
        fsynced file is lost after a crash if the directory holding it is)."""
        path = self._root
        for name in segments[:-1]:
            parent, path = path, os.path.join(path, name)
            try:
                os.mkdir(path)
            except FileExistsError:
                if not stat.S_ISDIR(os.stat(path).st_mode):
                    raise _conflict(key) from None
            else:
                _fsync_dir(parent)

    def _prune(self, directory: str) -> None:
        """Remove ``directory`` and its ancestors below the root while they are empty, then make
        the removal durable."""
        while directory != self._root:
            try:
                os.rmdir(directory)
            except OSError:
                # Not empty (a concurrent put owns it now) or already removed by another delete.
                break
            directory = os.path.dirname(directory)
        # Missing: removed by a concurrent delete, which syncs its own removal.
        with suppress(FileNotFoundError):
            _fsync_dir(directory)

    def _scan(self, directory: str, key_prefix: str, name_prefix: str) -> Iterator[ObjectMeta]:
        """Objects below ``directory`` (whose keys start with ``key_prefix``) whose first segment
        starts with ``name_prefix``, in ascending key order."""
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError):
            return  # nothing below: the prefix names no directory or it was just removed
        except OSError as e:
            raise Unavailable(f"local object store failed listing {directory!r}: {e}") from e
        # Keys below directory "d" all start with "d/", so sorting directories as "d/" puts them
        # exactly where their keys belong among sibling objects ("d.x" < "d/..." < "d0").
        ordered: list[tuple[str, os.DirEntry[str]]] = []
        for entry in entries:
            name = entry.name
            if not name.startswith(name_prefix) or not _valid_segment(name):
                continue
            if not key_prefix and name == STAGING_DIR:
                continue
            ordered.append((name + "/" if entry.is_dir(follow_symlinks=False) else name, entry))
        ordered.sort(key=lambda item: item[0])
        for sort_name, entry in ordered:
            if sort_name.endswith("/"):
                yield from self._scan(entry.path, key_prefix + sort_name, "")
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # deleted since the directory was read
            except OSError as e:
                raise Unavailable(f"local object store failed on {entry.path!r}: {e}") from e
            if stat.S_ISREG(st.st_mode):
                yield _meta(key_prefix + entry.name, st)
