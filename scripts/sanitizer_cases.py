"""Small calls of both CUDA kernels for compute-sanitizer (memcheck, racecheck):
odd layouts, many tiles, every bit width, and slice_grad (its outputs zeroed, then
written by slice1's kernel); each result is checked against NumPy."""

import itertools
import sys

import numpy as np
from numba import cuda

import dmlnumba
from dmlnumba import config

from devices import device_view, to_device, to_host
from strategies import fill

config.CUDA_THREADS = 64
config.CUDA_NONZERO_ITEMS = 2
rng = np.random.default_rng(3)
n_ok = 0
for dtype in ["float64", "float32", "float16", "int8", "uint16", "bool"]:
    for density in (0.0, 0.03, 0.3, 1.0):  # 0.03: the staged kernel's sparse tiles
        base = fill(rng, dtype, 5 * 7 * 33, density).reshape(5, 7, 33)
        for x in (base, base[::-1, :, ::2], base.transpose(2, 0, 1)):
            c, k = dmlnumba.nonzero_coordinates(to_device(x, "cuda"), device="cuda")
            n = int(to_host(c)[0])
            want = np.argwhere(x)
            assert n == len(want) and (to_host(k)[:n] == want).all()
            if dtype != "bool":
                p = dmlnumba.window(x.shape, np.s_[1:, ::-1, 2::3])
                got = to_host(dmlnumba.slice1(to_device(x, "cuda"), *p, device="cuda"))
                assert (
                    got.view(np.uint8) == np.ascontiguousarray(x[1:, ::-1, 2::3]).view(np.uint8)
                ).all()
            n_ok += 1
cuda.synchronize()
print(f"{n_ok} cases ok")

