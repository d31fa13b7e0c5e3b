"""Compiling the CPU kernels ahead of time (``python -m dmlnumba compile``): the
groups of kernels, each compiled in a process of its own, and the progress bar.
A module of its own, not the command's ``__main__``, so that the spawned processes
import :func:`compile_group` by this module's name."""

import concurrent.futures
import multiprocessing
import time

import numpy as np

import dmlnumba

#: One input per specialisation: (operator, dtype, coordinate dtype or None).
CASES = [("slice1", t, None) for t in ("uint8", "uint16", "float32", "float64")] + [
    ("nonzero", t, c)
    for t in ("uint8", "uint16", "float32", "float64")
    for c in ("uint32", "uint64")
]

#: CPU seconds a group of :data:`CASES` (by operator and coordinate dtype) takes to
#: compile cold in one process on a 2-core machine: the estimate printed before a
#: compile starts (docs/PERFORMANCE.md, "Startup and compile time").
GROUP_SECONDS = {("slice1", None): 7.1, ("nonzero", "uint32"): 9.6, ("nonzero", "uint64"): 9.6}


def group_seconds(case):
    return GROUP_SECONDS[case[0], case[2]]


def compile_group(op, t, c):
    """The calls that compile one group of CPU kernels (``python -m dmlnumba compile``
    runs each group in a process of its own): ``op`` on ``t`` inputs (and ``c``
    coordinates) of a few elements and of many, each in every way a call may run
    (:func:`_ways`), and each of nonzero's serial drivers (the positions pass, the
    single-block write, the blocks).  Returns the CPU seconds taken."""
    import logging

    from . import config

    logging.getLogger("dmlnumba").setLevel(logging.ERROR)  # the bar says what is compiling
    t0 = time.process_time()
    big = max(config.CPU_PARALLEL_MIN, 2 * config.CPU_NONZERO_BLOCK, 2 * config.CPU_SLICE_CHUNK)
    for n in (4, big):
        x = np.ones(n, t)
        for way in _ways():
            with way:
                _calls(op, x, c)
    if op == "slice1":
        _every_kind(np.dtype(t))
    return time.process_time() - t0


def _every_kind(t):
    """slice1 calls whose copies take every kind of rows of ``t`` items
    (:data:`~dmlnumba.cpu.slice_kinds.KINDS`): each kind's chunk copy, which a first
    call compiles alone.  Windows of more than ``CPU_SLICE_NUMPY_MAX`` elements, which
    the kernel copies."""
    from math import isqrt

    from . import config

    side = 8 * isqrt(config.CPU_SLICE_NUMPY_MAX) + 8  # side * side / 5 elements are more
    x = np.ones((side, side), t)
    windows = [(x, np.s_[:, s]) for s in (slice(None), slice(None, None, -1))]
    windows += [(x, np.s_[:, ::s]) for s in (2, 3, 4, 5)]  # gathers (1-byte items), steps
    windows += [(x.T, np.s_[:, :])]  # a transposed input: tiles
    for y, idx in windows:
        want = y[idx]
        dmlnumba.slice1(y, *dmlnumba.window(y.shape, idx), out=np.empty(want.shape, t))
    gaps = np.empty((want.shape[0], 2 * want.shape[1]), t)[:, ::2]  # general
    dmlnumba.slice1(y, *dmlnumba.window(y.shape, idx), out=gaps)


def _ways():
    """The ways a large call may run, each a context: on the calling thread where a
    process takes none of numba's threads (a dask task's, a forked child's: the serial
    drivers), on the calling thread where the load check finds no free core (numba's
    thread count set to 1: the block driver there), and on numba's threads (the load
    check off: the parallel drivers)."""
    import contextlib

    import numba

    from . import config
    from .cpu import threads

    @contextlib.contextmanager
    def threads_set(n, load_check):
        want, check = numba.get_num_threads(), config.CPU_LOAD_CHECK
        numba.set_num_threads(n)
        config.CPU_LOAD_CHECK = load_check
        try:
            yield
        finally:
            numba.set_num_threads(want)
            config.CPU_LOAD_CHECK = check

    every = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]
    return [threads.one_thread(), threads_set(1, 1), threads_set(every, 0)]


