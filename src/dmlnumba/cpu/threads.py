"""The CPU kernels' threads: whether a call may run on numba's thread pool (not in a
dask task, not in a forked child of an OpenMP parent, not on a busy machine where
the load check finds no cores free), parallel regions from several application threads under a
threading layer that cannot take them (workqueue: one at a time, the others on
their own threads), and which nonzero driver takes a call."""

import contextlib
import os
import threading
import time
from typing import Any

from .. import config
from ..params import NONZERO_CPU
from . import compiling, process

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
    _forget_stats()  # (the parent's threads' files)


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


def run_passes(job):
    """``job(on_threads)``: a call's kernels on numba's threads (``on_threads`` True),
    as many of them as have a core (:func:`threads_free`, where ``CPU_LOAD_CHECK``
    asks: once for the whole job, whose passes follow each other); or on this thread
    where fewer than two have one, or where another thread's parallel region runs
    and numba's layer may not take two (the same results either way)."""
    global _pool_shared
    import numba

    want = numba.get_num_threads()
    k = threads_free(want) if config.CPU_LOAD_CHECK else want
    if k < 2:
        return job(False)
    if _pool_shared:
        return _on_threads(k, want, job)
    if not _pool.acquire(blocking=False):
        return job(False)
    try:
        result = _on_threads(k, want, job)
        try:
            _pool_shared = numba.threading_layer() != "workqueue"
        except ValueError:  # no pool started (NUMBA_DISABLE_JIT): keep to one at a time
            pass
    finally:
        _pool.release()
    return result


def run_parallel(parallel, serial, key, *args):
    """``parallel(*args)`` on numba's threads (:func:`run_passes` decides), else
    ``serial(*args)`` on this thread: one driver body compiled twice."""
    if_threads = (parallel, key + ("parallel",))
    return run_passes(lambda on: compiling.run(*(if_threads if on else (serial, key)), *args))


def run_pass(f, args, results, on_threads):
    """``results[b] = f(args, b)`` for each block ``b`` (a pass's C function and its
    argument block, :mod:`dmlnumba.cpu.blocks`), on numba's threads or this one."""
    k = process.kernels()
    if on_threads:
        compiling.run(k.blocks_parallel, ("blocks", "parallel"), f, args, results)
    else:
        compiling.run(k.blocks, ("blocks",), f, args, results)


def _on_threads(k, want, job):
    """``job(True)`` on ``k`` of numba's threads (this thread's setting, put back
    after: it was ``want``)."""
    import numba

    if k == want:
        return job(True)
    numba.set_num_threads(k)
    try:
        return job(True)
    finally:
        numba.set_num_threads(want)


#: ``/proc/loadavg``, kept open (:func:`threads_free`); None until first asked, False
#: where it cannot be read (not Linux).
_loadavg: Any = None
#: Seconds that calls stay on fewer threads once the busy score is ``BUSY_CHECKS``
#: (its most): a count that saw other runnable threads adds 1 to it, one that saw
#: none takes 2 off, and a count more than ``BUSY_HOLD_S`` after the last starts it
#: anew.
BUSY_HOLD_S = 1.0
BUSY_CHECKS = 8
_busy_until = -1.0
_busy_score = 0
#: ``time.monotonic()`` of the last count.
_last_count = -1e9
#: The fewest threads with a core seen since ``_busy_until - BUSY_HOLD_S``.
_held = 1
#: Seconds that a count answers for the calls that follow (of as many threads or
#: fewer) without another: one that found every thread a core, and a busy one that
#: followed another busy one (a busy score of ``KEEP_SCORE``).  After a parallel
#: region a count reads the state of each of the pool's threads, which spin a moment,
#: and on many cores that costs more than a small parallel call (docs/PERFORMANCE.md,
#: ``CPU_LOAD_CHECK``).  A first busy count is not kept (the next call counts again):
#: a kernel task runnable for a moment would keep the calls of the next ``KEEP_S`` on
#: fewer threads.
KEEP_S = 0.01
KEEP_SCORE = 2
#: The kept count: ``(until, threads, free)``, one tuple, read and set whole (calls
#: from several threads).
_kept: tuple = (-1.0, 0, 0)
#: The machine's cores, asked once (``os.cpu_count()`` is not free).
_CORES = os.cpu_count() or 1


