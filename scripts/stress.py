"""Stress: random calls against NumPy from many threads in several processes and a fork pool.

    python scripts/stress.py [--seconds 600] [--processes 2] [--threads 8] [--fork-workers 2]
                             [--threading-layer {default,omp,tbb,workqueue}]

Each of ``--processes`` spawned processes runs ``--threads`` threads; each thread makes
random calls (slice1, slice_grad, nonzero_coordinates, argwhere; every dtype, ml_dtypes'
bfloat16 too where installed; 1 to 6 dimensions, C / F / reversed / strided / permuted /
broadcast layouts, sizes that run on one thread and on all of them, window parameters as
tuples, lists, tuples of NumPy integers or NumPy arrays, new and caller-given outputs,
slice_grad's out holding its own gradient, read-only ones refused) and checks every
result bit for bit against NumPy.  The main process also makes calls (so that its
thread pool is running) and then feeds a fork-based pool the same kind of work.  It
prints one line per process and a total, and exits 1 if any call failed or any worker
died.

``--threading-layer`` (default: ``$NUMBA_THREADING_LAYER``, else numba's choice) sets
``NUMBA_THREADING_LAYER`` for every process; the run stops at once if numba cannot load
it.  tbb needs ``pip install tbb`` (and ``LD_LIBRARY_PATH=$VIRTUAL_ENV/lib`` where numba
does not find ``libtbb.so.12``).
"""

import argparse
import multiprocessing as mp
import os
import sys
import threading
import time
import traceback

import numpy as np

from dmlnumba.validation import DML_DTYPES

DTYPES = [d.name for d in DML_DTYPES]
try:  # bfloat16 NumPy arrays, read as float16
    import ml_dtypes

    DTYPES.append(ml_dtypes.bfloat16)
except ImportError:
    pass


def _array(rng):
    ndim = int(rng.integers(1, 7))
    big = rng.random() < 0.15
    side = 40 if big else 6
    shape = tuple(int(rng.integers(1, side + 1)) for _ in range(ndim))
    if big:  # large enough for the parallel kernels
        shape = (int(rng.integers(40, 80)),) + shape[1:2] + (int(rng.integers(600, 1200)),)
    dtype = DTYPES[int(rng.integers(len(DTYPES)))]
    n = int(np.prod(shape))
    a = rng.integers(-5, 6, size=n).astype(dtype).reshape(shape)
    a[rng.random(shape) < rng.random()] = 0
    layout = int(rng.integers(6))
    if layout == 1:
        a = np.asfortranarray(a)
    elif layout == 2:
        a = a[(slice(None, None, -1),) * a.ndim]
    elif layout == 3:
        a = np.repeat(a, 2, axis=-1)[..., ::2]
    elif layout == 4 and a.ndim > 1:
        a = np.ascontiguousarray(a.swapaxes(0, -1)).swapaxes(0, -1)
    elif layout == 5:
        a = np.broadcast_to(a[:1], a.shape)
    return a


def _bits(a):
    return np.asarray(a).view(f"u{a.dtype.itemsize}")


def _window(rng, x):
    """A random window of ``x`` (1, 2, 3, 5 or reversed steps) as NumPy's index."""
    idx = []
    for n in x.shape:
        step = int(rng.choice([1, 2, 3, -1, -2, 5]))
        a, b = sorted(int(v) for v in rng.integers(0, n + 1, size=2))
        if a == b:
            a, b = 0, n
        idx.append(slice(a, b, step) if step > 0 else slice(b - 1, (a - 1) if a else None, step))
    return tuple(idx)


def _form(rng, w):
    """The window's parameters as callers hold them: tuples of Python ints, or lists, as
    many write them, tuples of NumPy integers, 1-d NumPy integer arrays."""
    r = rng.random()
    if r < 0.3:
        return tuple(list(p) for p in w)
    if r < 0.4:
        return tuple(tuple(np.int64(i) for i in p) for p in w)
    if r < 0.5:
        return tuple(np.array(p, rng.choice([np.int64, np.int32])) for p in w)
    return w


def _slice1(rng, x):
    import dmlnumba

    idx = _window(rng, x)
    want = x[idx]
    if want.size == 0:
        return
    w = _form(rng, dmlnumba.window(x.shape, idx))
    if rng.random() < 0.03:  # a read-only out: refused, nothing written
        out = np.zeros(want.shape, x.dtype)
        out.flags.writeable = False
        try:
            dmlnumba.slice1(x, *w, out=out)
        except ValueError as e:
            assert "read-only" in str(e) and not out.any(), "slice1 read-only out"
            return
        raise AssertionError("slice1 wrote a read-only out")
    if rng.random() < 0.3:
        out = np.empty(want.shape, x.dtype)
        got = dmlnumba.slice1(x, *w, out=out)
        assert got is out
    else:
        got = dmlnumba.slice1(x, *w)
    assert got.shape == want.shape and (_bits(got) == _bits(want)).all(), "slice1"


