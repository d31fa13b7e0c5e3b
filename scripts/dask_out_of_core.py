"""nonzero over a dask array larger than memory: 2**33 float32 elements (32 GiB), generated
lazily block by block at 0.1% density, on the threaded scheduler.

    python scripts/dask_out_of_core.py [--log2-size 33] [--density 0.001]

Prints the time, the count, the peak resident memory of the process, and the result of a
comparison against a chunk-by-chunk NumPy reference (each block generated again, its
numpy.argwhere shifted by the block's position, compared with the matching rows).
Exits 1 on any mismatch.
"""

import argparse
import resource
import sys
import time

import numpy as np


def block(i, rows, cols, density):
    """Block i of the array: rows [i*rows, (i+1)*rows), random, a ``density`` fraction non-zero."""
    rng = np.random.default_rng(i)
    x = rng.random((rows, cols), dtype=np.float32)
    x[x >= density] = 0
    return x


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--log2-size", type=int, default=33)
    p.add_argument("--density", type=float, default=0.001)
    a = p.parse_args(argv)
    import dask
    import dask.array as da

    import dmlnumba

    cols = 1 << 20
    rows_total = (1 << a.log2_size) // cols
    rows = 32  # 128 MiB blocks
    nblocks = rows_total // rows

    def make(block_info=None):
        i = block_info[None]["chunk-location"][0]
        return block(i, rows, cols, a.density)

    x = da.map_blocks(
        make,
        chunks=((rows,) * nblocks, (cols,)),
        dtype=np.float32,
        meta=np.empty((0, 0), np.float32),
    )
    print(
        f"input: {x.shape} float32, {x.nbytes / 2**30:.0f} GiB, {nblocks} blocks of "
        f"{rows * cols * 4 / 2**20:.0f} MiB, generated lazily; density {a.density}",
        flush=True,
    )
    t = time.perf_counter()
    count, coords = dmlnumba.nonzero_coordinates(x, dtype=np.uint64)
    with dask.config.set(scheduler="threads"):
        n, c = dask.compute(count, coords)
    took = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    n = int(n[0])
    print(
        f"nonzero_coordinates: {n} non-zeros, coordinates {c.shape} {c.dtype}, {took:.1f} s, "
        f"peak RSS {peak:.2f} GiB",
        flush=True,
    )
    # Chunk-by-chunk NumPy reference.
    t = time.perf_counter()
    pos = 0
    bad = 0
    for i in range(nblocks):
        ref = np.argwhere(block(i, rows, cols, a.density)).astype(np.uint64)
        ref[:, 0] += i * rows
        got = c[pos : pos + len(ref)]
        if got.shape != ref.shape or not (got == ref).all():
            bad += 1
        pos += len(ref)
    ok = bad == 0 and pos == n == len(c)
    print(
        f"reference (numpy.argwhere per block): {pos} rows, {bad} mismatching blocks, "
        f"{'MATCH' if ok else 'MISMATCH'} ({time.perf_counter() - t:.1f} s)",
        flush=True,
    )
    print(
        f"peak RSS of the whole run: "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
