"""The CPU target's first use, made safe for the process around it.

- :func:`import_whole` imports the kernels (and numba) whole or not at all.  SIGINT
  (Ctrl-C) waits until the import has finished, then is handled as usual: an
  interrupted ``import numba`` left its finished submodules behind, out of reach of
  the numba module a retry made (``module 'numba' has no attribute 'core'`` from every
  later call).  An import that fails all the same takes the modules it left half
  linked out of ``sys.modules``, so that the next call imports them afresh.
- ``fork()`` waits (up to :data:`FORK_WAIT_S`) for other threads' imports and numba
  compiles: a lock held across a fork stays held in the child, by a thread that does
  not exist there, and the child's first compile waited for numba's compiler lock
  forever.  Where the wait runs out, the child's calls that would need the lock raise
  a RuntimeError instead.
- :func:`check_env` reports numba's thread settings that cannot work (a pool of no
  threads, a threading layer that cannot be loaded) at the first CPU call, whatever
  its size: numba itself raises only when a call starts its threads.
"""

import contextlib
import importlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from . import compiling

#: Held while :func:`import_whole` imports (and across a fork).
_import_lock = threading.RLock()
#: Seconds a fork waits for another thread's import or compile to finish.
FORK_WAIT_S = 120.0
#: The locks :func:`_before_fork` took, which the parent and the child release.
_held: list[Any] = []


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """SIGINT held until the block ends, then handled as it would have been (Python
    handles signals on the main thread: elsewhere nothing to do)."""
    try:
        old = signal.getsignal(signal.SIGINT)
        caught: list[Any] = []
        if old is None:  # a handler not set from Python: left alone
            raise ValueError
        signal.signal(signal.SIGINT, lambda _signum, frame: caught.append(frame))
    except ValueError:  # not the main thread (or interpreter)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        if caught and callable(old):
            old(signal.SIGINT, caught[0])  # Python's default raises KeyboardInterrupt
        elif caught and old == signal.SIG_DFL:
            signal.raise_signal(signal.SIGINT)


def _unlink_orphans(before: set[str]) -> None:
    """Take out of ``sys.modules`` each module imported since ``before`` whose package
    is no longer there (its import failed): a new import of the package would not link
    it."""
    for name in sorted(set(sys.modules) - before):
        parts = name.split(".")
        if any(".".join(parts[:i]) not in sys.modules for i in range(1, len(parts))):
            sys.modules.pop(name, None)


def import_whole(name: str) -> Any:
    """``importlib.import_module(name)``, whole or not at all (see the module's docstring)."""
    if compiling.unusable:  # this lock may be held by a thread of the parent
        raise RuntimeError(compiling.unusable)
    with _import_lock:
        before = set(sys.modules)
        with _sigint_deferred():
            try:
                return importlib.import_module(name)
            except BaseException:
                _unlink_orphans(before)
                raise


_kernels: Any = None


def kernels() -> Any:
    """The CPU kernels' module (:mod:`dmlnumba.cpu.kernels`), imported whole on first
    use (so that ``import dmlnumba`` stays light) and kept.  Named from this package,
    so that a copy of the package imported under another name (an older tree beside
    this one, ``scripts/harness.py``) runs its own kernels."""
    global _kernels
    if _kernels is None:
        _kernels = import_whole(__name__.rpartition(".")[0] + ".kernels")
    return _kernels


def _compiler_lock() -> Any:
    """numba's compiler lock, where numba has been imported."""
    module = sys.modules.get("numba.core.compiler_lock")
    return None if module is None else module.global_compiler_lock._lock


def _before_fork() -> None:
    """Wait for other threads' first calls, imports and compiles (and cache resets): take all their
    locks at once, or none and try again, so that a thread holding one of them while
    it waits for another (a compile that imports the kernels' module) is never
    deadlocked by the fork; the child will hold them, from the thread that forks."""
    held = (compiling.first_call_lock, _import_lock, _compiler_lock(), compiling._lock)
    locks = [lock for lock in held if lock is not None]
    deadline = time.monotonic() + FORK_WAIT_S
    while True:
        taken = []
        for lock in locks:
            if not lock.acquire(blocking=False):
                break
            taken.append(lock)
        else:
            _held.extend(taken)
            return
        for lock in reversed(taken):
            lock.release()
        if time.monotonic() >= deadline:
            _held.append(None)  # the child may not compile: see _after_fork_in_child
            return
        time.sleep(0.001)


