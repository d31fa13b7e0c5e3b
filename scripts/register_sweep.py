"""Kernel times of the CUDA nonzero at several register caps, in one process under Nsight
Compute (each cap's kernels compiled afresh, not from the disk cache, which does not key
on the cap)::

    ncu -k regex:nonzero_tiles --metrics gpu__time_duration.sum --csv --log-file /tmp/r.csv \\
        python3 scripts/register_sweep.py 40,56,64,0 > /tmp/cases.txt
    python3 scripts/register_sweep.py --report /tmp/r.csv /tmp/cases.txt

Preallocated float32 calls on CuPy arrays (so that each call looks its kernel up under the
current ``config.CUDA_NONZERO_MAX_REGISTERS``; 0: the compiler's choice), three each,
every count checked: 1-d inputs of 2**20, 2**24 and 2**28 elements; ``LAYOUTS=1``: 2**24
and 2**28 reversed, every second element, and (n/4096, 64, 64) plain and transposed with
uint64 coordinates instead."""

import os
import statistics
import sys


def report(log, cases_file):
    from ab_kernel_times import kernel_times  # scripts/, beside this one

    cases, ks = kernel_times(log, cases_file)
    per = len(ks) // len(cases)
    for i, c in enumerate(cases):
        print(f"{c:40s} {statistics.median(v for _, v in ks[i * per : (i + 1) * per]):8.1f} us")


def run(caps):
    import cupy as cp
    import numpy as np
    from numba import cuda

    import dmlnumba
    from dmlnumba import config
    from dmlnumba.gpu import launch

    def fresh(name, src_bits, out_bits, regs, variant):
        fn = launch.python_kernel(name, src_bits, variant)
        sig = launch.signature(name, src_bits, out_bits)
        opts = {"max_registers": regs} if regs else {}
        return cuda.jit(sig, cache=False, **opts)(fn).overloads[sig.args]

    launch._compile = fresh
    for k in (24, 28) if os.environ.get("LAYOUTS") else (20, 24, 28):
        n = 1 << k
        for d in (0.01, 0.5, 0.99):
            rng = cp.random.default_rng(1)
            buf = rng.standard_normal(2 * n, dtype=cp.float32)
            buf[rng.random(2 * n, dtype=cp.float32) >= d] = 0
            if os.environ.get("LAYOUTS"):
                cases = {
                    "1-d reversed": (buf[:n][::-1], np.uint32),
                    "1-d step 2": (buf[::2], np.uint32),
                    "3-d u64": (buf[:n].reshape(n // 4096, 64, 64), np.uint64),
                    "3-d transposed u64": (
                        buf[:n].reshape(64, 64, n // 4096).transpose(2, 1, 0),
                        np.uint64,
                    ),
                }
            else:
                cases = {"1-d": (buf[:n], np.uint32)}
            for name, (x, dt) in cases.items():
                nnz = int(cp.count_nonzero(x))
                cnt, crd = cp.empty(1, dt), cp.empty((n, x.ndim), dt)
                for r in caps:
                    config.CUDA_NONZERO_MAX_REGISTERS = r
                    for _ in range(3):
                        dmlnumba.nonzero_coordinates(
                            x, dtype=dt, out_count=cnt, out_coordinates=crd
                        )
                    assert int(cnt.get()[0]) == nnz
                    print(f"CASE 2**{k} {d:.0%} {name} regs={r}", flush=True)
                cnt = crd = None
            buf = None


if __name__ == "__main__":
    if sys.argv[1] == "--report":
        report(sys.argv[2], sys.argv[3])
    else:
        run([int(v) for v in sys.argv[1].split(",")])
