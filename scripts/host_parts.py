"""Where a small CUDA nonzero call's host time goes, on a GPU: the whole call, the key
lookup, the kept runner, and the pieces the runner is made of (two PyTorch allocations,
a pool allocation and free, a host-to-device copy, the context and stream queries, the
runner's kernel launch, and a launch of an empty kernel: the driver's floor), each
timed alone (``timeit``, best of 5 runs of 2000 calls, a sync after each run), beside
``torch.nonzero_static``; a (10, 10, 10) float32 input at 50%, a PyTorch tensor and the
same data as a NumPy array with ``device="cuda"``.

    python3 scripts/host_parts.py
"""

import timeit

import numpy as np
import torch
from cuda.bindings import driver
from numba import cuda

import dmlnumba
from dmlnumba import keys
from dmlnumba._internals import function_handle
from dmlnumba.gpu import memory
from dmlnumba.gpu.plans import _NO_STATUS

x = torch.rand(10, 10, 10, device="cuda")
x[x < 0.5] = 0
h = x.cpu().numpy()
dmlnumba.nonzero_coordinates(x)
dmlnumba.nonzero_coordinates(h, device="cuda")
torch.cuda.synchronize()
f = "nonzero_coordinates"
_, run = keys.nonzero(f, x, None, np.uint32, None, None, None)
_, run_host = keys.nonzero(f, h, None, np.uint32, None, "cuda", None)
# The runner's launch: its plan's launcher and the addresses of one call.
cells = dict(zip(run.__code__.co_freevars, (c.cell_contents for c in run.__closure__)))
plan, handle = cells["go"].__self__, cells["handle"]
launcher = plan.launcher(None, handle(), memory.current_context())
count, coords = run(x)
launch_args = (x.data_ptr() + plan.slo, plan.mask, *_NO_STATUS)  # (one tile: no status)
launch_args += (coords.data_ptr() + plan.olo, count.data_ptr() + plan.clo, 1)


@cuda.jit("void()")
def empty():
    pass


empty[1, 32]()
empty_f = function_handle(next(iter(empty.overloads.values())))
raw_stream = driver.CUstream(torch.cuda.current_stream().cuda_stream)


def alloc_free():  # a staged input's memory, as the runner takes and gives it back
    memory.unstage(memory.stage(4096, 0, 0), 0)


def upload():
    memory.unstage(memory.upload(h, 0, 0), 0)


raw = torch._C._cuda_getCurrentRawStream
new_empty = torch.empty(0, dtype=torch.uint32, device="cuda").new_empty
PARTS = [
    ("call, PyTorch", lambda: dmlnumba.nonzero_coordinates(x)),
    ("key, PyTorch", lambda: keys.nonzero(f, x, None, np.uint32, None, None, None)),
    ("runner, PyTorch", lambda: run(x)),
    ("call, NumPy to cuda", lambda: dmlnumba.nonzero_coordinates(h, device="cuda")),
    ("key, NumPy to cuda", lambda: keys.nonzero(f, h, None, np.uint32, None, "cuda", None)),
    ("runner, NumPy to cuda", lambda: run_host(h)),
    ("pool alloc+free", alloc_free),
    ("alloc+upload+free", upload),
    ("2 torch allocations", lambda: (new_empty(1), new_empty(1000, 3))),
    ("cuCtxGetCurrent", lambda: int(driver.cuCtxGetCurrent()[1])),
    ("raw stream query", lambda: raw(0)),
    ("data_ptr", lambda: x.data_ptr()),
    ("the runner's launch", lambda: launcher(*launch_args)),
    (
        "empty kernel launch",
        lambda: driver.cuLaunchKernel(empty_f, 1, 1, 1, 32, 1, 1, 0, raw_stream, 0, 0),
    ),
    ("torch.nonzero_static", lambda: torch.nonzero_static(x, size=1000)),
]
for name, fn in PARTS:
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    n = 2000
    t = min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6
    torch.cuda.synchronize()
    print(f"{name:22s} {t:6.2f} us")