def _release_held() -> bool:
    """Release what :func:`_before_fork` took; whether it took every lock."""
    whole = None not in _held
    while _held:
        lock = _held.pop()
        if lock is not None:
            lock.release()
    return whole


def _after_fork_in_child() -> None:
    if not _release_held():
        compiling.unusable = (
            "dmlnumba: this process was forked while another thread of its parent compiled "
            f"a CPU kernel for more than {FORK_WAIT_S:.0f} s, so numba's compiler cannot be "
            "used here; compile the kernels before forking (a first call, or `python -m "
            "dmlnumba compile`), or start processes with 'spawn'"
        )


os.register_at_fork(
    before=_before_fork, after_in_parent=_release_held, after_in_child=_after_fork_in_child
)


#: What is wrong with numba's thread settings ("" nothing); None until checked.
_env_error: str | None = None
#: numba's threading layers, in the order it tries them, for each NUMBA_THREADING_LAYER
#: value other than "default" (which takes NUMBA_THREADING_LAYER_PRIORITY's order).
_LAYERS = {
    "tbb": ["tbb"],
    "omp": ["omp"],
    "workqueue": ["workqueue"],
    "safe": ["tbb"],
    "threadsafe": ["tbb", "omp"],
    "forksafe": ["tbb"] + (["omp"] if sys.platform != "linux" else []) + ["workqueue"],
}


def check_env(func: str) -> None:
    """Raise a ValueError of ``func`` where numba's thread settings cannot work."""
    global _env_error
    if _env_error is None:
        _env_error = _numba_env_error()
    if _env_error:
        raise ValueError(f"{func}(): {_env_error}")


def _numba_env_error() -> str:
    env = os.environ
    raw = env.get("NUMBA_NUM_THREADS", "").strip()
    if raw.lstrip("+-").isdigit() and int(raw) < 1:  # numba ignores what is not an int
        return (
            f"environment variable NUMBA_NUM_THREADS={env['NUMBA_NUM_THREADS']!r} is not "
            f"valid: numba's thread pool needs at least 1 thread (or unset it)"
        )
    if "NUMBA_THREADING_LAYER" not in env and "NUMBA_THREADING_LAYER_PRIORITY" not in env:
        return ""  # numba's default order ends with workqueue, which always loads
    nbconfig = import_whole("numba").config
    if sorted(nbconfig.THREADING_LAYER_PRIORITY) != ["omp", "tbb", "workqueue"]:
        return (
            f"environment variable NUMBA_THREADING_LAYER_PRIORITY="
            f"{env.get('NUMBA_THREADING_LAYER_PRIORITY')!r} is not valid: it must name tbb, "
            f"omp and workqueue, each once"
        )
    layer = str(nbconfig.THREADING_LAYER).lower()
    layers = list(nbconfig.THREADING_LAYER_PRIORITY) if layer == "default" else _LAYERS.get(layer)
    if layers is None:
        return (
            f"environment variable NUMBA_THREADING_LAYER={env.get('NUMBA_THREADING_LAYER')!r} "
            f"is not a threading layer numba knows: default, {', '.join(_LAYERS)}"
        )
    if any(_loads(name) for name in layers):
        return ""
    hint = "pip install tbb, or " if "tbb" in layers else ""
    return (
        f"environment variable NUMBA_THREADING_LAYER={env.get('NUMBA_THREADING_LAYER')!r} "
        f"cannot be used here: No threading layer could be loaded (tried: "
        f"{', '.join(layers)}); {hint}set another (workqueue always loads) or unset it"
    )


def _loads(layer: str) -> bool:
    """Whether numba can load the threading layer ``layer`` here (as numba tries it)."""
    if layer == "workqueue":
        return True
    try:
        if layer == "tbb":
            from numba.np.ufunc import parallel

            getattr(parallel, "_check_tbb_version_compatible", lambda: None)()
            importlib.import_module("numba.np.ufunc.tbbpool")
        else:
            importlib.import_module("numba.np.ufunc.omppool")
    except ImportError:
        return False
    return True
