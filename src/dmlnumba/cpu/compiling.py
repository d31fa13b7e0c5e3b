"""Compiling the CPU kernels: numba's on-disk cache where it can be used, and a
first call that explains itself.

- :func:`jit` is ``numba.njit(cache=True)``, except where numba finds no writable
  cache location (a read-only install, no home directory): then the kernels
  compile in memory, and one warning says so, at the first kernel call (never
  while the kernels' module is imported: under ``-W error`` a warning raised there
  would leave it half made).  Under ``-W error`` every call that would compile
  raises it, until one call has emitted it.
- :func:`run` calls a kernel.  The first call of each specialisation (kernel and
  bit widths) in a process is watched: if it takes more than :data:`NOTICE_AFTER` seconds (numba is
  compiling), one log line says what is happening and which command compiles
  ahead of time; if numba's cache entry for it cannot be read (a truncated or
  corrupt file), the cache index is reset and the kernel recompiled, once, with a
  warning.  After the first call, a call is the kernel call plus a set lookup.
- :func:`c_function` compiles a pass as a C function (``numba.cfunc``, cached the
  same way) and gives its address, which the drivers call
  (:mod:`dmlnumba.cpu.llvm`); :func:`c_function_address` makes one on first use,
  watched as :func:`run` watches a first call, and keeps its address.

Every cache these make is :func:`dmlnumba.cpu.cachefile.checked`: entries are added
under a lock that every process takes, and an entry that holds another
specialisation's code is never loaded.

numba offers no public way to reset one function's cache, so the reset uses
the dispatcher's cache object (``_cache.flush()``, falling back to
``_cache.disable()`` where the index cannot be written), and for a
:func:`c_function` the cache object ``numba.cfunc(cache=True)`` makes
(``numba.core.caching.FunctionCache``).
"""

from __future__ import annotations

import logging
import threading
import traceback
import warnings
from collections.abc import Callable
from typing import Any

log = logging.getLogger("dmlnumba")

#: Every dispatcher made by :func:`jit`, so that a bad cache entry anywhere in a
#: kernel's call tree can be reset.
_dispatchers: list[Any] = []
#: The Python functions of every :func:`c_function`, whose caches a reset flushes
#: too, and the compiled C functions: (the Python function's name, the
#: ``numba.cfunc`` object, which keeps the code alive).
_cfunc_sources: dict[Callable, None] = {}  # an ordered set
c_functions: list[tuple[str, Any]] = []
_warm: set[tuple] = set()
_lock = threading.Lock()
#: Why numba's compiler cannot be used in this process (None: it can): set in a child
#: forked while its parent compiled (:mod:`dmlnumba.cpu.process`).
unusable: str | None = None
#: Whether a kernel compiles without numba's cache, and whether the warning saying so
#: has been emitted (returned from ``warnings.warn``: not raised as an error).
_no_cache = False
_warned_no_cache = False

#: Seconds a first call may take before the compile notice is logged: above what a
#: first call that loads from a warm cache takes on a 2-core machine, below a
#: compile's :data:`EXPECTED_SECONDS` (docs/PERFORMANCE.md, "Startup and compile time").
NOTICE_AFTER = 1.5


def jit(func: Callable | None = None, **opts: Any) -> Any:
    """``numba.njit(cache=True, **opts)``, or without the cache where numba has nowhere
    to write it."""
    if func is None:
        return lambda f: jit(f, **opts)
    from numba import njit

    from .cachefile import checked

    global _no_cache
    try:
        d = njit(cache=True, **opts)(func)
        if hasattr(d, "_cache"):  # not under NUMBA_DISABLE_JIT (func itself)
            checked(d._cache)
    except RuntimeError as e:  # numba: "cannot cache function ...: no locator available"
        if "cannot cache" not in str(e):
            raise
        _no_cache = True
        d = njit(**opts)(func)
    _dispatchers.append(d)
    return d


def c_function(sig: Any, func: Callable) -> Any:
    """The address (an int) of ``numba.cfunc(sig, cache=True)(func)``, compiled (or
    loaded from numba's cache) now, or without the cache where numba has nowhere to
    write it (see :func:`jit`); called from jitted code through
    :func:`~dmlnumba.cpu.llvm.call_int64`, ``call_void`` and ``call_pass``, so that a caller
    compiles without linking its code in (docs/PERFORMANCE.md).  Under
    ``NUMBA_DISABLE_JIT``: a handle of ``func`` itself (an int, as an address is, which
    a parameter block can hold), which the stand-ins of those call."""
    from numba import config as nbconfig
    from numba.core import sigutils
    from numba.core.ccallback import CFunc

    from .cachefile import checked

    if getattr(nbconfig, "DISABLE_JIT", 0):
        from .llvm import python_functions

        python_functions[id(func)] = func  # (kept: no other function takes its id)
        return id(func)
    global _no_cache
    _cfunc_sources[func] = None
    # numba.cfunc(sig, cache=True)(func), with its cache checked before it compiles.
    f = CFunc(func, sigutils.normalize_signature(sig), locals={}, options={})
    try:
        f.enable_caching()
        checked(f._cache)  # type: ignore[attr-defined]  # numba sets it in enable_caching
    except RuntimeError as e:  # numba: "cannot cache function ...: no locator available"
        if "cannot cache" not in str(e):
            raise
        _no_cache = True
    f.compile()
    c_functions.append((func.__name__, f))  # its code lives as long as f does
    return f.address


