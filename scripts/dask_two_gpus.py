"""nonzero on a CuPy-chunked dask array over two GPUs against one: a distributed scheduler
with one worker per GPU (``CUDA_VISIBLE_DEVICES`` per worker process), then (unless
``--no-threaded``) the threaded scheduler with the chunks on both GPUs of this process.

    python scripts/dask_two_gpus.py [--log2-size 31] [--density 0.01] [--block-mib 256]
                                    [--graphs 1,0] [--threads 1] [--timeout 420] [--no-threaded]

The input (32 blocks of 256 MiB at 2**31) is generated on the workers and held there, in two
equal contiguous runs (two GPUs) or all on GPU 0's worker (one GPU).  For each graph
(``--graphs``: ``config.DASK_BLOCKWISE`` values) it prints the tasks per block before and
after dask's optimization, then the best of ``--repeats`` of: ``nonzero`` on the held input
(submit, every block's rows done, the count back: the figure the ratio compares) with where
the time went (compute per task kind; busy, transfer and idle time per worker, from the task
streams); generate+nonzero end to end; and the scheduler's floor (the same graph with blocks
that do no GPU work).  Every result is checked block by block against ``cupy.argwhere``
(shifted by the block's position) on the workers, and the count against its rows.  Ends with
each ratio (two GPUs / one GPU; target 0.55) and ``MATCH`` or ``MISMATCH`` (exit 1).  Every
wait has a timeout, ``--timeout`` bounds the run (exit 2), and the scheduler and workers are
killed on the way out.  ``DASK_TWO_GPUS_ON_CPU=1``: NumPy chunks on the CPU (a dry run of the
orchestration where there is no GPU).
"""

import argparse
import collections
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time

WAIT = 180  # seconds, for any one wait on the cluster
DENSITY = 0.01  # set from --density
#: DASK_TWO_GPUS_ON_CPU=1: a dry run of the whole script with NumPy chunks on the CPU (its
#: orchestration checked where there is no GPU); the workers inherit it.
ON_CPU = "DASK_TWO_GPUS_ON_CPU"


def _xp():
    if os.environ.get(ON_CPU) == "1":
        import numpy

        return numpy
    import cupy

    return cupy


def _on(a=None, dev=None):
    """CuPy's guard for array ``a``'s device (or device ``dev``); nothing on the CPU."""
    if os.environ.get(ON_CPU) == "1":
        return contextlib.nullcontext()
    import cupy

    return cupy.cuda.Device(a.device.id if a is not None else dev)


def gen(density, block_info=None):
    """A block of the input: uniform values, those at or above ``density`` zeroed (the
    generator issue 37's measurement used: its cost is part of generate+nonzero)."""
    info = block_info[None]
    return gen_block(density, info["chunk-location"][0], info["chunk-shape"])


def gen_block(density, i, shape):
    """Block ``i`` of the input (of ``shape``), as :func:`gen` makes it."""
    xp = _xp()
    rs = xp.random.RandomState(i)
    if xp.__name__ == "numpy":
        x = rs.random_sample(shape).astype(xp.float32)
    else:
        x = rs.random_sample(shape, dtype=xp.float32)
    x[x >= density] = 0
    return x


def gen_on(density, ndev, block_info=None):
    """:func:`gen` on GPU ``i % ndev`` (the threaded runs: chunks on both GPUs of one process)."""
    with _on(dev=block_info[None]["chunk-location"][0] % ndev):
        return gen(density, block_info)


def ref_block(x, block_info=None):
    xp = _xp()
    with _on(x):
        r = xp.argwhere(x).astype(xp.uint32)
        r[:, 0] += block_info[0]["array-location"][0][0]
        return r


def find_nothing(block, width, dtype=None):
    """A stand-in for ``dmlnumba.nonzero_coordinates`` that launches nothing: a count of 0
    and no rows (the scheduler's floor of nonzero's graph)."""
    xp = _xp()
    return xp.zeros(1, dtype), xp.empty((0, width), dtype)