def _slice_grad(rng, x):
    """slice_grad of a gradient shaped like a window of ``x`` back into ``x``'s shape:
    into a new array, a caller's out (garbage first), or an out that holds the
    gradient itself (the gradient a view of it: the call reads it before zeroing)."""
    import dmlnumba

    idx = _window(rng, x)
    shape = x[idx].shape
    if 0 in shape:
        return
    w = _form(rng, dmlnumba.window(x.shape, idx)[:3])
    r = rng.random()
    if r < 0.15:  # the gradient a view into the out it is written into
        out = rng.integers(-5, 6, size=x.shape).astype(x.dtype)
        # its leading corner, or the window itself (the scatter then leaves it as it is)
        g = out[tuple(slice(0, n) for n in shape)] if r < 0.08 else out[idx]
    else:
        g = x[idx]
        out = np.full(x.shape, 7, x.dtype) if r < 0.45 else None
    want = np.zeros(x.shape, x.dtype)
    want[idx] = g
    got = dmlnumba.slice_grad(g, x.shape, *w, out=out)
    assert out is None or got is out
    assert got.shape == x.shape and (_bits(got) == _bits(want)).all(), "slice_grad"


def one_call(rng):
    import dmlnumba

    x = _array(rng)
    op = int(rng.integers(4))
    if op == 0:
        _slice1(rng, x)
    elif op == 1:
        width = x.ndim
        dt = [np.uint32, np.uint64, np.int64][int(rng.integers(3))]
        count, coords = dmlnumba.nonzero_coordinates(x, width, dtype=dt)
        ref = np.argwhere(x)
        k = int(count[0])
        assert k == len(ref) and (coords[:k] == ref).all(), "nonzero"
    elif op == 2:
        got = dmlnumba.argwhere(x)
        assert (got == np.argwhere(x)).all() and got.dtype == np.int64, "argwhere"
    else:
        _slice_grad(rng, x)


def _loop(seed, deadline, counts, failures):
    rng = np.random.default_rng(seed)
    while time.monotonic() < deadline:
        try:
            one_call(rng)
            counts[0] += 1
        except Exception:
            failures.append(traceback.format_exc())


def process_main(tag, seconds, threads, queue):
    deadline = time.monotonic() + seconds
    counts = [[0] for _ in range(threads)]
    failures = []
    ts = [
        threading.Thread(
            target=_loop, args=(hash((tag, i)) & 0xFFFFFFFF, deadline, counts[i], failures)
        )
        for i in range(threads)
    ]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    queue.put((tag, sum(c[0] for c in counts), failures[:5], len(failures), _layer()))


def _layer():
    """numba's threading layer in this process ("none" where no parallel region ran)."""
    import numba

    try:
        return numba.threading_layer()
    except ValueError:
        return "none"


def _fork_task(seed):
    rng = np.random.default_rng(seed)
    n = 0
    for _ in range(20):
        one_call(rng)
        n += 1
    return os.getpid(), n


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--fork-workers", type=int, default=2)
    p.add_argument(
        "--threading-layer",
        choices=["default", "omp", "tbb", "workqueue"],
        default=os.environ.get("NUMBA_THREADING_LAYER", "default"),
    )
    a = p.parse_args(argv)
    os.environ["NUMBA_THREADING_LAYER"] = a.threading_layer  # before numba is imported
    import dmlnumba

    t0 = time.monotonic()
    # The main process first runs parallel kernels, so a fork inherits a running pool.
    rng = np.random.default_rng(1)
    x = rng.integers(0, 2, size=(64, 1024)).astype(np.float32)
    assert len(dmlnumba.argwhere(x)) == np.count_nonzero(x)
    big = rng.integers(0, 2, size=(1 << 21,)).astype(np.uint8)  # a parallel region
    assert len(dmlnumba.argwhere(big)) == np.count_nonzero(big)
    layer = _layer()
    if a.threading_layer != "default" and layer != a.threading_layer:
        print(f"numba runs the {layer} threading layer, not {a.threading_layer}")
        return 1
    print(f"threading layer: {layer}")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=process_main, args=(f"spawned-{i}", a.seconds, a.threads, queue))
        for i in range(a.processes)
    ]
    for pr in procs:
        pr.start()
    fork_calls = 0
    fork_failures = []
    fork_deadline = time.monotonic() + a.seconds
    seed = 10_000
    with mp.get_context("fork").Pool(a.fork_workers) as pool:
        while time.monotonic() < fork_deadline:
            try:
                res = pool.map_async(_fork_task, range(seed, seed + 4 * a.fork_workers)).get(
                    timeout=300
                )
                fork_calls += sum(n for _, n in res)
            except Exception:
                fork_failures.append(traceback.format_exc())
                break
            seed += 4 * a.fork_workers
    results = [queue.get(timeout=a.seconds + 600) for _ in procs]
    for pr in procs:
        pr.join(timeout=60)
    total, failed = fork_calls, len(fork_failures)
    print(
        f"fork pool ({a.fork_workers} workers): {fork_calls} calls, {len(fork_failures)} failures"
    )
    for tag, n, fails, nfail, used in sorted(results):
        print(f"{tag} ({a.threads} threads, {used}): {n} calls, {nfail} failures")
        total += n
        failed += nfail
        for f in fails:
            print(f)
    for f in fork_failures:
        print(f)
    dead = [pr.exitcode for pr in procs if pr.exitcode != 0]
    print(
        f"total: {total} calls checked against NumPy in {time.monotonic() - t0:.0f} s, "
        f"{failed} failures, {len(dead)} dead processes"
    )
    return 1 if failed or dead else 0


if __name__ == "__main__":
    sys.exit(main())
