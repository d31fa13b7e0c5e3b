"""The CPU kernels' threads: whether a call may run on numba's thread pool (not in a
dask task, not in a forked child of an OpenMP parent), and parallel regions from
several application threads under a threading layer that cannot take them
(workqueue: one at a time, the others on their own threads)."""

import contextlib
import os
import threading

from . import compiling

_fork_child = False
#: ``one_thread``: set by tasks of a dask graph, whose scheduler's threads are the
#: parallelism (numba's pool on top of them would oversubscribe the cores).
_local = threading.local()


@contextlib.contextmanager
def one_thread():
    """Kernels called inside run on the calling thread (a dask task's: the scheduler's
    threads are the parallelism there)."""
    before = getattr(_local, "one_thread", False)
    _local.one_thread = True
    try:
        yield
    finally:
        _local.one_thread = before


def _mark_fork_child():
    global _fork_child
    _fork_child = True


os.register_at_fork(after_in_child=_mark_fork_child)


def threads_ok():
    """Whether a parallel kernel may run in this process.  GNU OpenMP's thread
    pool does not survive ``fork()``: numba's ``omp`` layer kills a forked child
    that enters a parallel region once the parent has started the pool.  Such a
    child runs every kernel on its own thread instead (same results)."""
    if getattr(_local, "one_thread", False):
        return False
    if not _fork_child:
        return True
    import numba

    try:
        return numba.threading_layer() != "omp"
    except ValueError:  # no thread pool was started before the fork
        return True


#: Held by the thread whose kernel runs on numba's threads, until a parallel call has
#: shown that numba's threading layer takes parallel regions from several threads at
#: once: tbb and omp do; workqueue aborts the process ("Concurrent access has been
#: detected"), so under it one parallel region runs at a time, for good.
_pool = threading.Lock()
_pool_shared = False


def run_parallel(parallel, serial, key, *args):
    """``parallel(*args)`` on numba's threads; ``serial(*args)`` on this thread where
    another thread's parallel region runs and numba's layer may not take two (the
    same results either way)."""
    global _pool_shared
    if _pool_shared:
        return compiling.run(parallel, key + ("parallel",), *args)
    if not _pool.acquire(blocking=False):
        return compiling.run(serial, key, *args)
    try:
        result = compiling.run(parallel, key + ("parallel",), *args)
        import numba

        try:
            _pool_shared = numba.threading_layer() != "workqueue"
        except ValueError:  # no pool started (NUMBA_DISABLE_JIT): keep to one at a time
            pass
    finally:
        _pool.release()
    return result