def threads_free(threads):
    """How many of ``threads`` threads have a core of their own: the machine's cores
    less the other runnable threads (Linux's count of every runnable thread,
    ``/proc/loadavg``, less the caller and this process's own thread pools,
    :func:`_pools_running`, counted again after theirs); the count that started a
    hold, or a lower one, for ``BUSY_HOLD_S`` once most counts for a while were
    busy (``BUSY_CHECKS``; the other processes of a busy machine sleep now and then:
    a count taken at such a moment would overcommit the cores).  A parallel region
    waits for its slowest thread, and on a busy machine one of them waits for a
    core: parallel calls then take several times their serial time
    (docs/PERFORMANCE.md, ``CPU_LOAD_CHECK``).
    ``threads`` where the count cannot be read; the last count's answer where it is
    less than ``KEEP_S`` old and was kept (:data:`KEEP_S`).  Asked only before a
    call large enough for the threads."""
    global _loadavg, _busy_until, _held, _busy_score, _last_count
    global _kept
    now = time.monotonic()
    until, kept_threads, kept_free = _kept
    if now < until and threads <= kept_threads:
        return min(threads, kept_free)
    if _loadavg is None:
        try:
            _loadavg = os.open("/proc/loadavg", os.O_RDONLY)
        except OSError:
            _loadavg = False
    if _loadavg is False:
        return threads
    try:
        others = _running() - 1  # (the caller)
        if others > _CORES - threads:  # (the threads' states cost more: asked only here)
            pools = _pools_running(others - (_CORES - threads))
            # Counted again after the states: a thread runnable for a moment only (a
            # pool's that stopped spinning between the two reads) is not load.
            others = min(others, _running() - 1) - pools
    except (OSError, ValueError, IndexError):
        return threads
    seen = min(threads, max(1, _CORES - others))
    # A hold starts, or is renewed, where most counts for a while saw others: on an
    # idle machine, system tasks (some woken by this process's own calls: a freed
    # buffer's pages) are runnable for a moment at some counts, now and then at
    # several in a row, and no hold may follow them.  Renewed by what is seen, not
    # by the held count: calls made while it holds would otherwise renew it for as
    # long as they follow each other.
    if now - _last_count > BUSY_HOLD_S:
        _busy_score = 0
    _last_count = now
    if seen < threads:
        _busy_score = min(BUSY_CHECKS, _busy_score + 1)
        if _busy_score == BUSY_CHECKS:
            if now >= _busy_until or seen < _held:
                _held = seen
            _busy_until = now + BUSY_HOLD_S
    else:
        _busy_score = max(0, _busy_score - 2)
    free = min(seen, _held) if now < _busy_until else seen
    if free == threads or _busy_score >= KEEP_SCORE:
        _kept = (now + KEEP_S, threads, free)
    else:  # (newer than the kept count a call of fewer threads would take)
        _kept = (-1.0, 0, 0)
    return free


def _running():
    """Linux's count of runnable threads, every process's (``/proc/loadavg``)."""
    return int(os.pread(_loadavg, 128, 0).split()[3].split(b"/")[0])


#: This process's threads that Python did not start, as last listed: each one's
#: ``/proc/self/task/<tid>/stat``, kept open, by thread id, and how many threads the
#: process had then (:func:`_pools_running`); emptied in a forked child.
_stats: dict = {}
_listed = -1
#: ``/proc/self/stat``, kept open (its thread count); None until first asked.
_self_stat: Any = None
_stats_lock = threading.Lock()


