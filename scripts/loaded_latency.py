"""Call latency on an idle and on a loaded machine: nonzero_coordinates and slice1 on a
4x256x256 float32 array, median and 90th percentile of many calls (each timed alone,
the two alternating in a shuffled order: :func:`harness.compare`), first idle, then
with one busy background process (``python -c "while True: pass"``).

    python scripts/loaded_latency.py [--calls 400] [--parallel-min N]

``--parallel-min`` sets ``config.CPU_PARALLEL_MIN`` (the smallest input that runs on
numba's threads) to compare thresholds.
"""

import argparse
import subprocess
import sys
import time

import harness
import numpy as np


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--calls", type=int, default=400)
    p.add_argument("--parallel-min", type=int)
    a = p.parse_args(argv)
    import dmlnumba
    from dmlnumba import config

    if a.parallel_min is not None:
        config.CPU_PARALLEL_MIN = a.parallel_min
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 256, 256)).astype(np.float32)
    x[rng.random(x.shape) < 0.5] = 0
    w = dmlnumba.window(x.shape, np.s_[:, ::-1, 3:250:2])
    cases = {
        "nonzero": lambda: dmlnumba.nonzero_coordinates(x),
        "slice1": lambda: dmlnumba.slice1(x, *w),
    }
    idle = harness.compare(cases, a.calls, calls=1, warmup=1)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1)
        loaded = harness.compare(cases, a.calls, calls=1, warmup=1)
    finally:
        busy.kill()
    print(f"CPU_PARALLEL_MIN = {config.CPU_PARALLEL_MIN}; 4x256x256 float32, {a.calls} calls")
    for k in cases:
        m0, p0 = idle[k].median * 1e3, idle[k].p90 * 1e3
        m1, p1 = loaded[k].median * 1e3, loaded[k].p90 * 1e3
        print(
            f"{k:8s} idle median {m0:.3f} ms, p90 {p0:.3f} ms | loaded median {m1:.3f} ms, "
            f"p90 {p1:.3f} ms = {p1 / m0:.1f}x the idle median"
        )


if __name__ == "__main__":
    main()