def same(a, b):
    """``(rows of b, whether a == b)`` for one block's coordinates (on its worker)."""
    xp = _xp()
    with _on(b):
        if xp.__name__ != "numpy" and a.device.id != b.device.id:
            a = a.copy()  # CuPy copies an array of another device to the current one
        return int(b.shape[0]), bool(a.shape == b.shape and bool((a == b).all()))


def where():
    if os.environ.get(ON_CPU) == "1":
        return "CPU (dry run)"
    import cupy

    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    return f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')} ({name})"


def _timeout(signum, frame):
    raise TimeoutError("dask_two_gpus.py: --timeout reached")


def _prefix(key):
    name = key[0] if isinstance(key, tuple) else key
    parts = str(name).split("-")
    return "-".join(p for p in parts if not (len(p) >= 16 and p.isalnum()))


def where_time_went(stream, wall):
    """Compute seconds per task kind, transfers and idle time, per worker, from the
    workers' task stream of one run."""
    comp = collections.defaultdict(float)
    busy = collections.defaultdict(float)
    transfer = collections.defaultdict(float)
    tasks = collections.Counter()
    for t in stream:
        w = t.get("worker")
        for ss in t.get("startstops", ()):
            d = ss["stop"] - ss["start"]
            if ss["action"] == "compute":
                comp[_prefix(t["key"])] += d
                busy[w] += d
                tasks[_prefix(t["key"])] += 1
            elif ss["action"] == "transfer":
                transfer[w] += d
    kinds = ", ".join(f"{k} {tasks[k]} tasks {v * 1e3:.1f} ms" for k, v in sorted(comp.items()))
    per = ", ".join(
        f"{w.split(':')[-1]}: busy {busy[w] * 1e3:.1f} ms, transfers {transfer[w] * 1e3:.1f} ms, "
        f"idle {max(0.0, wall - busy[w]) * 1e3:.1f} ms"
        for w in sorted(busy)
    )
    return f"    compute: {kinds}\n    workers: {per}"


