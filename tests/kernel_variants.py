"""Which CUDA kernel variants each test launches, for choosing the simulator subset.

With ``DMLNUMBA_KERNEL_LOG=<file>`` set, every test appends one JSON line to the file:
its node id, the kernel keys it asked :func:`dmlnumba.gpu.launch.kernel` for (``used``)
and those it compiled first (``compiled``).  A key is ``(name, src_bits, out_bits,
regs, variant)``, as in ``launch._kernels``.  ``scripts``-free on purpose: the
comparison of two logs is :func:`keys` below, used by tests/select_cudasim.py."""

import json
import os

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
    try:
        yield
    finally:
        launch._kernels = _restore(rec)
        line = {
            "test": request.node.nodeid,
            "used": sorted(map(repr, rec.used)),
            "compiled": sorted(map(repr, rec.compiled)),
        }
        with open(LOG, "a") as f:
            f.write(json.dumps(line) + "\n")


def _restore(rec):
    from dmlnumba.caches import Bounded

    b = Bounded(rec.limit)
    b.update(rec)
    return b


def keys(path, field="compiled"):
    """The set of kernel keys a log's tests ``used`` or ``compiled``."""
    out = set()
    with open(path) as f:
        for line in f:
            out.update(json.loads(line)[field])
    return out
