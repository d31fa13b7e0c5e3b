"""Where the time of one synchronized call goes (the bench's measurement: sync, call,
sync): host time of the call, GPU time between events recorded around it, and the
whole, for default dmlnumba calls and the contenders at 2**20 and 2**24 float32.
``python3 scripts/sync_anatomy.py``"""

import statistics
import time

import torch

import dmlnumba
from dmlnumba.bench import gpu_nonzero_case

sync = torch.cuda.synchronize


def anatomy(f, reps=30):
    host, gpu, whole = [], [], []
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        f()
    sync()
    for _ in range(reps):
        sync()
        t = time.perf_counter()
        e0.record()
        f()
        h = time.perf_counter()
        e1.record()
        sync()
        w = time.perf_counter()
        host.append(h - t)
        whole.append(w - t)
        gpu.append(e0.elapsed_time(e1) * 1e-3)
    return [statistics.median(v) * 1e6 for v in (host, gpu, whole)]


print("case: host us / GPU us (events around the call) / whole us (sync, call, sync)")
print("{:44s} {:7.1f} {:7.1f} {:7.1f}".format("sync only", *anatomy(lambda: None)))
for k in (20, 24):
    n = 1 << k
    for shape in ((n,), (n // 4096, 64, 64)):
        for d in (0.01, 0.99):
            xc, xt, cnt, crd, nnz = gpu_nonzero_case(n, d, shape)
            fs = {
                "dmlnumba torch-in": lambda: dmlnumba.nonzero_coordinates(xt),
                "dmlnumba cupy-in": lambda: dmlnumba.nonzero_coordinates(xc),
                "dmlnumba preallocated": lambda: dmlnumba.nonzero_coordinates(
                    xc, out_count=cnt, out_coordinates=crd
                ),
                "torch.nonzero": lambda: torch.nonzero(xt),
                "torch.empty x2": lambda: (
                    torch.empty(1, dtype=torch.uint32, device="cuda"),
                    torch.empty(n, len(shape), dtype=torch.uint32, device="cuda"),
                ),
                "torch (x != 0).sum()": lambda: (xt != 0).sum(),
            }
            for name, f in fs.items():
                case = f"{shape} {d:.0%} {name}"
                print("{:44s} {:7.1f} {:7.1f} {:7.1f}".format(case, *anatomy(f)), flush=True)