def start_cluster(tmp, threads):
    sched = os.path.join(tmp, "scheduler.json")
    env = dict(os.environ)
    logs = []

    def spawn(args, name, extra=None):
        log = open(os.path.join(tmp, f"{name}.log"), "w")
        logs.append(log.name)
        return subprocess.Popen(
            [sys.executable, "-m", *args],
            env=dict(env, **(extra or {})),
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    scheduler = f"distributed.cli.dask_scheduler --scheduler-file {sched} --no-dashboard --port 0"
    procs = [spawn(scheduler.split(), "scheduler")]
    deadline = time.monotonic() + 60
    while not os.path.exists(sched):
        if time.monotonic() > deadline or procs[0].poll() is not None:
            raise RuntimeError("the scheduler did not start (see its log)")
        time.sleep(0.2)
    # No host memory limit: distributed counts CuPy blocks as host memory and, above 60% of
    # the limit (the machine's memory, or its cgroup's), spills them to disk; with 8 GiB on
    # one worker that made the one-GPU runs take 5-11 s (dask-cuda's workers likewise set
    # no host limit on device memory).
    worker = f"distributed.cli.dask_worker --scheduler-file {sched} --nthreads {threads} "
    worker += "--nworkers 1 --no-dashboard --memory-limit 0 --name gpu"
    for gpu in (0, 1):
        args = (worker + str(gpu)).split()
        procs.append(spawn(args, f"worker-gpu{gpu}", {"CUDA_VISIBLE_DEVICES": str(gpu)}))
    return sched, procs, logs


def stop(procs):
    for pr in procs:
        if pr.poll() is None:
            pr.terminate()
    for pr in procs:
        try:
            pr.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pr.kill()
            pr.wait(timeout=15)


def forget(client, keys, timeout=WAIT):
    """Wait until the scheduler has forgotten ``keys`` (of collections whose references
    the caller dropped): a repeat with the same keys would find them in memory."""

    def held(dask_scheduler, keys=keys):
        return any(k in dask_scheduler.tasks for k in keys)

    deadline = time.monotonic() + timeout
    while client.run_on_scheduler(held):
        if time.monotonic() > deadline:
            raise TimeoutError("the scheduler kept the keys of a released computation")
        time.sleep(0.05)


def best_of(client, count, coords, workers, repeats, stream=False):
    """The best of ``repeats`` runs of ``(count, coords)`` persisted on ``workers`` (None:
    all) and the count brought back, each run's keys forgotten: ``(seconds, seconds until
    every block's rows were done, the count, the run's task stream if ``stream``)``."""
    from distributed import get_task_stream, wait

    best = None
    for _ in range(repeats):
        with get_task_stream(client) if stream else contextlib.nullcontext() as ts:
            t = time.perf_counter()
            pc, pxy = client.persist([count, coords], workers=workers)
            wait([pc, pxy], timeout=WAIT)
            t_rows = time.perf_counter() - t
            n = int(client.compute(pc).result(timeout=WAIT)[0])
            wall = time.perf_counter() - t
        del pc, pxy
        forget(client, _keys(count, coords))
        if best is None or wall < best[0]:
            best = (wall, t_rows, n, ts.data if stream else None)
    return best


def block_checks(x, xy, meta):
    """Delayed :func:`same` of each block of coordinates ``xy`` and ``cupy.argwhere`` of
    the matching block of ``x``."""
    import dask
    import numpy as np

    chunks = ((np.nan,) * x.numblocks[0], (2,))
    ref = x.map_blocks(ref_block, chunks=chunks, dtype=np.uint32, meta=meta)
    pairs = zip(xy.to_delayed().ravel(), ref.to_delayed().ravel())
    return [dask.delayed(same)(a, b) for a, b in pairs]


def verdict(got, n):
    """``(whether it matched, what to print)`` of :func:`same`'s results and the count."""
    rows = sum(r for r, _ in got)
    good = all(m for _, m in got) and rows == n
    return good, (
        f"check against per-block cupy.argwhere: {rows} rows, {sum(m for _, m in got)}/"
        f"{len(got)} blocks equal, count {n}: {'MATCH' if good else 'MISMATCH'}"
    )


def _keys(count, coords):
    return [count.__dask_keys__()[0]] + [k[0] for k in coords.__dask_keys__()]


def placed(client, x, workers):
    """``x``'s blocks generated on ``workers`` in contiguous runs, as many on each (the
    scheduler's own placement of a persist is not balanced: 21 and 11 of 32 blocks in a
    run on the CPU), held as a dask array over the futures (as ``persist`` gives it)."""
    import dask.array as da
    from dask.highlevelgraph import HighLevelGraph

    nb, name = x.numblocks[0], f"input-{len(workers)}-{x.name}"
    futures = {
        (name, i, 0): client.submit(
            gen_block,
            DENSITY,
            i,
            (x.chunks[0][i], x.shape[1]),
            key=(name, i, 0),
            workers=[workers[i * len(workers) // nb]],
            pure=False,
        )
        for i in range(nb)
    }
    graph = HighLevelGraph.from_collections(name, futures, dependencies=())
    return da.Array(graph, name, x.chunks, meta=x._meta)


def graph_of(x, blockwise):
    """``(count, coords, description)`` of nonzero on ``x`` with ``config.DASK_BLOCKWISE``."""
    from dask.base import collections_to_expr

    import dmlnumba
    from dmlnumba import config

    config.DASK_BLOCKWISE = blockwise
    t = time.perf_counter()
    count, coords = dmlnumba.nonzero_coordinates(x)
    build = time.perf_counter() - t
    graph = dict(count.__dask_graph__())
    graph.update(coords.__dask_graph__())
    ours = sum(1 for k in graph if _prefix(k).startswith("dmlnumba"))
    t = time.perf_counter()
    opt = len(collections_to_expr([count, coords], optimize_graph=True).optimize().__dask_graph__())
    t_opt = time.perf_counter() - t
    nb = x.numblocks[0]
    return (
        count,
        coords,
        f"built in {build * 1e3:.1f} ms, {ours} nonzero tasks ({ours / nb:.2f} a block); "
        f"optimized in {t_opt * 1e3:.1f} ms to {opt} tasks ({opt / nb:.2f} a block, "
        f"the input's included)",
    )


def one_graph(client, a, x, xp, on, label, blockwise, results):
    """Nonzero of the held input ``xp`` (on workers ``on``) with one graph, timed, its
    floor and generate+nonzero (of ``x``) timed, and checked: whether it matched."""
    import numpy as np
    from distributed import wait

    from dmlnumba import chunked

    graph = "blockwise" if blockwise else "materialized"
    cp, xyp, desc = graph_of(xp, blockwise)
    count, coords, desc_e2e = graph_of(x, blockwise)
    print(f"  {graph} graph: {desc}", flush=True)
    print(f"  {graph} graph, generate+nonzero: {desc_e2e}", flush=True)
    wall, t_rows, n, stream = best_of(client, cp, xyp, on, a.repeats, stream=True)
    e2e = best_of(client, count, coords, on, a.repeats)[0]
    results[("distributed", graph, label)] = wall
    results[("distributed e2e", graph, label)] = e2e
    print(
        f"  {graph} graph: nonzero best of {a.repeats} {wall:.3f} s (every block's "
        f"rows {t_rows:.3f} s, the count back {wall - t_rows:.3f} s), count {n}; "
        f"generate+nonzero best of {a.repeats} {e2e:.3f} s",
        flush=True,
    )
    print(where_time_went(stream, wall), flush=True)
    # The scheduler's floor: the same graph (same tasks, same dependencies) whose blocks
    # do no GPU work (nonzero's op replaced by one that finds nothing).
    fc, fxy = chunked.nonzero(xp, None, np.uint32, None, None, "floor", find_nothing)
    floor = best_of(client, fc, fxy, on, a.repeats)[0]
    results[("distributed floor", graph, label)] = floor
    print(
        f"  {graph} graph with no GPU work (the scheduler's floor): best of "
        f"{a.repeats} {floor:.3f} s, {floor / wall:.0%} of the nonzero's",
        flush=True,
    )
    # The independent check, block by block on the workers.
    pc, pxy = client.persist([cp, xyp], workers=on)
    wait([pc, pxy], timeout=WAIT)
    checks = block_checks(xp, pxy, x._meta.astype(np.uint32))
    got = [f.result(timeout=WAIT) for f in client.compute(checks)]
    good, text = verdict(got, int(client.compute(pc).result(timeout=WAIT)[0]))
    print(f"  {text}", flush=True)
    del pc, pxy, checks
    forget(client, _keys(cp, xyp))
    return good


def distributed_runs(a, x_of, results):
    from distributed import Client, wait

    tmp = tempfile.mkdtemp()
    sched, procs, logs = start_cluster(tmp, a.threads)
    try:
        client = Client(scheduler_file=sched, timeout=60)
        client.wait_for_workers(2, timeout=120)
        workers = client.run(where)
        print("workers:", workers, flush=True)
        gpu0 = [w for w, v in workers.items() if "CUDA_VISIBLE_DEVICES=0" in v]
        gpu0 = gpu0 or [w for w, v in workers.items() if v.startswith("CPU")][:1]
        x = x_of(gen)
        # Warm-up: every worker compiles (or loads) the kernels.
        count, _, _ = graph_of(x, 1)
        for w in workers:
            client.compute(count, workers=[w]).result(timeout=WAIT * 2)
        ok = True
        for label, on in (("two GPUs", None), ("one GPU", gpu0)):
            # The input generated and kept on the run's workers (the next run's input has
            # keys of its own).
            t = time.perf_counter()
            xp = placed(client, x, on or sorted(workers))
            wait(xp, timeout=WAIT)
            t_gen = time.perf_counter() - t
            held = collections.Counter(
                w.split(":")[-1] for ws in client.who_has(xp).values() for w in ws
            )
            print(
                f"distributed, {label}: input {x.nbytes / 2**30:.0f} GiB generated and persisted "
                f"in {t_gen:.3f} s (blocks a worker: {dict(held)})",
                flush=True,
            )
            for blockwise in a.graphs:
                ok = one_graph(client, a, x, xp, on, label, blockwise, results) and ok
            del xp
        client.close(timeout=30)
        return ok
    except BaseException:
        for log in logs:
            with open(log) as f:
                tail = f.read()[-3000:]
            print(f"--- {os.path.basename(log)} (last 3000 characters)\n{tail}", flush=True)
        raise
    finally:
        stop(procs)


def threaded_runs(a, x_of, results):
    """Chunks on both GPUs of this process (the device guards), threaded scheduler."""
    import dask

    import dmlnumba
    from dmlnumba import config

    config.DASK_BLOCKWISE = a.graphs[0]
    graph = "blockwise" if a.graphs[0] else "materialized"
    ok = True
    xp = _xp()
    for label, ndev in (("two GPUs", 2), ("one GPU", 1)):
        x = x_of(gen_on, ndev).persist(scheduler="threads", num_workers=2 * ndev)
        count, coords = dmlnumba.nonzero_coordinates(x)
        dask.compute(count, scheduler="threads")  # warm-up
        times = []
        for _ in range(a.repeats):
            t = time.perf_counter()
            pc, pxy = dask.persist(count, coords, scheduler="threads", num_workers=2 * ndev)
            n = int(pc.compute(scheduler="sync")[0])
            times.append(time.perf_counter() - t)
        results[("threaded", graph, label)] = min(times)
        checks = block_checks(x, pxy, xp.empty((0, 0), xp.uint32))
        good, text = verdict(dask.compute(checks, scheduler="threads")[0], n)
        ok = ok and good
        print(
            f"threaded, {label} ({2 * ndev} threads): nonzero best of {a.repeats} "
            f"{min(times):.3f} s, count {n}; {text}",
            flush=True,
        )
        del x, count, coords, pc, pxy, checks
        for d in range(ndev) if xp.__name__ == "cupy" else ():
            with xp.cuda.Device(d):
                xp.get_default_memory_pool().free_all_blocks()
    return ok


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--log2-size", type=int, default=31)
    p.add_argument("--density", type=float, default=0.01)
    p.add_argument("--block-mib", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="threads per worker")
    p.add_argument("--timeout", type=int, default=420, help="seconds for the whole run")
    p.add_argument("--no-threaded", dest="threaded", action="store_false")
    p.add_argument(
        "--graphs",
        default="1,0",
        help="config.DASK_BLOCKWISE values to run (1: blockwise, 0: materialized)",
    )
    a = p.parse_args(argv)
    a.graphs = [int(g) for g in a.graphs.split(",")]
    global DENSITY
    DENSITY = a.density
    signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(a.timeout)
    import dask
    import dask.array as da
    import distributed
    import numpy as np

    xp = _xp()
    cpu = xp is np

    cols = 1 << 20
    rows = (1 << a.log2_size) // cols
    per = max(1, (a.block_mib << 20) // (4 * cols))

    def x_of(f, *args):
        return da.map_blocks(
            f,
            a.density,
            *args,
            chunks=((per,) * (rows // per), (cols,)),
            dtype=np.float32,
            meta=xp.empty((0, 0), xp.float32),
        )

    print(
        f"input: ({rows}, {cols}) float32 ({rows * cols * 4 / 2**30:.0f} GiB), "
        f"{rows // per} blocks of {per * cols * 4 >> 20} MiB, density {a.density}; "
        f"dask {dask.__version__}, distributed {distributed.__version__}, "
        + ("NumPy chunks on the CPU (dry run)" if cpu else f"cupy {xp.__version__}, ")
        + ("" if cpu else f"{xp.cuda.runtime.getDeviceCount()} GPUs"),
        flush=True,
    )
    results: dict = {}
    try:
        ok = distributed_runs(a, x_of, results)
        if a.threaded:
            ok = threaded_runs(a, x_of, results) and ok
    except TimeoutError as e:
        print(e, flush=True)
        return 2
    finally:
        signal.alarm(0)
    for (kind, graph, label), t in sorted(results.items()):
        if label == "two GPUs" and (kind, graph, "one GPU") in results:
            one = results[(kind, graph, "one GPU")]
            print(
                f"{kind} ({graph} graph): one GPU {one:.3f} s, two GPUs {t:.3f} s, "
                f"ratio {t / one:.2f} (target <= 0.55), speed-up {one / t:.2f}x",
                flush=True,
            )
    print("MATCH" if ok else "MISMATCH", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
