"""slice1 on the CPU by window class, beside NumPy's slice and copy:
``python scripts/slice_classes_cpu.py [--quick] [--only SUBSTRING] [--old REF]``.

Four contenders a window, interleaved (:func:`harness.compare`: the order shuffled each
round, every contender timed once a round as a loop of back-to-back calls lasting about
4 ms): default calls (new outputs), ``x[s].copy()`` (``numpy.ascontiguousarray(x[s])``,
which is no copy where ``x[s]`` is contiguous already) against ``dmlnumba.slice1(x, *w)``,
and calls into a preallocated output, ``numpy.copyto(out, x[s])`` against
``dmlnumba.slice1(x, *w, out=out)``.  Prints the median and spread (min-max) over
``ROUNDS`` rounds, per call, and the ratio NumPy / dmlnumba (above 1: dmlnumba is
faster).  ``--old REF``: an older source tree (a commit, or a directory;
:func:`harness.old_tree`), whose default and preallocated calls are timed beside (as
``old`` and ``old-out``).  Every result is checked bit for bit against NumPy's."""

import argparse

import harness
import numpy as np

import dmlnumba

ROUNDS = 9

#: (class, shape, index, dtype, transpose of the input or None)
WINDOWS = [
    ("contiguous rows", (4096, 1024), np.s_[100:4000, 7:1000], np.float32, None),
    ("contiguous rows", (4096, 4096), np.s_[::2, 16:4000], np.uint8, None),
    ("reversed rows", (1024, 4096), np.s_[:, ::-1], np.int16, None),
    ("reversed rows", (1024, 2048), np.s_[::-1, ::-1], np.float64, None),
    ("reversed rows", (4096, 4096), np.s_[:, ::-1], np.uint8, None),
    ("step last ::2", (4096, 1024), np.s_[:, ::2], np.uint8, None),
    ("step last ::3", (2048, 1024), np.s_[:, ::3], np.float64, None),
    ("step last 1::5", (4096, 256), np.s_[:, 1::5], np.float32, None),
    ("step last ::-2", (2048, 2048), np.s_[:, ::-2], np.int16, None),
    ("step last ::-3", (2048, 2048), np.s_[1:, ::-3], np.float32, None),
    ("short rows of 6", (256, 1024, 16), np.s_[:, ::-1, ::3], np.float32, None),
    ("short rows of 6", (256, 1024, 16), np.s_[:, ::-1, ::3], np.int8, None),
    ("short rev rows of 16", (256, 1024, 16), np.s_[:, 1::2, ::-1], np.float32, None),
    ("short rev rows of 16", (256, 1024, 16), np.s_[:, 1::2, ::-1], np.int16, None),
    ("short rows of 1", (1 << 16, 4), np.s_[::-1, 2:3], np.float64, None),
    ("short rows of 2", (1 << 16, 8), np.s_[::2, 1:3], np.float32, None),
    ("short rows of 3", (512, 512, 4), np.s_[:, ::-1, :3], np.uint8, None),
    ("short rows of 4", (1 << 17, 8), np.s_[::-1, 4:], np.int16, None),
    ("short rows of 8", (1 << 16, 16), np.s_[::3, 3:11], np.float64, None),
    ("short rows of 12", (1024, 256, 16), np.s_[::-2, :, 2:14], np.uint8, None),
    ("reversed 2 dims", (4, 64, 256, 256), np.s_[:, 10:50, ::-1, ::-1], np.int16, None),
    ("reversed 3 dims", (256, 256, 256), np.s_[::-1, ::-1, ::-1], np.uint8, None),
    ("reversed 2 dims", (32, 32, 32, 32, 32), np.s_[:, ::-1, :, ::-1, :], np.float32, None),
    ("1-d reversed", (1 << 22,), np.s_[::-1], np.float32, None),
    ("1-d step 3", (1 << 23,), np.s_[::3], np.uint8, None),
    ("1-d crop", (1 << 21,), np.s_[10:-10], np.float64, None),
    ("1-d step -2", (1 << 22,), np.s_[::-2], np.int16, None),
    ("transposed", (1024, 1024), np.s_[::2, :], np.float32, (1, 0)),
    ("transposed", (64, 256, 256), np.s_[:, ::-1, 1:], np.int16, (2, 0, 1)),
    ("transposed short", (4, 512, 512), np.s_[::-1, 1:, :], np.float64, (1, 2, 0)),
    ("small 1000", (10, 10, 10), np.s_[:, ::-1, 1::2], np.float32, None),
    ("small 1000", (1000,), np.s_[::-1], np.float64, None),
    ("small 1000", (32, 32), np.s_[1:-1, ::2], np.int8, None),
    ("small 1000", (16, 16, 8), np.s_[::-1, ::2, :], np.int16, None),
    ("mid 64K", (64, 64, 64), np.s_[:, ::-1, ::2], np.float32, None),
    ("mid 256K", (64, 128, 128), np.s_[::-1, ::2, 1:], np.float32, None),
    ("large (bench)", (8, 64, 256, 256), np.s_[:, ::-1, 3:250:2, 1::3], np.float32, None),
    ("large rows", (2, 16, 1024, 1024), np.s_[:, ::-1, 3:1000:2, :], np.float32, None),
]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="3 rounds")
    ap.add_argument("--only", help="windows whose class contains this")
    ap.add_argument("--old", help="an older tree: a commit or a directory")
    a = ap.parse_args(argv)
    old = harness.old_tree(a.old) if a.old else None
    rounds = 3 if a.quick else ROUNDS
    rng = np.random.default_rng(0)
    for cls, shape, idx, dt, perm in WINDOWS:
        if a.only and a.only not in cls:
            continue
        if perm is None:
            x = rng.integers(0, 1 << 8, shape, dtype=np.uint8).astype(dt)
        else:  # a C-contiguous array seen through a transpose, of this shape
            inv = np.argsort(perm)
            base = rng.integers(0, 1 << 8, [shape[i] for i in inv], dtype=np.uint8)
            x = base.astype(dt).transpose(perm)
            assert x.shape == shape and not x.flags.c_contiguous
        w = dmlnumba.window(x.shape, idx)
        out = np.empty(w[3], dt)
        want = np.ascontiguousarray(x[idx])
        fns = {
            "numpy": lambda: x[idx].copy(),
            "dml": lambda: dmlnumba.slice1(x, *w),
            "numpy-out": lambda: np.copyto(out, x[idx]),
            "dml-out": lambda: dmlnumba.slice1(x, *w, out=out),
        }
        if old is not None:
            fns["old"] = lambda: old.slice1(x, *w)
            fns["old-out"] = lambda: old.slice1(x, *w, out=out)
        for k, f in fns.items():
            if k.startswith("numpy"):
                continue
            out[...] = 0
            got = f()
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (cls, k)
        ts = harness.compare(fns, rounds)
        med = {k: v.median for k, v in ts.items()}
        head = f"{cls:22s} {'x'.join(map(str, x.shape)):>15s} {np.dtype(dt).name:7s} "
        head += f"{str(idx).replace('slice', 's')[:44]:44s} {want.nbytes / 1e6:7.3f} MB"
        print(head, flush=True)
        for pair in (("numpy", "dml"), ("numpy-out", "dml-out")):
            ratio = med[pair[0]] / med[pair[1]]
            flag = "" if ratio >= 1 else "  LOSES"
            print(
                f"    {pair[1]:8s} {ts[pair[1]].fmt()}  {pair[0]:9s} {ts[pair[0]].fmt()}"
                f"  ratio {ratio:5.2f}x{flag}",
                flush=True,
            )
        if old is not None:
            print(
                f"    new/old default {med['dml'] / med['old']:.2f}  "
                f"out {med['dml-out'] / med['old-out']:.2f}",
                flush=True,
            )
        x = out = want = None


if __name__ == "__main__":
    main()
