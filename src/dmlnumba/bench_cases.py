"""The cases of :mod:`dmlnumba.bench` and their contenders: CPU (NumPy), GPU (PyTorch
and CuPy) and dask, each group returning its rows (:func:`~dmlnumba.bench_timing.record`);
slice_grad's rows, on slice1's windows, are made by :mod:`dmlnumba.bench_grad`."""

import statistics
import time
from typing import Any

import numpy as np

import dmlnumba

from .bench_grad import contenders, slice_grad_row
from .bench_roofline import roofline_rows
from .bench_timing import Timings, interleaved, record


def _density(rng, shape, density, xp=np):
    x = rng.standard_normal(shape).astype(np.float32)
    x[rng.random(shape, dtype=np.float32) >= density] = 0
    return x


def cpu_cases(quick=False):
    rows: list[dict[str, Any]] = []
    rng = np.random.default_rng(0)
    reps = 3 if quick else 15
    # Copy bandwidth (bytes read + written) of a plain large copy.
    a = rng.standard_normal(1 << 25).astype(np.float32)
    b = np.empty_like(a)
    t = interleaved({"copy": lambda: np.copyto(b, a)}, reps)["copy"]
    bw = 2 * a.nbytes / t
    print(f"CPU copy bandwidth (np.copyto, 128 MiB): {bw / 1e9:.1f} GB/s", flush=True)

    shape: tuple[int, ...] = (16, 1024, 1024) if not quick else (4, 256, 256)
    for d in (0.01, 0.5, 0.99):
        x = _density(rng, shape, d)
        cnt = np.empty(1, np.uint32)
        crd = np.empty((x.size, 3), np.uint32)
        n = int(np.count_nonzero(x))
        med = interleaved(
            {
                "dmlnumba": lambda: dmlnumba.nonzero_coordinates(x),
                "dmlnumba preallocated": lambda: dmlnumba.nonzero_coordinates(
                    x, out_count=cnt, out_coordinates=crd
                ),
                "numpy.argwhere": lambda: np.argwhere(x),
            },
            reps,
        )
        record(
            rows,
            f"nonzero {'x'.join(map(str, shape))} f32 {d:.0%}",
            med,
            x.nbytes + n * 3 * 4,
            bw,
        )

    shape = (8, 64, 256, 256) if not quick else (2, 16, 256, 256)
    x = rng.standard_normal(shape).astype(np.float32)
    idx = np.s_[:, ::-1, 3:250:2, 1::3]
    w = dmlnumba.window(x.shape, idx)
    out = np.empty(w[3], np.float32)
    med = interleaved(
        {
            "dmlnumba": lambda: dmlnumba.slice1(x, *w),
            "dmlnumba preallocated": lambda: dmlnumba.slice1(x, *w, out=out),
            "numpy": lambda: np.ascontiguousarray(x[idx]),
        },
        reps,
    )
    dims = "x".join(map(str, shape))
    record(rows, f"slice1 x[:, ::-1, 3:250:2, 1::3] {dims} f32", med, 2 * out.nbytes, bw)
    slice_grad_row(rows, f"slice_grad x[:, ::-1, 3:250:2, 1::3] {dims} f32", shape, idx, reps, bw)

    small = rng.standard_normal((10, 10, 10)).astype(np.float32)
    small[small < 0] = 0
    ws = dmlnumba.window(small.shape, np.s_[:, ::-1, 1::2])
    med = interleaved(
        {
            "dmlnumba": lambda: dmlnumba.slice1(small, *ws),
            "numpy": lambda: np.ascontiguousarray(small[:, ::-1, 1::2]),
        },
        2000 if not quick else 50,
    )
    record(rows, "slice1 1000 elements (call latency)", med)
    case = "slice_grad 1000 elements (call latency)"
    slice_grad_row(rows, case, small.shape, np.s_[:, ::-1, 1::2], 2000 if not quick else 50)
    # Small nonzero calls: the (10, 10, 10) array above (50% non-zero), and 1-d inputs
    # at 1% and 50%.
    flat = rng.standard_normal(1000).astype(np.float32)
    sparse = np.where(rng.random(1000) < 0.01, flat, np.float32(0))
    dense = np.where(rng.random(1000) < 0.5, flat, np.float32(0))
    for label, a in [("(10, 10, 10) 50%", small), ("(1000,) 1%", sparse), ("(1000,) 50%", dense)]:
        med = interleaved(
            {
                "dmlnumba": lambda a=a: dmlnumba.nonzero_coordinates(a),
                "numpy.argwhere": lambda a=a: np.argwhere(a),
            },
            2000 if not quick else 50,
        )
        record(rows, f"nonzero 1000 elements {label} (call latency)", med)
    return {"copy_bandwidth_Bps": bw, "rows": rows}