def _calls(op, x, c):
    """The calls of :func:`compile_group` on the input ``x``."""
    from .cpu.nonzero import ARGWHERE_BUFFER_MAX

    n, t = x.size, x.dtype
    if op == "slice1":
        # Into out=: the large input's reversed rows on each way's driver (the small
        # one's window is NumPy's copy); every kind of rows: _every_kind.
        dmlnumba.slice1(x, (0,), (n,), (-1,), out=np.empty(n, t))
        return
    dmlnumba.nonzero_coordinates(x, dtype=c)  # one column: positions; big: parallel
    dmlnumba.nonzero_coordinates(x.reshape(-1, 2), dtype=c)  # rows of two: one block
    dmlnumba.nonzero_coordinates(x, dtype=c, max_count=1)  # rows cut short: blocks
    for shape in ((-1, 2, 1), (-1, 1, 1, 1), (1, 1, 1, 1, -1)):  # the dense writes of
        dmlnumba.nonzero_coordinates(x.reshape(shape), dtype=c)  # 3, 4 and 5 columns
    # Strided inputs: the count pass of strided inputs, and the write passes of stepped
    # rows and of rows of consecutive elements.
    for y in (x[::-1], x.reshape(-1, 2)[::-1]):
        dmlnumba.nonzero_coordinates(y, dtype=c)
        dmlnumba.nonzero_coordinates(y, dtype=c, max_count=1)
    if c == "uint64":
        # argwhere past its worst-case buffer: the passes into int64 rows (serial below
        # CPU_PARALLEL_MIN elements, parallel from it).
        y = np.ones(max(n, ARGWHERE_BUFFER_MAX + 1), t)
        dmlnumba.argwhere(y)
        dmlnumba.argwhere(y[::-1])


def bar(done, total, label, stream):
    width = 30
    fill = width * done // total
    line = f"[{'#' * fill}{'.' * (width - fill)}] {done}/{total} {label}"
    if stream.isatty():
        stream.write("\r" + line.ljust(100)[:100])
    else:
        stream.write(line + "\n")
    stream.flush()


def estimate(workers):
    """Seconds a cold compile of every CPU group should take on ``workers`` processes
    (longest groups first, each to the worker free first)."""
    free = [0.0] * workers
    for case in sorted(CASES, key=group_seconds, reverse=True):
        i = free.index(min(free))
        free[i] += group_seconds(case)
    return max(free) + 2.0  # and each process's start (numba's import)


def compile_cpu(stream, workers):
    workers = max(1, min(workers, len(CASES)))
    stream.write(
        f"compiling {len(CASES)} CPU kernel groups in {workers} processes: about "
        f"{estimate(workers):.0f} s where numba's cache is empty (2-core VM figures; "
        f"seconds where it holds them)\n"
    )
    stream.flush()
    t0 = time.perf_counter()
    order = sorted(CASES, key=group_seconds, reverse=True)
    # "spawn": a forked child of a process whose numba thread pool has started may not
    # run parallel kernels (see dmlnumba.cpu.threads).
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        futures = {pool.submit(compile_group, *case): case for case in order}
        for i, f in enumerate(concurrent.futures.as_completed(futures)):
            cpu = f.result()
            op, t, c = futures[f]
            label = f"{op} {t}{' -> ' + c if c else ''} ({cpu:.1f} s of CPU)"
            bar(i + 1, len(order), label, stream)
    took = time.perf_counter() - t0
    if stream.isatty():
        stream.write("\n")
    stream.write(f"compiled in {took:.1f} s\n")
    stream.flush()
    return took