# max_count: overflow, exact fit and zero rows (the write pass's row limit).
x = fill(rng, "float32", 5 * 7 * 33, 0.4).reshape(5, 7, 33)
want = np.argwhere(x)
for m in (0, len(want) // 3, len(want), len(want) + 5):
    c, k = dmlnumba.nonzero_coordinates(to_device(x, "cuda"), max_count=m)
    assert int(to_host(c)[0]) == len(want) and to_host(k).shape == (m, 3)
    assert (to_host(k)[: min(m, len(want))] == want[:m]).all()
    n_ok += 1
# Staged kernels of 2, 5, 6 and 8 columns (one a width; 6 and 8 write 32-bit rows through
# the ring), middling and dense tiles.
for shape in [(77, 30), (3, 4, 5, 6, 7), (3, 2, 3, 2, 3, 5), (2, 3, 2, 3, 2, 3, 2, 5)]:
    for density in (0.3, 1.0):
        x = fill(rng, "float32", int(np.prod(shape)), density).reshape(shape)
        want = np.argwhere(x)
        c, k = dmlnumba.nonzero_coordinates(to_device(x, "cuda"))
        assert int(to_host(c)[0]) == len(want) and (to_host(k)[: len(want)] == want).all()
        n_ok += 1
# Transposed inputs (the next-to-last dimension contiguous): the transposed kernel, its
# U rows a tile read together, also from a first element that is not 16-byte aligned.
for dtype in ["float64", "float32", "float16", "int8"]:
    for density in (0.03, 0.5, 1.0):
        a = fill(rng, dtype, 64 * 48, density).reshape(64, 48)
        da = to_device(a, "cuda")
        for view in (lambda v: v.T, lambda v: v[:, 1:33].T):
            want = np.argwhere(view(a))
            c, k = dmlnumba.nonzero_coordinates(device_view(da, view, a), device="cuda")
            assert int(to_host(c)[0]) == len(want) and (to_host(k)[: len(want)] == want).all()
            n_ok += 1
# Rows of one column (the width-1 kernel, 32 mask words at a time): 1-d inputs at
# every density, a max_count that cuts the rows, and rows two items apart.
for density in (0.0, 0.03, 0.5, 1.0):
    x = fill(rng, "float32", 5000, density)
    want = np.argwhere(x)
    c, k = dmlnumba.nonzero_coordinates(to_device(x, "cuda"))
    assert int(to_host(c)[0]) == len(want) and (to_host(k)[: len(want)] == want).all()
    m = len(want) // 2
    c, k = dmlnumba.nonzero_coordinates(to_device(x, "cuda"), max_count=m)
    assert int(to_host(c)[0]) == len(want) and (to_host(k) == want[:m]).all()
    n_ok += 2
# Outputs that overlap the input: computed into new arrays, then copied.
from devices import device_view  # noqa: E402

buf = np.ones(4096, np.uint32)
d = to_device(buf, "cuda")
xin = device_view(d, lambda b: b[:2048].reshape(1024, 2), buf)
oc = device_view(d, lambda b: b.reshape(2048, 2), buf)
c, k = dmlnumba.nonzero_coordinates(xin, out_coordinates=oc)
assert int(to_host(c)[0]) == 2048
assert (to_host(k) == np.argwhere(np.ones((1024, 2)))).all()
fbuf = np.arange(24, dtype=np.float32)
fd = to_device(fbuf, "cuda")
src = device_view(fd, lambda b: b[:12].reshape(3, 4), fbuf)
dst = device_view(fd, lambda b: b[6:18].reshape(3, 4), fbuf)
r = dmlnumba.slice1(src, (0, 0), (3, 4), (-1, -1), out=dst)
assert (to_host(r).reshape(3, 4) == fbuf[:12].reshape(3, 4)[::-1, ::-1]).all()
n_ok += 2
cuda.synchronize()
print(f"{n_ok} cases ok (with max_count and aliased outputs)")

# Default calls on PyTorch and CuPy inputs: outputs from the library's allocator, the
# cached runner of repeated calls (twice each), on the current and on a side stream.
import cupy  # noqa: E402
import torch  # noqa: E402

x = fill(rng, "float32", 4 * 9 * 65, 0.3).reshape(4, 9, 65)
want = np.argwhere(x)
p = dmlnumba.window(x.shape, np.s_[1:, ::-1, 2::3])
side = torch.cuda.Stream()
for dev in (torch.as_tensor(x, device="cuda"), cupy.asarray(x)):
    for _ in range(2):
        c, k = dmlnumba.nonzero_coordinates(dev)
        assert int(to_host(c)[0]) == len(want) and (to_host(k)[: len(want)] == want).all()
        assert (to_host(dmlnumba.argwhere(dev)).reshape(-1, 3) == want).all()
        got = to_host(dmlnumba.slice1(dev, *p)).view(np.uint32)  # bits: fill() draws NaNs
        assert (got == np.ascontiguousarray(x[1:, ::-1, 2::3]).view(np.uint32)).all()
        n_ok += 3
with torch.cuda.stream(side):
    t = torch.as_tensor(x, device="cuda")
    c, k = dmlnumba.nonzero_coordinates(t)
side.synchronize()
assert int(to_host(c)[0]) == len(want)
n_ok += 1
cuda.synchronize()
print(f"{n_ok} cases ok (with PyTorch and CuPy default calls)")

# A CUDA graph (several tiles: the look-back runs), captured once and replayed with the
# input rewritten; then repeated calls on numba inputs and on NumPy with device="cuda".
t = torch.zeros((64, 1000), device="cuda")
with torch.cuda.stream(side):
    dmlnumba.nonzero_coordinates(t)
side.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    gc, gk = dmlnumba.nonzero_coordinates(t)
    gs = dmlnumba.slice1(t, (0, 0), (64, 1000), (-1, 3))
for p_ in (0.0, 0.4, 1.0):
    h = fill(rng, "float32", t.numel(), p_).reshape(64, 1000)
    t.copy_(torch.as_tensor(h))
    g.replay()
    torch.cuda.synchronize()
    w = np.argwhere(h)
    assert int(gc[0]) == len(w) and (gk[: len(w)].cpu().numpy() == w).all()
    assert (gs.cpu().numpy().view(np.uint32) == h[::-1, ::3].view(np.uint32)).all()
    n_ok += 2
for dev in (cuda.to_device(x), x):
    for _ in range(2):
        c, k = dmlnumba.nonzero_coordinates(dev, device="cuda")
        assert int(to_host(c)[0]) == len(want) and (to_host(k)[: len(want)] == want).all()
        n_ok += 1
cuda.synchronize()
print(f"{n_ok} cases ok (with a CUDA graph, numba and NumPy inputs)")

# slice_grad: in one pass where the window's rows are not whole (rows of 33 and of 3, a
# row's lanes 16 and 1; 1-d windows of 3001, 4 pairs of chunks a lane; the crops and the
# 1-d [::-2] in every width, the sparser windows only where plans.one_pass takes them),
# else the output zeroed, then the gradient copied into the window's view of it.  Windows
# with negative strides on numba arrays of every bit width, into a new output (a memset) and into an
# out= that is a non-contiguous view (zeroed by the slice tiles storing zeros; the gaps
# between its elements must stay as they were); a window as large as the output (nothing
# zeroed); a gradient that overlaps its out= (copied first); float16 and bfloat16
# PyTorch tensors, into new and non-contiguous outputs; then the window's complement
# zeroed box by box (large windows' way, forced here), by the full path and by the
# runner a repeat takes, into new and poisoned given outputs.  Compared as bits: fill()
# draws NaNs and -0.0.
WINDOWS_3D = (
    np.s_[1:, ::-1, 2::3],
    np.s_[4:0:-2, 1:, ::-5],
    np.s_[::-1, :, ::-1],
    np.s_[:, ::-1, 1:],
)
CASES = [((5, 7, 33), WINDOWS_3D), ((6, 11, 3), WINDOWS_3D), ((3001,), (np.s_[5::3], np.s_[::-2]))]
for dtype, (shape, windows) in itertools.product(["float64", "float32", "float16", "int8"], CASES):
    u = np.dtype(f"u{np.dtype(dtype).itemsize}")
    x = fill(rng, dtype, int(np.prod(shape)), 0.5).reshape(shape)
    for idx in windows:
        w = dmlnumba.window(x.shape, idx)
        g = np.ascontiguousarray(x[idx])
        want = np.zeros(x.shape, u)
        want[idx] = g.view(u)
        r = dmlnumba.slice_grad(to_device(g, "cuda"), x.shape, *w[:3], device="cuda")
        assert (to_host(r).view(u) == want).all()
        buf = np.full((*shape[:-1], 2 * shape[-1]), 7, u)
        d = to_device(buf, "cuda")
        o = device_view(d, lambda b: b[..., ::2].view(dtype), buf)
        dmlnumba.slice_grad(to_device(g, "cuda"), x.shape, *w[:3], out=o)
        back = to_host(d)
        assert (back[..., ::2] == want).all() and (back[..., 1::2] == 7).all()
        n_ok += 2
buf = fill(rng, "float32", 4 * 8, 0.8).reshape(4, 8)
d = to_device(buf, "cuda")
grad = device_view(d, lambda b: b[:2, :4], buf)  # read whole before out= is zeroed
r = dmlnumba.slice_grad(grad, (4, 8), (0, 0), (4, 8), (2, -2), out=device_view(d, lambda b: b, buf))
want = np.zeros((4, 8), np.uint32)
want[::2, ::-2] = buf[:2, :4].view(np.uint32)
assert (to_host(d).view(np.uint32) == want).all()
n_ok += 1
for tdt in (torch.float16, torch.bfloat16):
    h = fill(rng, "float16", 4 * 9 * 65, 0.5).reshape(4, 9, 65).view(np.int16)
    t = torch.from_numpy(h).cuda().view(tdt)  # the same bits, read as tdt
    idx = np.s_[::-1, 1::2, 3:60:4]
    w = dmlnumba.window(h.shape, idx)
    gt = dmlnumba.slice1(t, *w)
    want = np.zeros(h.shape, np.int16)
    want[idx] = h[idx]
    r = dmlnumba.slice_grad(gt, h.shape, *w[:3])
    assert r.dtype == tdt and (r.view(torch.int16).cpu().numpy() == want).all()
    big = torch.full((4, 9, 130), 7, dtype=torch.int16, device="cuda")
    dmlnumba.slice_grad(gt, h.shape, *w[:3], out=big.view(tdt)[:, :, ::2])
    back = big.cpu().numpy()
    assert (back[:, :, ::2] == want).all() and (back[:, :, 1::2] == 7).all()
    n_ok += 2
gpu_target = sys.modules["dmlnumba.gpu.target"]
saved, gpu_target.ZERO_BOX_BYTES = gpu_target.ZERO_BOX_BYTES, 0
for dtype in ["float32", "float64", "int16", "uint8"]:
    h = fill(rng, dtype, 6 * 9 * 48, 0.5).reshape(6, 9, 48)
    for idx in (np.s_[5:0:-2, ::3, :], np.s_[1::2, ::-2, 3:40:3]):
        w = dmlnumba.window(h.shape, idx)
        u = np.dtype(f"u{h.itemsize}")
        want = np.zeros(h.shape, u)
        want[idx] = h[idx].view(u)
        gt = torch.from_numpy(np.ascontiguousarray(h[idx]).view(u).view(h.dtype)).cuda()
        out = torch.empty(h.shape, dtype=gt.dtype, device="cuda")
        for _ in range(3):  # the full path, then the runner it kept
            r = dmlnumba.slice_grad(gt, h.shape, *w[:3])
            out.fill_(7)
            dmlnumba.slice_grad(gt, h.shape, *w[:3], out=out)
            for res in (r, out):
                assert (res.cpu().numpy().view(u) == want).all()
            n_ok += 2
gpu_target.ZERO_BOX_BYTES = saved
cuda.synchronize()
print(f"{n_ok} cases ok (with slice_grad)")