def gpu_nonzero_case(n, density, shape=None):
    """A float32 CuPy input of ``n`` elements (1-d, or ``shape``), ``density`` of them
    non-zero, with the same memory as a PyTorch tensor, preallocated dmlnumba outputs,
    and its number of non-zeros: ``(x_cupy, x_torch, count, coordinates, nnz)``."""
    import cupy as cp
    import torch

    shape = shape or (n,)
    xc = cp.random.standard_normal(shape, dtype=cp.float32)
    xc[cp.random.random(shape, dtype=cp.float32) >= density] = 0
    xt = torch.as_tensor(xc, device="cuda")
    return (
        xc,
        xt,
        cp.empty(1, cp.uint32),
        cp.empty((n, len(shape)), cp.uint32),
        int(cp.count_nonzero(xc)),
    )


def gpu_cases(quick=False, only=None):
    """Rows: ``dmlnumba`` is the default call on a PyTorch tensor (outputs allocated
    by the call, PyTorch tensors back); ``dmlnumba cupy-in`` the same call on a CuPy
    array; ``dmlnumba preallocated`` the call into outputs made beforehand."""
    import cupy as cp
    import torch

    rows: list[dict[str, Any]] = []
    sync = torch.cuda.synchronize
    reps = 5 if quick else 20
    a = cp.random.standard_normal(1 << 28, dtype=cp.float32)
    b = cp.empty_like(a)
    t = interleaved({"copy": lambda: b.__setitem__(Ellipsis, a)}, reps, sync)["copy"]
    bw = 2 * a.nbytes / t
    a = b = None  # free the GiB before the cases
    print(
        f"GPU {torch.cuda.get_device_name()}: copy bandwidth (cupy, 1 GiB) {bw / 1e12:.2f} TB/s",
        flush=True,
    )
    shape: tuple[int, ...]
    if only in (None, "nonzero"):
        for k in (20, 24) if quick else (20, 24, 28):
            n = 1 << k
            for shape in ((n,), (n // 4096, 64, 64)):
                for d in (0.01, 0.5, 0.99):
                    _gpu_nonzero_row(rows, n, shape, d, reps, sync, bw)
    if only in (None, "slice"):
        for shape, idx, label in [
            ((8, 64, 1024, 1024), np.s_[:, ::-1, 3:1000:2, :], "x[:, ::-1, 3:1000:2, :]"),
            ((8, 64, 256, 256), np.s_[:, ::-1, 3:250:2, 1::3], "x[:, ::-1, 3:250:2, 1::3]"),
        ]:
            if quick:
                shape = (2, 16) + shape[2:]
            _gpu_slice_row(rows, shape, idx, label, reps, sync, bw)
            case = f"slice_grad {label} {'x'.join(map(str, shape))} f32, torch in"
            slice_grad_row(rows, case, shape, idx, reps, bw, cp, True, sync)
    if only in (None, "small"):
        _gpu_small_rows(rows)
    if only in (None, "roofline"):
        roofline_rows(rows, bw, quick)
    return {"device": torch.cuda.get_device_name(), "copy_bandwidth_Bps": bw, "rows": rows}


def _gpu_nonzero_row(rows, n, shape, d, reps, sync, bw):
    import cupy as cp
    import torch

    xc, xt, cnt, crd, nnz = gpu_nonzero_case(n, d, shape)
    med = interleaved(
        {
            "dmlnumba": lambda: dmlnumba.nonzero_coordinates(xt),
            "dmlnumba cupy-in": lambda: dmlnumba.nonzero_coordinates(xc),
            "dmlnumba preallocated": lambda: dmlnumba.nonzero_coordinates(
                xc, out_count=cnt, out_coordinates=crd
            ),
            "torch.nonzero": lambda: torch.nonzero(xt),
            "cupy.argwhere": lambda: cp.argwhere(xc),
        },
        reps,
        sync,
    )
    dims = "x".join(map(str, shape))
    record(
        rows,
        f"nonzero 2**{n.bit_length() - 1} ({dims}) f32 {d:.0%}, torch in",
        med,
        xc.nbytes + nnz * len(shape) * 4,
        bw,
    )
    count, coords = dmlnumba.nonzero_coordinates(xt)
    assert int(count.to(torch.int64)[0]) == nnz == int(cnt.get()[0])
    assert bool((coords[:nnz].to(torch.int64) == torch.nonzero(xt)).all())


def _gpu_slice_row(rows, shape, idx, label, reps, sync, bw):
    import cupy as cp
    import torch

    xc = cp.random.standard_normal(shape, dtype=cp.float32)
    xt = torch.as_tensor(xc, device="cuda")
    w = dmlnumba.window(shape, idx)
    out = cp.empty(w[3], cp.float32)
    t_idx = tuple(slice(s.start, s.stop, abs(s.step) if s.step else None) for s in idx)
    flip = [d for d, s in enumerate(idx) if s.step is not None and s.step < 0]
    # PyTorch cannot slice with negative steps: flip first (one copy), then slice,
    # then make it contiguous (a second copy).
    med = interleaved(
        {
            "dmlnumba": lambda: dmlnumba.slice1(xt, *w),
            "dmlnumba cupy-in": lambda: dmlnumba.slice1(xc, *w),
            "dmlnumba preallocated": lambda: dmlnumba.slice1(xc, *w, out=out),
            "cupy": lambda: cp.ascontiguousarray(xc[idx]),
            "torch": lambda: xt.flip(flip)[t_idx].contiguous(),
        },
        reps,
        sync,
    )
    ref = cp.ascontiguousarray(xc[idx])
    assert bool((ref == out).all())
    assert bool((torch.as_tensor(ref, device="cuda") == dmlnumba.slice1(xt, *w)).all())
    record(
        rows,
        f"slice1 {label} {'x'.join(map(str, shape))} f32, torch in",
        med,
        2 * out.nbytes,
        bw,
    )


def _gpu_small_rows(rows, calls=1000):
    """Back-to-back default calls on a 1000-element PyTorch tensor, one sync at the
    end: the time per call (host time, as the GPU keeps up)."""
    import cupy as cp
    import torch

    xt = torch.randn(10, 10, 10, device="cuda")
    xt[xt < 0] = 0
    xc = cp.asarray(xt)
    w = dmlnumba.window(xt.shape, np.s_[:, ::-1, 1::2])
    flip = lambda: xt.flip(1)[:, :, 1::2].contiguous()  # noqa: E731
    gc = cp.asarray(dmlnumba.slice1(xc, *w))  # slice_grad's gradient: the window's values
    gt = torch.as_tensor(gc, device="cuda")
    grad_fns = contenders(w, np.s_[:, ::-1, 1::2], gc, cp, cp.empty_like(xc), gt)
    for label, fns in [
        (
            "nonzero",
            {
                "dmlnumba": lambda: dmlnumba.nonzero_coordinates(xt),
                "dmlnumba cupy-in": lambda: dmlnumba.nonzero_coordinates(xc),
                "torch.nonzero": lambda: torch.nonzero(xt),
                "cupy.argwhere": lambda: cp.argwhere(xc),
            },
        ),
        (
            "slice1",
            {
                "dmlnumba": lambda: dmlnumba.slice1(xt, *w),
                "dmlnumba cupy-in": lambda: dmlnumba.slice1(xc, *w),
                "torch": flip,
                "cupy": lambda: cp.ascontiguousarray(xc[:, ::-1, 1::2]),
            },
        ),
        ("slice_grad", grad_fns),
    ]:
        samples: dict[str, list[float]] = {}
        for _ in range(3):
            for k, f in fns.items():
                torch.cuda.synchronize()
                t = time.perf_counter()
                for _ in range(calls):
                    f()
                torch.cuda.synchronize()
                samples.setdefault(k, []).append((time.perf_counter() - t) / calls)
        med = Timings({k: statistics.median(v) for k, v in samples.items()})
        med.spread = {k: (min(v), max(v)) for k, v in samples.items()}
        record(
            rows,
            f"{label} 1000 elements, {calls} calls back to back, torch in (per call)",
            med,
        )


def dask_cases(quick=False, chunks="numpy"):
    """Dask arrays on the threaded scheduler, computed results, against dask's own
    argwhere and slicing: a 64x1024x1024 float32 array in (4, 1024, 1024) chunks,
    persisted in memory (NumPy chunks on the CPU, CuPy chunks on the GPU, where the
    nonzero input is 2**30 elements in (16, 1024, 1024) chunks, at 1% and 10%)."""
    import dask
    import dask.array as da

    rows: list[dict[str, Any]] = []
    rng = np.random.default_rng(0)
    reps = 2 if quick else 5
    gpu = chunks == "cupy"
    if gpu:
        import cupy

        sync = cupy.cuda.runtime.deviceSynchronize
    else:
        sync = None
    shape = (8, 256, 256) if quick else ((1024, 1024, 1024) if gpu else (64, 1024, 1024))
    block = (1,) + shape[1:] if quick else ((16,) + shape[1:] if gpu else (4,) + shape[1:])
    where = "CuPy" if gpu else "NumPy"
    with dask.config.set(scheduler="threads"):
        # On the GPU 1% and 10%: at 50%, dask.array.argwhere's int64 result alone is 12 GiB.
        for d in (0.01, 0.1) if gpu else (0.01, 0.5):
            if gpu:
                a = cupy.random.standard_normal(shape, dtype=cupy.float32)
                a[cupy.random.random(shape, dtype=cupy.float32) >= d] = 0
            else:
                a = _density(rng, shape, d)
            x = da.from_array(a, chunks=block, asarray=False).persist()
            del a
            theirs = "dask.array.argwhere"
            ref = lambda: da.argwhere(x).compute()  # noqa: E731
            if gpu:
                try:
                    da.argwhere(x[:1]).compute()
                except TypeError as e:  # dask cannot take CuPy chunks here: what a user can do
                    print(
                        f"  dask.array.argwhere on CuPy chunks fails: {str(e)[:90]}; compared "
                        f"with da.argwhere(x.map_blocks(cupy.asnumpy)) instead",
                        flush=True,
                    )
                    theirs = "dask.array.argwhere (chunks to host)"
                    host = x.map_blocks(cupy.asnumpy, meta=np.empty((0,) * x.ndim, np.float32))
                    ref = lambda: da.argwhere(host).compute()  # noqa: E731
            med = interleaved(
                {
                    "dmlnumba": lambda: dmlnumba.argwhere(x).compute(),
                    "dmlnumba nonzero_coordinates (uint32)": lambda: dask.compute(
                        *dmlnumba.nonzero_coordinates(x)
                    ),
                    theirs: ref,
                },
                reps,
                sync,
            )
            record(
                rows,
                f"dask argwhere {'x'.join(map(str, shape))} f32 {where} chunks "
                f"{block[0]}x.. {d:.0%}",
                med,
            )
            del x
        if not gpu:
            a = rng.standard_normal(shape).astype(np.float32)
            x = da.from_array(a, chunks=block).persist()
            del a
            idx = np.s_[::-1, 3:1000:2, 1::3] if not quick else np.s_[::-1, 3:250:2, 1::3]
            w = dmlnumba.window(x.shape, idx)
            med = interleaved(
                {
                    "dmlnumba": lambda: dmlnumba.slice1(x, *w).compute(),
                    "dask slicing": lambda: x[idx].compute(),
                },
                reps,
            )
            record(
                rows,
                f"dask slice1 x[::-1, 3:1000:2, 1::3] {'x'.join(map(str, shape))} f32",
                med,
            )
    return rows
