import contextlib
import os
from pathlib import Path

# JAX takes 75% of a GPU's memory at its first use unless told not to; the other
# libraries' tests (2**31-element inputs among them) need it.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# Kernels on numba's threads whenever a call is large enough, however busy the machine
# (pytest-xdist keeps its cores busy): tests that name the kernel a call runs get it.
# The load check (on by default) has tests of its own, which set it.
os.environ.setdefault("DMLNUMBA_CPU_LOAD_CHECK", "0")

import pytest
from hypothesis import HealthCheck, settings

# Profiles: "ci" keeps the randomized run short on a 2-core machine without a GPU;
# "dev" is the default; "thorough" is for a long local or GPU run.
_common = dict(
    deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
settings.register_profile("ci", max_examples=60, derandomize=True, **_common)
settings.register_profile("dev", max_examples=150, **_common)
settings.register_profile("thorough", max_examples=1000, **_common)
# Under numba's CUDA simulator every GPU thread is a Python thread: few, small examples.
settings.register_profile("cudasim", max_examples=12, derandomize=True, **_common)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def _locked_shared_arrays():
    """The simulator's ``cuda.shared.array`` under a lock: it looks an allocation up by
    its caller's source line and stores a new one if none is there, unlocked, so two
    threads of one block could each make their own array and no longer share it (a
    garbage count, seen once under heavy load).  The same lookup, under a lock."""
    import sys
    import threading
    import traceback

    import numpy as np
    from numba.cuda.simulator import kernelapi

    lock = threading.Lock()
    array = kernelapi.FakeCUDAShared.array
    if getattr(array, "_locked", False):
        return

    def locked(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:  # dynamic shared memory; or an error
            return array(self, shape, dtype, alignment)
        if isinstance(dtype, kernelapi.types.Type):
            dtype = kernelapi.numpy_support.as_dtype(dtype)
        caller = tuple(traceback.extract_stack(sys._getframe(1), limit=1)[0][0:2])
        with lock:
            res = self._allocations.get(caller)
            if res is None:
                res = self._allocations[caller] = np.empty(shape, dtype)
        return res

    locked._locked = True
    kernelapi.FakeCUDAShared.array = locked


if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    # Simulated blocks are Python threads: keep them small for the whole run.
    from dmlnumba import config as _config

    _config.CUDA_THREADS = 64
    _config.CUDA_NONZERO_ITEMS = 8  # the strided count's eight-load step runs too
    _config.CUDA_SLICE_ITEMS = 2
    _locked_shared_arrays()
    # The simulator's block loop polls its threads, holding the GIL, while they run: at
    # Python's default switch interval (5 ms) every handoff between the block's threads
    # waits out such a slice, and the polling takes most of a kernel's time.  Shorter
    # slices hand the GIL on sooner.
    import sys as _sys

    _sys.setswitchinterval(1e-4)


@contextlib.contextmanager
def tiny_blocks():
    """Patch the block sizes small, so that tiny inputs cross many blocks and the
    parallel paths run, and send small slice1 windows through the kernel."""
    from dmlnumba import config

    names = (
        "CPU_NONZERO_BLOCK",
        "CPU_SLICE_CHUNK",
        "CPU_PARALLEL_MIN",
        "CPU_SLICE_NUMPY_MAX",
        "CPU_LOAD_CHECK",
        "CUDA_THREADS",
        "CUDA_NONZERO_ITEMS",
        "CUDA_SLICE_ITEMS",
    )
    saved = {n: getattr(config, n) for n in names}
    config.CPU_NONZERO_BLOCK = 7
    config.CPU_SLICE_CHUNK = 5
    config.CPU_PARALLEL_MIN = 0
    config.CPU_SLICE_NUMPY_MAX = 0  # small windows through the kernel, not NumPy
    config.CPU_LOAD_CHECK = 0  # parallel however busy the machine is
    config.CUDA_THREADS = 32
    config.CUDA_NONZERO_ITEMS = 10  # an eight-load step, then two single ones
    config.CUDA_SLICE_ITEMS = 2
    try:
        yield
    finally:
        for n, v in saved.items():
            setattr(config, n, v)


@pytest.fixture
def small_blocks():
    with tiny_blocks():
        yield


# DMLNUMBA_KERNEL_LOG=<file>: each test's CUDA kernel variants, for the simulator subset.
from kernel_variants import _log_kernel_variants  # noqa: E402, F401


# Under the CUDA simulator the `cuda` tests are the subset in tests/cudasim_subset.txt,
# which launches every kernel variant (tests/cudasim_subset.py proves it); all of them
# with DMLNUMBA_CUDASIM_FULL=1.  A listed test that is not collected is an error, so
# that a renamed test cannot silently leave its variants out.
def _cudasim_subset():
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        return None
    if os.environ.get("DMLNUMBA_CUDASIM_FULL", "0") not in ("", "0"):
        return None
    from cudasim_subset import SUBSET

    return set(SUBSET.read_text().split("\n")) - {""}


def pytest_report_header(config):
    subset = _cudasim_subset()
    if subset is not None:
        return f"CUDA simulator: {len(subset)} cuda tests (DMLNUMBA_CUDASIM_FULL=1: all)"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    subset = _cudasim_subset()
    if subset is None:
        return
    ids = {i.nodeid for i in items}
    # only a whole-suite collection can tell a renamed test from one not asked for
    if not config.args or any(Path(a).resolve() == Path(__file__).parent for a in config.args):
        missing = sorted(subset - ids)
        if missing:
            raise pytest.UsageError(
                "tests/cudasim_subset.txt lists tests not collected:\n  " + "\n  ".join(missing)
            )
    drop = [i for i in items if "cuda" in i.nodeid.lower() and i.nodeid not in subset]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [i for i in items if not ("cuda" in i.nodeid.lower() and i.nodeid not in subset)]


def count_full_calls(monkeypatch):
    """A list that grows by one at each call of the prepare step (the full path) of
    slice1, slice_grad and nonzero_coordinates, with an empty runner cache."""
    from dmlnumba import keys, prepare
    from dmlnumba.caches import Bounded

    monkeypatch.setattr(keys, "runners", Bounded())
    full: list = []
    for name in ("slice1", "slice_grad", "nonzero"):
        real = getattr(prepare, name)
        monkeypatch.setattr(
            prepare, name, lambda *a, real=real, **k: (full.append(1), real(*a, **k))[1]
        )
    return full
