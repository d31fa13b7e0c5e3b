import time, numpy as np, cupy as cp, torch, dmlnumba
xc = cp.asarray(np.maximum(np.random.randn(10,10,10).astype(np.float32), 0))
cnt = cp.empty(1, cp.uint32); crd = cp.empty((1000, 3), cp.uint32)
w = dmlnumba.window(xc.shape, np.s_[:, ::-1, 1::2]); out = cp.empty(w[3], cp.float32)
f = lambda: dmlnumba.nonzero_coordinates(xc, out_count=cnt, out_coordinates=crd)
g = lambda: dmlnumba.slice1(xc, *w, out=out)
for name, fn in (("nonzero", f), ("slice1", g)):
    fn(); cp.cuda.runtime.deviceSynchronize()
    t = time.perf_counter()
    for _ in range(1000): fn()
    h = time.perf_counter() - t
    cp.cuda.runtime.deviceSynchronize()
    tot = time.perf_counter() - t
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    e0.record(); fn(); e1.record(); e1.synchronize()
    print(name, f"host {h*1e3:.1f} us/call, with sync {tot*1e3:.1f} us/call, one call events {cp.cuda.get_elapsed_time(e0, e1)*1e3:.1f} us")
from dmlnumba import kernels_cuda as K
for key, d in K._kernels.items():
    try:
        print(key, "regs", d.get_regs_per_thread(), "local", d.get_local_mem_per_thread(), "shared", d.get_shared_mem_per_block(), "const", d.get_const_mem_size())
    except Exception as e:
        print(key, repr(e))
