"""nonzero on a CuPy-chunked dask array over two GPUs: a distributed scheduler and one worker
per GPU (``CUDA_VISIBLE_DEVICES`` per worker process), against the same graph on one worker.

    python scripts/dask_two_gpus.py [--log2-size 31] [--density 0.01]

The array is generated lazily on the workers (CuPy's generator, seeded per block).  The result
is checked against an independent graph of ``cupy.argwhere`` per block, shifted by the block's
position.  Prints times, which GPU ran how many blocks, and MATCH or MISMATCH (exit 1).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time


def gen(density, block_info=None):
    import cupy

    i = block_info[None]["chunk-location"][0]
    shape = block_info[None]["chunk-shape"]
    rs = cupy.random.RandomState(i)
    x = rs.random_sample(shape, dtype=cupy.float32)
    x[x >= density] = 0
    return x


def ref_block(x, block_info=None):
    import cupy

    r = cupy.argwhere(x).astype(cupy.uint32)
    r[:, 0] += block_info[0]["array-location"][0][0]
    return r


def where():
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--log2-size", type=int, default=31)
    p.add_argument("--density", type=float, default=0.01)
    a = p.parse_args(argv)
    import cupy
    import dask.array as da
    import numpy as np
    from distributed import Client, wait

    import dmlnumba

    tmp = tempfile.mkdtemp()
    sched = os.path.join(tmp, "scheduler.json")
    env = dict(os.environ)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_scheduler",
                "--scheduler-file",
                sched,
                "--no-dashboard",
                "--port",
                "0",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    while not os.path.exists(sched):
        time.sleep(0.2)
    for gpu in (0, 1):
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "distributed.cli.dask_worker",
                    "--scheduler-file",
                    sched,
                    "--nthreads",
                    "1",
                    "--nworkers",
                    "1",
                    "--no-dashboard",
                    "--name",
                    f"gpu{gpu}",
                ],
                env=dict(env, CUDA_VISIBLE_DEVICES=str(gpu)),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    try:
        client = Client(scheduler_file=sched)
        client.wait_for_workers(2, timeout=120)
        workers = client.run(where)
        print("workers:", workers, flush=True)
        cols = 1 << 20
        rows = (1 << a.log2_size) // cols
        per = 64  # 256 MiB blocks
        x = da.map_blocks(
            gen,
            a.density,
            chunks=((per,) * (rows // per), (cols,)),
            dtype=np.float32,
            meta=cupy.empty((0, 0), cupy.float32),
        )
        print(
            f"input: {x.shape} float32 ({x.nbytes / 2**30:.0f} GiB), {x.numblocks[0]} blocks, "
            f"CuPy chunks generated on the workers, density {a.density}",
            flush=True,
        )
        count, coords = dmlnumba.nonzero_coordinates(x)
        ref = x.map_blocks(
            ref_block,
            chunks=((np.nan,) * x.numblocks[0], (2,)),
            dtype=np.uint32,
            meta=cupy.empty((0, 0), cupy.uint32),
        )
        # Warm-up: every worker compiles (or loads) the kernels.
        client.gather(client.compute([count]))
        results = {}
        for label, on in (
            ("two workers (GPU 0 and 1)", None),
            ("one worker (GPU 0)", [w for w, v in workers.items() if v == "0"]),
        ):
            times = []
            for _ in range(3):
                # The coordinates stay on the workers that made them (persist); only the
                # count comes back.
                t = time.perf_counter()
                c, xy = client.persist([count, coords], workers=on)
                wait([c, xy])
                n = c.compute()
                times.append(time.perf_counter() - t)
                del c, xy
            results[label] = (min(times), int(n[0]))
            print(f"{label}: best of 3 {min(times):.2f} s (count {int(n[0])})", flush=True)
        a2, b1 = results["two workers (GPU 0 and 1)"][0], results["one worker (GPU 0)"][0]
        print(f"speed-up with two GPUs: {b1 / a2:.2f}x", flush=True)
        got, want = client.gather(client.compute([coords, ref]))
        ok = (
            got.shape == want.shape
            and bool((got == want).all())
            and all(r[1] == got.shape[0] for r in results.values())
        )
        print(
            f"check against per-block cupy.argwhere: {got.shape[0]} rows, "
            f"{'MATCH' if ok else 'MISMATCH'}",
            flush=True,
        )
        client.close()
        return 0 if ok else 1
    finally:
        for pr in procs:
            pr.terminate()
        for pr in procs:
            pr.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
