"""The GPU windows and inputs where dmlnumba may lose, beside the peer users compare
it with: slice1 against CuPy's slice plus ``ascontiguousarray`` (CuPy inputs),
nonzero_coordinates against ``torch.nonzero`` (PyTorch inputs), on tiny windows,
high-rank windows (5 to 8 dimensions) and 2-d double-stepped ones, and slice_grad
against CuPy's ``zeros`` plus an assignment into the window (float32 gradients).  Default calls
(new outputs, as users call it).  Each round times every contender once, in a shuffled
order (:func:`harness.compare`), as ``N`` back-to-back calls between two CUDA events
(kernel time where the GPU is the bottleneck, host time where the host is); each
line prints the median (min-max) in microseconds and the peer's time over
dmlnumba's (above 1: dmlnumba is faster).

    python3 scripts/gpu_no_loss.py [--rounds 15] [--only slice|nonzero|grad]
"""

import argparse

import cupy as cp
import harness
import numpy as np
import torch

import dmlnumba

SLICES = [
    ("tiny (10,10,10)[:, ::-1, 1::2]", (10, 10, 10), np.s_[:, ::-1, 1::2], np.float32),
    ("tiny 1-d (1000,)[::-1]", (1000,), np.s_[::-1], np.float32),
    ("8-d (2,3,4,5,6,7,8,9)[..., ::-1]", (2, 3, 4, 5, 6, 7, 8, 9), np.s_[..., ::-1], np.float32),
    ("8-d (4,)*8 [::-1, :, ::2]", (4,) * 8, np.s_[::-1, :, ::2], np.float32),
    ("7-d (8,)*7 [:, ::-1, :, 1:7]", (8,) * 7, np.s_[:, ::-1, :, 1:7], np.float16),
    ("6-d (16,)*6 [::2, :, ::-1]", (16,) * 6, np.s_[::2, :, ::-1], np.float32),
    ("5-d (32,)*5 [:, ::-1, :, ::-1]", (32,) * 5, np.s_[:, ::-1, :, ::-1], np.float32),
    ("2-d (4096,4096)[1::2, 5:4000:7]", (4096, 4096), np.s_[1::2, 5:4000:7], np.float32),
    ("2-d (4096,4096)[::-3, ::5]", (4096, 4096), np.s_[::-3, ::5], np.float32),
    ("f64 (2048,2048,16)[:, ::-2, 3:]", (2048, 2048, 16), np.s_[:, ::-2, 3:], np.float64),
]
NONZEROS = [
    ("tiny (1000,) 50%", (1000,), 0.5),
    ("tiny (10,10,10) 50%", (10, 10, 10), 0.5),
    ("7-d (16,)*6+(4,) 30%", (16,) * 6 + (4,), 0.3),
    ("8-d (8,)*8 30%", (8,) * 8, 0.3),
    ("5-d (32,)*5 30%", (32,) * 5, 0.3),
    ("6-d (16,)*6 1%", (16,) * 6, 0.01),
    ("3-d (256,256,256) 30%", (256, 256, 256), 0.3),
]

GRADS = [
    (
        "bench small 8x64x256x256 [:, ::-1, 3:250:2, 1::3]",
        (8, 64, 256, 256),
        np.s_[:, ::-1, 3:250:2, 1::3],
    ),
    (
        "bench large 8x64x1024x1024 [:, ::-1, 3:1000:2]",
        (8, 64, 1024, 1024),
        np.s_[:, ::-1, 3:1000:2],
    ),
    ("1-d 2**26 [5::3]", (1 << 26,), np.s_[5::3]),
    ("2-d (8192,8192)[::-2, 1:8000]", (8192, 8192), np.s_[::-2, 1:8000]),
    ("tiny (20,20,20)[2:12, 11:1:-1, ::2]", (20, 20, 20), np.s_[2:12, 11:1:-1, ::2]),
    ("rows of 3 (2048,2048,3)[..., 1:]", (2048, 2048, 3), np.s_[..., 1:]),
    ("rows of 8 (2**21,8)[:, ::2]", (1 << 21, 8), np.s_[:, ::2]),
    ("4-d (64,)*4 [:, ::3, 1:, 1::5]", (64,) * 4, np.s_[:, ::3, 1:, 1::5]),
]

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=15)
ap.add_argument("--only", choices=["slice", "nonzero", "grad"])
a = ap.parse_args()
events = harness.cuda_events("cupy")
print(torch.cuda.get_device_name(), f"{a.rounds} interleaved rounds, us a call")
if a.only in (None, "slice"):
    for name, shape, idx, dt in SLICES:
        x = (cp.random.default_rng(0).random(shape, dtype=cp.float32) * 100).astype(dt)
        w = dmlnumba.window(shape, idx)[:3]
        assert bool((dmlnumba.slice1(x, *w) == x[idx]).all())
        fns = {
            "dmlnumba": lambda: dmlnumba.slice1(x, *w),
            "cupy": lambda: cp.ascontiguousarray(x[idx]),
        }
        st = harness.compare(fns, a.rounds, clock=events, calls=20)
        r = st["cupy"].median / st["dmlnumba"].median
        print(
            f"slice1 {name:34s} dmlnumba {st['dmlnumba'].fmt('us')}  "
            f"cupy {st['cupy'].fmt('us')}  {r:.2f}x"
        )
if a.only in (None, "nonzero"):
    for name, shape, d in NONZEROS:
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.rand(shape, device="cuda", generator=g)
        x[x >= d] = 0
        count, coords = dmlnumba.nonzero_coordinates(x)
        want = torch.nonzero(x)
        assert int(count[0]) == len(want) and bool((coords[: len(want)].long() == want).all())
        fns = {
            "dmlnumba": lambda: dmlnumba.nonzero_coordinates(x),
            "torch.nonzero": lambda: torch.nonzero(x),
        }
        st = harness.compare(fns, a.rounds, clock=events, calls=20)
        r = st["torch.nonzero"].median / st["dmlnumba"].median
        print(
            f"nonzero {name:33s} dmlnumba {st['dmlnumba'].fmt('us')}  "
            f"torch.nonzero {st['torch.nonzero'].fmt('us')}  {r:.2f}x"
        )
if a.only in (None, "grad"):
    for name, shape, idx in GRADS:
        offsets, sizes, strides, out_sizes = dmlnumba.window(shape, idx)
        g = cp.random.default_rng(0).random(out_sizes, dtype=cp.float32) + 1

        def peer(shape=shape, idx=idx, g=g):
            o = cp.zeros(shape, cp.float32)
            o[idx] = g
            return o

        w = (offsets, sizes, strides)
        assert bool((dmlnumba.slice_grad(g, shape, *w) == peer()).all())
        fns = {"dmlnumba": lambda: dmlnumba.slice_grad(g, shape, *w), "cupy": peer}
        st = harness.compare(fns, a.rounds, clock=events, calls=20)
        r = st["cupy"].median / st["dmlnumba"].median
        print(
            f"slice_grad {name:48s} dmlnumba {st['dmlnumba'].fmt('us')}  "
            f"cupy zeros+assign {st['cupy'].fmt('us')}  {r:.2f}x"
        )
