"""CPU nonzero and slice1 from 1 to N threads, beside torch, NumPy and ONNX Runtime:
``python3 scripts/cpu_scaling.py [--threads 1,2,4,8,16] [--reps 7] [--only nonzero|slice]
[--quick]``.

nonzero: a 64x1024x1024 float32 input at 1, 50 and 99% non-zero; dmlnumba's default
call (new outputs, as users call it) and into preallocated outputs, torch.nonzero,
numpy.argwhere (one thread, timed once per density) and onnxruntime's NonZero (CPU
provider, ``intra_op_num_threads``).  slice1: ``x[:, ::-1, 3:1000:2, :]`` of an
8x64x1024x1024 float32 input (the benchmark's large window), dmlnumba default call,
NumPy's slice plus ``ascontiguousarray`` (one thread) and torch's slice plus
``contiguous()``.  Each thread count sets numba's and torch's thread counts and makes
a new ORT session; the contenders alternate (:func:`harness.compare`, one call each a round,
the order shuffled each round), ``--reps`` rounds, median (min-max) in ms.
Each dmlnumba result is checked against NumPy's once.
"""

import argparse
import os
import time

import harness
import numpy as np


def fmt(ts, k):
    return f"{k} {ts[k].fmt('ms')}"


def ort_nonzero(shape):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    node = helper.make_node("NonZero", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "nz",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [len(shape), "n"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    data = model.SerializeToString()
    onnx.checker.check_model(model)

    def session(threads):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])

    return session


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", default=f"1,2,4,8,{os.cpu_count()}")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--only", choices=["nonzero", "slice"])
    ap.add_argument("--quick", action="store_true", help="1/256 the sizes: a check that it runs")
    a = ap.parse_args()
    import numba
    import torch

    import dmlnumba

    threads = [int(t) for t in a.threads.split(",")]
    print(
        f"{os.cpu_count()} CPUs; numba {numba.__version__} ({numba.config.THREADING_LAYER}), "
        f"torch {torch.__version__}, numpy {np.__version__}",
        flush=True,
    )
    rng = np.random.default_rng(0)
    if a.only != "slice":
        shape = (4, 256, 256) if a.quick else (64, 1024, 1024)
        base = rng.random(shape, dtype=np.float32)
        session = ort_nonzero(shape)
        for d in (0.01, 0.5, 0.99):
            x = np.where(base < d, base + 1, 0).astype(np.float32)
            xt = torch.from_numpy(x)
            want = np.argwhere(x)
            count, coords = dmlnumba.nonzero_coordinates(x)
            assert int(count[0]) == len(want) and (coords[: len(want)] == want).all()
            t = time.perf_counter()
            np.argwhere(x)
            t_np = (time.perf_counter() - t) * 1e3
            oc, oco = np.empty_like(count), np.empty_like(coords)
            for n in threads:
                numba.set_num_threads(n)
                torch.set_num_threads(n)
                s = session(n)
                fns = {
                    "dmlnumba": lambda: dmlnumba.nonzero_coordinates(x),
                    "prealloc": lambda: dmlnumba.nonzero_coordinates(
                        x, out_count=oc, out_coordinates=oco
                    ),
                    "torch": lambda: torch.nonzero(xt),
                    "ort": lambda: s.run(None, {"x": x}),
                }
                ts = harness.compare(fns, a.reps, calls=1, warmup=1)
                med = {k: v.median * 1e3 for k, v in ts.items()}
                best = min(med["torch"], med["ort"], t_np)
                gbs = x.nbytes / (med["dmlnumba"] * 1e-3) / 1e9
                print(
                    f"nonzero {d:4.2f} threads {n:2d}: "
                    + "  ".join(fmt(ts, k) for k in fns)
                    + f"  argwhere {t_np:.1f}  fastest-peer/dml {best / med['dmlnumba']:.2f}x"
                    f"  {gbs:.1f} GB/s",
                    flush=True,
                )
            del x, xt, want, coords, oco
    if a.only != "nonzero":
        x = rng.random((2, 16, 1024, 256) if a.quick else (8, 64, 1024, 1024), dtype=np.float32)
        xt = torch.from_numpy(x)
        s = np.s_[:, ::-1, 3:1000:2, :]
        from dmlnumba import window

        args = window(x.shape, s)
        got = dmlnumba.slice1(x, *args)
        assert np.array_equal(got, x[s])
        del got
        t = time.perf_counter()
        np.ascontiguousarray(x[s])
        t_np = (time.perf_counter() - t) * 1e3
        for n in threads:
            numba.set_num_threads(n)
            torch.set_num_threads(n)
            fns = {
                "dmlnumba": lambda: dmlnumba.slice1(x, *args),
                "numpy": lambda: np.ascontiguousarray(x[s]),
                "torch": lambda: xt[:, :, 3:1000:2, :].flip(1).contiguous(),
            }
            ts = harness.compare(fns, a.reps, calls=1, warmup=1)
            med = {k: v.median * 1e3 for k, v in ts.items()}
            best = min(med["numpy"], med["torch"])
            print(
                f"slice1 large window threads {n:2d}: "
                + "  ".join(fmt(ts, k) for k in fns)
                + f"  fastest-peer/dml {best / med['dmlnumba']:.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
