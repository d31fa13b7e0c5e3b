"""numba's thread pool around the kernels: a fork()ed pool after a parallel call, and
calls from several threads at once under the workqueue layer."""

import pytest
from interpreter import run_python

pytestmark = pytest.mark.boundscheck  # CI runs these again with NUMBA_BOUNDSCHECK=1


def test_fork_pool_after_a_parallel_call():
    # Was: workers died ("fork() called from a process already using GNU OpenMP") and
    # Pool.map hung.
    r = run_python(
        """
        import multiprocessing as mp, numpy as np, dmlnumba
        x = np.ones((1200, 1000), np.float32)
        def f(i):
            return (int(dmlnumba.nonzero_coordinates(x)[0][0]),
                    float(dmlnumba.slice1(x, (0, 0), (1200, 1000), (1, -1)).sum()))
        if __name__ == "__main__":
            from dmlnumba import config
            assert x.size >= config.CPU_PARALLEL_MIN   # the parent starts the thread pool
            print(len(dmlnumba.argwhere(x)))
            with mp.get_context("fork").Pool(2) as p:
                print(p.map(f, range(4)))
    """,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["1200000", str([(1200000, 1200000.0)] * 4)]
    assert "Terminating" not in r.stderr


def test_threads_making_parallel_calls_under_the_workqueue_layer():
    # Was: "Numba workqueue threading layer is terminating: Concurrent access has been
    # detected", and the process aborted.
    r = run_python(
        """
        import threading
        import numpy as np, numba, dmlnumba

        x = (np.arange(1 << 21) % 3).astype(np.float32).reshape(1 << 11, 1 << 10)
        want = np.argwhere(x)
        bad = []

        def work():
            for _ in range(6):
                if not np.array_equal(dmlnumba.argwhere(x), want):
                    bad.append("argwhere")
                if not np.array_equal(dmlnumba.slice1(x, (0, 0), x.shape, (-1, 1)), x[::-1]):
                    bad.append("slice1")

        ts = [threading.Thread(target=work) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print(numba.threading_layer(), bad)
    """,
        {"NUMBA_THREADING_LAYER": "workqueue"},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == "workqueue []\n"
