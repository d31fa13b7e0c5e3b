"""slice1 on the GPU by window class, beside CuPy's slice plus ``ascontiguousarray``:
``python3 scripts/slice_classes.py [OLD]`` on a GPU.

Default calls on CuPy arrays (new outputs, as users call it).  Each round times every
contender once, in a shuffled order (:func:`harness.compare`), as ``N`` back-to-back
calls between two CUDA events (the GPU is the bottleneck, so that is about the kernel's
time and the allocation); prints, per
window, the median and spread (min-max) over ``ROUNDS`` rounds in microseconds, the
ratio CuPy / dmlnumba, and the share of the copy roofline (the window's bytes read
and written, over the bandwidth of a 1 GiB device-to-device copy).  ``OLD``: an
older source tree (a commit, or a directory; :func:`harness.old_tree`), timed beside.

The ``held-out`` windows were chosen before any tuning and are never tuned on."""

import sys

import cupy as cp
import harness
import numpy as np

import dmlnumba

ROUNDS = 9
N = 20
EVENTS = harness.cuda_events("cupy")

CLASSES = [
    ("short rows, 8-byte", (2048, 2048, 16), np.s_[:, ::-2, 3:], np.float64),
    (
        "reversed 2 dims, 128-byte rows",
        (32, 32, 32, 32, 32),
        np.s_[:, ::-1, :, ::-1, :],
        np.float32,
    ),
    ("step in the last dim", (4096, 4096), np.s_[:, ::3], np.float32),
    ("1-d reversed, 2-byte", (1 << 28,), np.s_[::-1], np.float16),
    ("1-d reversed, 1-byte", (1 << 28,), np.s_[::-1], np.uint8),
    ("bench large window", (8, 64, 1024, 1024), np.s_[:, ::-1, 3:1000:2, :], np.float32),
    ("bench small window", (8, 64, 256, 256), np.s_[:, ::-1, 3:250:2, 1::3], np.float32),
    ("crop, long rows", (8192, 8192), np.s_[100:8000, 7:8100], np.float32),
]
HELD_OUT = [
    ("held-out: 1-byte rows reversed", (1024, 1024, 64), np.s_[::2, :, ::-1], np.int8),
    ("held-out: 56-byte rows", (512, 512, 7 * 4), np.s_[:, ::-1, 3:10], np.float64),
    ("held-out: crop step 5", (8192, 8192), np.s_[100:8000:5, 7:8000], np.float32),
    ("held-out: 2-byte mixed", (64, 64, 64, 64), np.s_[:, ::2, ::-1, 1:63], np.int16),
    ("held-out: 1-d step -3", (1 << 27,), np.s_[::-3], np.uint8),
    ("held-out: full reversal", (4096, 4096), np.s_[::-1, ::-1], np.float16),
]
#: Chosen on 2026-11-26 before the gather kernel was timed on them (its rule was
#: chosen on the windows above).
HELD_OUT_2 = [
    ("held-out 2: 8-byte crop", (4096, 2048), np.s_[10:4000, 3:2040], np.float64),
    ("held-out 2: 36-byte reversed rows", (1024, 1024, 12), np.s_[::-1, :, 2:11], np.float32),
    ("held-out 2: 1-d step 7", (1 << 26,), np.s_[1::7], np.float32),
    ("held-out 2: 2-byte stepped rows", (256, 256, 256), np.s_[:, 3:250:3, ::2], np.int16),
    ("held-out 2: 1-byte odd rows", (16384, 4096), np.s_[::-3, 5:4001], np.uint8),
    ("held-out 2: word-copied crop", (8192, 8192), np.s_[100:8000, 8:8100], np.float32),
]


def copy_bandwidth():
    x = cp.empty(1 << 30, cp.uint8)
    y = cp.empty_like(x)
    t = harness.compare({"copy": lambda: y.__setitem__(Ellipsis, x)}, 7, clock=EVENTS, calls=5)
    return 2 * x.nbytes / t["copy"].median


def main():
    old = harness.old_tree(sys.argv[1]) if len(sys.argv) > 1 else None
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e9:.0f} GB/s; {cp.cuda.runtime.getDeviceProperties(0)['name']}")
    for name, shape, idx, dt in CLASSES + HELD_OUT + HELD_OUT_2:
        rng = cp.random.default_rng(0)
        x = (rng.random(shape, dtype=cp.float32) * 100).astype(dt)
        w = dmlnumba.window(shape, idx)[:3]
        fns = {
            "cupy": lambda: cp.ascontiguousarray(x[idx]),
            "dmlnumba": lambda: dmlnumba.slice1(x, *w),
        }
        if old is not None:
            fns["old"] = lambda: old.slice1(x, *w)
        want = cp.ascontiguousarray(x[idx])
        for k, f in fns.items():
            if k != "cupy":
                got = f()
                assert got.shape == want.shape and bool((got == want).all()), (name, k)
        ts = harness.compare(fns, ROUNDS, clock=EVENTS, calls=N)
        med = {k: v.median for k, v in ts.items()}
        roof = 100 * 2 * want.nbytes / bw / med["dmlnumba"]
        ratio = med["cupy"] / med["dmlnumba"]
        extra = f"  new/old {med['dmlnumba'] / med['old']:.2f}" if old is not None else ""
        print(
            f"{name:32s} {np.dtype(dt).name:8s} {harness.line(ts, unit='us')}  "
            f"cupy/dml {ratio:5.2f}x  roofline {roof:4.0f}%{extra}",
            flush=True,
        )
        x = want = None
        cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
