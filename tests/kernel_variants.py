"""Which CUDA kernel variants each test launches, for choosing the simulator subset.

With ``DMLNUMBA_KERNEL_LOG=<file>`` set, every test appends one JSON line to the file:
its node id, its time, the kernel keys it asked :func:`dmlnumba.gpu.launch.kernel` for (``used``)
and those it compiled first (``compiled``).  A key is ``(name, src_bits, out_bits,
regs, variant)``, as in ``launch._kernels``.  tests/cudasim_subset.py reads the logs."""

import json
import os
import time

import pytest

LOG = os.environ.get("DMLNUMBA_KERNEL_LOG")


class _Recording(dict):
    """``launch._kernels`` with every lookup and insertion noted."""

    def __init__(self, inner):
        super().__init__(inner)
        self.limit = inner.limit
        self.used = set()
        self.compiled = set()

    def get(self, key, default=None):
        self.used.add(key)
        return super().get(key, default)

    def put(self, key, value):
        self.compiled.add(key)
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value


@pytest.fixture(autouse=True)
def _log_kernel_variants(request):
    if not LOG:
        yield
        return
    from dmlnumba.gpu import launch

    rec = _Recording(launch._kernels)
    launch._kernels = rec
    start = time.perf_counter()
    try:
        yield
    finally:
        launch._kernels = _restore(rec)
        line = {
            "test": request.node.nodeid,
            "used": sorted(map(repr, rec.used)),
            "compiled": sorted(map(repr, rec.compiled)),
            "seconds": round(time.perf_counter() - start, 3),
            # Hypothesis's examples, and a timed test's cases, vary from run to run
            "random": bool(getattr(request.function, "is_hypothesis_test", False))
            or request.node.get_closest_marker("varying_cases") is not None,
        }
        with open(LOG, "a") as f:
            f.write(json.dumps(line) + "\n")


def _restore(rec):
    from dmlnumba.caches import Bounded

    b = Bounded(rec.limit)
    b.update(rec)
    return b