def _from_cache(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while numba read its cache: not where a cached
    parallel kernel, as numba rebuilt it, started numba's thread pool and the
    threading layer could not be loaded (``NUMBA_THREADING_LAYER=tbb`` without tbb),
    which no recompile mends and which would have flushed every cache."""
    names = [f.filename.replace("\\", "/") for f in traceback.extract_tb(exc.__traceback__)]
    if any(n.endswith("numba/np/ufunc/parallel.py") for n in names):
        return False
    return any(n.endswith("numba/core/caching.py") for n in names)


def _reset_caches() -> None:
    from numba.core.caching import FunctionCache

    from .cachefile import checked

    for f in _cfunc_sources:  # the cache numba.cfunc(cache=True) makes for f
        try:
            checked(FunctionCache(f)).flush()
        except (OSError, RuntimeError):  # not writable; no cache location at all
            pass
    for d in _dispatchers:
        cache = getattr(d, "_cache", None)
        if cache is None:
            continue
        try:
            cache.flush()
        except OSError:
            cache.disable()


def run(kernel: Callable, key: tuple, *args: Any) -> Any:
    """``kernel(*args)``; ``key`` names its specialisation (kernel name and bit widths)."""
    if key in _warm:
        return kernel(*args)
    return _first_call(kernel, key, args)


#: The C functions' addresses by key: the one place each is kept (the kernels' makers
#: compile or load one anew each time they are called).
_addresses: dict[tuple, Any] = {}


def c_function_address(make: Callable, *key: Any) -> Any:
    """The address of a kernel pass's C function, ``make(*key[1:])`` (a maker such as
    :func:`~dmlnumba.cpu.slice_kernels.chunk_function`, which calls
    :func:`c_function`), made on first use, its first build watched as :func:`run`
    watches a kernel's first call (not through :func:`run`: what patches ``run`` to
    see the kernel calls does not see these), then looked up once a call."""
    f = _addresses.get(key)
    if f is None:
        f = _addresses[key] = _first_call(make, key + ("C",), key[1:])
    return f


def _warn_no_cache() -> None:
    """The warning that kernels compile in memory, once a process: it counts as
    emitted only once ``warnings.warn`` returns (under ``-W error`` it raises, from
    every first call, before anything is computed)."""
    global _warned_no_cache
    if _no_cache and not _warned_no_cache:
        warnings.warn(
            "dmlnumba: numba has no writable cache directory here, so kernels compile in "
            "memory on every run; set NUMBA_CACHE_DIR to a writable directory to keep them",
            RuntimeWarning,
            stacklevel=2,
        )
        _warned_no_cache = True


#: Seconds a first compile takes, cold, on an idle 2-core machine, which the compile
#: notice quotes: most of a first call's time is its passes' C functions (keys ending
#: in "C": a kind of slice1's chunk copy, nonzero's block write, dense write and
#: count); a driver compiles in well under a second (``python scripts/first_call.py``;
#: docs/PERFORMANCE.md).
EXPECTED_SECONDS = {"slice1": 2, "write": 2, "dense": 1, "count": 1, "driver": 1}


def expected_seconds(key: tuple) -> int:
    """The seconds the compile notice says a first compile of ``key`` takes."""
    if key[-1] == "C":
        return EXPECTED_SECONDS[key[0]]
    return EXPECTED_SECONDS["driver"]


#: Held for the whole of a kernel's first call (its compile, cache I/O and first run),
#: so that a fork waits for it to end (:mod:`dmlnumba.cpu.process`): numba holds more
#: locks during a compile than its compiler lock.
first_call_lock = threading.RLock()


def _first_call(kernel: Callable, key: tuple, args: tuple) -> Any:
    with first_call_lock:
        return _first_call_held(kernel, key, args)


def _first_call_held(kernel: Callable, key: tuple, args: tuple) -> Any:
    if unusable:  # the compiler lock may be held by a thread of the parent
        raise RuntimeError(unusable)
    _warn_no_cache()
    name = "/".join(str(k) for k in key)
    timer = threading.Timer(
        NOTICE_AFTER,
        log.warning,
        (
            "dmlnumba: compiling the CPU kernel %s, once per machine and numba version (about "
            "%d s on 2 cores; `python -m dmlnumba compile` compiles every kernel ahead of time)",
            name,
            expected_seconds(key),
        ),
    )
    timer.daemon = True
    timer.start()
    try:
        try:
            result = kernel(*args)
        except Exception as e:
            if not _from_cache(e):
                raise
            warnings.warn(
                f"dmlnumba: numba's cached code for {name} could not be read ({type(e).__name__}: "
                f"{e}); recompiling it",
                RuntimeWarning,
                stacklevel=3,
            )
            with _lock:
                _reset_caches()
            result = kernel(*args)
    finally:
        timer.cancel()
    _warm.add(key)
    return result
