"""Side-by-side timings.

    python -m dmlnumba.bench [--target cpu|gpu|dask|dask-gpu|all] [--json FILE] [--quick]

Every case runs its contenders interleaved (A, B, C, A, B, C, ...) after a
warm-up, and reports medians, ratios (other / dmlnumba: above 1 means dmlnumba is
faster) and, where bytes are counted, the percent of the measured copy bandwidth
("roofline": the bytes the operation must move, over the bandwidth of a large
plain copy measured in the same run, counting bytes read plus bytes written).
GPU timings are wall-clock around each call followed by a device
synchronization, so they include launch and Python overhead, as a user sees it.
"""

import argparse
import json
import platform
import sys
import time

import numpy as np

import dmlnumba

from .bench_cases import cpu_cases, dask_cases, gpu_cases


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m dmlnumba.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--target",
        choices=["cpu", "gpu", "dask", "dask-gpu", "all"],
        default="cpu",
        help="dask: dask arrays of NumPy chunks; dask-gpu: of CuPy chunks",
    )
    p.add_argument("--json", help="write the results to this file")
    p.add_argument("--quick", action="store_true", help="small sizes, few repetitions (smoke test)")
    p.add_argument(
        "--only",
        choices=["nonzero", "slice", "small", "roofline"],
        help="GPU: one group of cases only",
    )
    args = p.parse_args(argv)
    res = {
        "machine": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "dmlnumba": dmlnumba.__version__,
        "date": time.strftime("%Y-%m-%d"),
    }
    try:
        import numba

        res["numba"] = numba.__version__
    except ImportError:
        pass
    if args.target in ("cpu", "all"):
        import os

        print(f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
        res["cpu"] = cpu_cases(args.quick)
    if args.target in ("gpu", "all"):
        res["gpu"] = gpu_cases(args.quick, args.only)
    if args.target == "dask":
        res["dask"] = dask_cases(args.quick)
    if args.target == "dask-gpu":
        res["dask_gpu"] = dask_cases(args.quick, "cupy")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
