"""numba's on-disk cache, safe for several processes at once.

numba keeps one index file per Python function (``<function>-<line>.pyXY.nbi``): a map
from each specialisation (signature, CPU, hashes of the bytecode and closure) to a data
file.  It adds an entry by reading the index, taking the first free data file number
and writing the index back, which is not one step across processes: two processes that
add entries of one function at once may both take number 1, and the index then names
one specialisation's machine code under the other's key, which every later process
loads (``python -m dmlnumba compile``'s workers did: wrong coordinates, "can't unbox
array").  :func:`checked` makes a numba cache object

- add an entry (and flush its index) under an exclusive lock of a file beside the
  index (``<index>.lock``), so that the read-modify-write is one step for every
  process that uses these kernels;
- write each data file with the key it was made for, and never load an entry whose data
  names another key (or none: written by numba itself, or by an older dmlnumba): the
  kernel compiles again and its entry is written anew.

numba has no public interface for this: :class:`CheckedIndex` is its
``IndexDataCacheFile`` (numba-cuda has its own copy of it) with ``save``, ``load`` and
``flush`` wrapped.
"""

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

log = logging.getLogger("dmlnumba")

#: The first item of every data file :class:`CheckedIndex` writes: ``(TAG, key, data)``.
TAG = "dmlnumba-cache-entry-1"

if sys.platform == "win32":
    import msvcrt

    def _acquire(fd: int) -> None:
        while True:
            try:
                msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
                return
            except OSError:  # LK_LOCK gives up after about 10 s: wait on
                continue

    def _release(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _acquire(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)

    def _release(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def index_lock(index_path: str) -> Iterator[None]:
    """Hold the exclusive lock of the index at ``index_path`` (not inherited by
    programs this process runs: the descriptor closes on exec)."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(index_path + ".lock", flags, 0o666)
    try:
        _acquire(fd)
        try:
            yield
        finally:
            _release(fd)
    finally:
        os.close(fd)


class CheckedIndex:
    """numba's index and data files, written under :func:`index_lock` and with each
    entry's key in its data file (see the module's docstring): mixed into the cache
    file class of numba's CPU cache or numba-cuda's, which share this interface."""

    _index_path: str

    def save(self, key: Any, data: Any) -> None:
        with index_lock(self._index_path):
            super().save(key, (TAG, key, data))  # type: ignore[misc]

    def flush(self) -> None:
        with index_lock(self._index_path):
            super().flush()  # type: ignore[misc]

    def load(self, key: Any) -> Any:
        # Read without the lock: numba replaces each file whole (a rename).
        data = super().load(key)  # type: ignore[misc]
        if data is None:
            return None
        if type(data) is tuple and len(data) == 3 and data[0] == TAG:
            if data[1] == key:
                return data[2]
            log.warning(
                "dmlnumba: numba's cache entry in %s holds another specialisation's code; "
                "compiling this one and writing its entry anew",
                self._index_path,
            )
        return None  # foreign or untagged: compiled, and the entry written over


_checked_classes: dict[type, type] = {}


def checked(cache: Any) -> Any:
    """``cache`` (a numba or numba-cuda function cache) with its index file a
    :class:`CheckedIndex` of its own class."""
    f = cache._cache_file
    tp = type(f)
    if not issubclass(tp, CheckedIndex):
        sub = _checked_classes.get(tp)
        if sub is None:
            sub = _checked_classes[tp] = type("Checked" + tp.__name__, (CheckedIndex, tp), {})
        f.__class__ = sub
    return cache