def _forget_stats():
    """Close the kept files (:data:`_stats`, :data:`_self_stat`): a forked child's are
    its parent's threads'."""
    global _listed, _self_stat, _stats_lock
    for fd in list(_stats.values()) + ([_self_stat] if _self_stat is not None else []):
        try:
            os.close(fd)
        except OSError:
            pass
    _stats.clear()
    _listed, _self_stat = -1, None
    _stats_lock = threading.Lock()  # (another thread may have held it at the fork)


def _pool_stats():
    """:data:`_stats`, listed again where the process's thread count changed (a thread
    started or ended)."""
    global _listed, _self_stat
    if _self_stat is None:
        _self_stat = os.open("/proc/self/stat", os.O_RDONLY)
    s = os.pread(_self_stat, 1024, 0)
    count = int(s[s.rfind(b")") + 2 :].split()[17])  # (num_threads, the 20th field)
    if count == _listed:
        return _stats
    tids = set(os.listdir("/proc/self/task"))
    python = {str(t.native_id) for t in threading.enumerate()}
    for tid in [t for t in _stats if t not in tids or t in python]:
        os.close(_stats.pop(tid))
    for tid in tids - python - set(_stats):
        try:
            _stats[tid] = os.open(f"/proc/self/task/{tid}/stat", os.O_RDONLY)
        except OSError:  # a thread that ended
            pass
    _listed = count
    return _stats


def _pools_running(enough):
    """This process's runnable threads that Python did not start (up to ``enough`` of
    them): the thread pools of numba and of the other libraries it runs (PyTorch's
    and ONNX Runtime's OpenMP or spinning pools), which spin a moment after their
    work and then sleep, and which the next parallel region takes over or waits out.
    Counted as other load they would send a call to one thread after every call of
    theirs (numba's pool grows with ``set_num_threads``, after this process's first
    region).  Python's threads (``threading``'s) that run are load.  Their state
    files stay open (:func:`_pool_stats`): opening each one every call cost more."""
    n = 0
    me = str(threading.get_native_id())  # (the caller: counted already)
    with _stats_lock:
        try:
            fds = [fd for tid, fd in _pool_stats().items() if tid != me]
        except (OSError, ValueError, IndexError):  # (not Linux's /proc)
            return 0
        for fd in fds:
            try:
                s = os.pread(fd, 128, 0)
            except OSError:  # a thread that ended
                continue
            i = s.rfind(b")")  # the state follows the name, which may hold anything
            n += s[i + 2 : i + 3] == b"R"
            if n >= enough:
                break
    return n


def slice_parallel(size, nchunks):
    """Whether a slice1 copy of ``size`` elements in ``nchunks`` chunks is offered to
    numba's threads (:func:`run_parallel`, which takes as many as have a core):
    where it is large enough to gain from them."""
    return nchunks > 1 and size >= config.CPU_PARALLEL_MIN and threads_ok()


def nonzero_driver(fields):
    """Which serial nonzero driver takes a call of these fields (those of a
    :data:`~dmlnumba.params.NONZERO_CPU` block): the positions pass (one packed
    column from ``out[0]`` of a C-contiguous input), the single-block write (no
    count pass) or the blocks driver (count, scan, write).  A driver compiles on its
    first call: a call compiles only its own."""
    n = fields["n"]
    if n > config.CPU_NONZERO_BLOCK or fields["limit"] < n:
        return "blocks"
    if (
        fields["contiguous"]
        and fields["first"] == 0
        and fields["width"] == 1
        and fields["rs"] == 1
        and fields["out_base"] == 0
    ):
        return "positions"
    return "single"


def nonzero_on_threads(p):
    """Whether the nonzero of parameter block ``p`` is large enough for numba's
    threads (more than one block, at least ``CPU_PARALLEL_MIN`` elements)."""
    return p[NONZERO_CPU.nblocks] > 1 and p[NONZERO_CPU.n] >= config.CPU_PARALLEL_MIN
