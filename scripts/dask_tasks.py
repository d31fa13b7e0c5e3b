"""The dask graph of nonzero on the CPU: tasks per block, and where the time goes, on the
threaded scheduler and on a distributed LocalCluster (processes, one thread each).

    python scripts/dask_tasks.py [--log2-size 26] [--blocks 256] [--workers 2] [--max-count N]

The input is a NumPy-chunked dask array (row-major stripes, density 1%), generated on the
workers (seeded per block), then persisted, so that the timed graphs are nonzero's alone;
``generate+nonzero`` times both together.  Prints the task counts (before and after dask's
optimization), the graph-build time, the best of 5 of each compute and the CPU time a run
took (the threaded scheduler's process; the distributed scheduler and workers), and checks
the count against NumPy's.
"""

import argparse
import time


def gen(density, block_info=None):
    import numpy as np

    loc = block_info[None]["chunk-location"][0]
    shape = block_info[None]["chunk-shape"]
    x = np.random.default_rng(loc).random(shape, dtype=np.float32)
    x[x >= density] = 0
    return x


def forget(client, keys, timeout=30):
    """Wait until the scheduler has forgotten ``keys`` (of collections whose last reference
    the caller dropped): a repeat with the same keys would otherwise find them in memory."""

    def held(dask_scheduler, keys=keys):
        return any(k in dask_scheduler.tasks for k in keys)

    deadline = time.monotonic() + timeout
    while client.run_on_scheduler(held):
        if time.monotonic() > deadline:
            raise TimeoutError("the scheduler kept the keys of a released computation")
        time.sleep(0.01)


def best(f, n=5):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        r = f()
        times.append(time.perf_counter() - t)
    return min(times), r


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--log2-size", type=int, default=26)
    p.add_argument("--blocks", type=int, default=256)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--max-count", type=int, default=None)
    p.add_argument("--density", type=float, default=0.01)
    a = p.parse_args(argv)
    import dask
    import dask.array as da
    import numpy as np

    import dmlnumba

    n = 1 << a.log2_size
    cols = 1 << 10
    rows = n // cols
    per = rows // a.blocks
    x = da.map_blocks(
        gen, a.density, chunks=((per,) * a.blocks, (cols,)), dtype=np.float32, meta=np.empty((0, 0))
    )
    t_build, (count, coords) = best(
        lambda: dmlnumba.nonzero_coordinates(x, max_count=a.max_count), 3
    )
    g = dict(count.__dask_graph__())
    g.update(coords.__dask_graph__())
    ours = [k for k in g if (k[0] if isinstance(k, tuple) else k).startswith("dmlnumba-")]
    from dask.base import collections_to_expr

    go = collections_to_expr([count, coords], optimize_graph=True).optimize().__dask_graph__()
    print(
        f"input {x.shape} float32, {a.blocks} blocks of {per * cols * 4 >> 10} KiB; "
        f"max_count={a.max_count}"
    )
    print(
        f"graph build {t_build * 1e3:.2f} ms; tasks: {len(g)} ({len(ours)} nonzero's, "
        f"{len(ours) / a.blocks:.2f} a block); after dask.optimize {len(go)} "
        f"({len(go) / a.blocks:.2f} a block, input included)"
    )
    want = int(np.count_nonzero(x.compute(scheduler="threads")))

    with dask.config.set(scheduler="threads"):
        xp = x.persist()
        cp, xyp = dmlnumba.nonzero_coordinates(xp, max_count=a.max_count)
        for label, c, xy in (("nonzero", cp, xyp), ("generate+nonzero", count, coords)):
            c0 = time.process_time()
            t, r = best(lambda c=c, xy=xy: dask.compute(c, xy))
            c1 = time.process_time()
            print(
                f"threaded: {label} {t * 1e3:.1f} ms (count {int(r[0][0])}); a run's CPU "
                f"{(c1 - c0) / 5 * 1e3:.1f} ms",
                flush=True,
            )
            assert int(r[0][0]) == want
        del xp

    from distributed import Client, LocalCluster, wait

    with (
        LocalCluster(
            n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        xp = client.persist(x)
        wait(xp)
        cp, xyp = dmlnumba.nonzero_coordinates(xp, max_count=a.max_count)
        client.gather(client.compute(cp))  # warm-up

        def run(c, xy):
            pc, pxy = client.persist([c, xy])
            wait([pc, pxy])
            return client.compute(pc).result()

        def released(c, xy):
            keys = [c.__dask_keys__()[0]] + [k[0] for k in xy.__dask_keys__()]
            n = run(c, xy)
            forget(client, keys)
            return n

        def cpu():
            """CPU seconds of the scheduler and of the workers (less sensitive than wall
            time to a loaded machine)."""
            s = client.run_on_scheduler(time.process_time)
            return s, sum(client.run(time.process_time).values())

        for label, c, xy in (("nonzero", cp, xyp), ("generate+nonzero", count, coords)):
            s0, w0 = cpu()
            t, r = best(lambda c=c, xy=xy: released(c, xy))
            s1, w1 = cpu()
            print(
                f"distributed ({a.workers} workers x 1 thread): {label} {t * 1e3:.1f} ms "
                f"(count {int(r[0])}); a run's CPU: scheduler {(s1 - s0) / 5 * 1e3:.1f} ms, "
                f"workers {(w1 - w0) / 5 * 1e3:.1f} ms",
                flush=True,
            )
            assert int(r[0]) == want


if __name__ == "__main__":
    main()
