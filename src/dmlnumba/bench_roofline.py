"""The GPU read roofline of nonzero_coordinates (``python -m dmlnumba.bench --target gpu
--only roofline``): a CUDA graph replay of the call into preallocated PyTorch outputs
(no allocation, no launch overhead: the kernels' time), beside ``torch.sum`` of the same
input (a reduction reads the input once, as fast as the GPU reads), on float32 inputs
of 2**26, 2**28 and 2**30 elements, 1-d and ``(n / 4096, 64, 64)``, at 1%, 50% and 99%.

Each row prints the replay's median (min-max) over CUDA events, the speed it reads
the input at as a share of ``torch.sum``'s (the figure for sparse inputs, where reading
the input is the whole job), and the bytes read plus written over the copy bandwidth
(the figure for dense ones)."""

import functools
from typing import Any

from .bench_timing import interleaved


def _event_time(fn, torch, before=None):
    """Seconds of one call of ``fn`` by CUDA events; ``before``: work queued ahead of
    the first event, untimed (:func:`flusher`)."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if before is not None:
        before()
    a.record()
    fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e-3


def flusher(torch):
    """An untimed read of 256 MiB to queue before each timed call: it leaves the L2
    cache clean, so that no call pays for writing back the lines the one before it
    wrote, and the GPU busy, so that the events time the GPU's work without the
    host's launch (``torch.sum`` launches slower than a graph replay)."""
    scratch = torch.ones(1 << 26, device="cuda")
    return lambda: torch.sum(scratch)


def roofline_rows(rows: list, bw: float, quick: bool = False) -> None:
    """Append and print the rows (``bw``: the copy bandwidth, bytes a second)."""
    import torch

    import dmlnumba

    reps = 5 if quick else 15
    clock = functools.partial(_event_time, torch=torch, before=flusher(torch))
    for k in (20, 22) if quick else (26, 28, 30):
        n = 1 << k
        for shape in ((n,), (n // 4096, 64, 64)):
            x = torch.empty(shape, device="cuda")
            for d in (0.01, 0.5, 0.99):
                x.uniform_()
                x[x >= d] = 0
                nnz = int(torch.count_nonzero(x))
                count = torch.empty(1, dtype=torch.uint32, device="cuda")
                coords = torch.empty((n, len(shape)), dtype=torch.uint32, device="cuda")
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    dmlnumba.nonzero_coordinates(x, out_count=count, out_coordinates=coords)
                total = lambda x=x: torch.sum(x)  # noqa: E731
                g.replay()  # (the warm-ups)
                total()
                torch.cuda.synchronize()
                assert int(count[0]) == nnz
                fns = {"dmlnumba graph replay": g.replay, "torch.sum": total}
                med = interleaved(fns, reps, warmup=0, clock=clock)  # (warmed up above)
                nz, sm = med["dmlnumba graph replay"], med["torch.sum"]
                lo, hi = med.spread["dmlnumba graph replay"]
                read = sm / nz  # the replay's read speed over torch.sum's
                moved = (x.nbytes + nnz * len(shape) * 4) / nz / bw
                dims = "x".join(map(str, shape))
                case = f"nonzero graph replay 2**{k} ({dims}) f32 {d:.0%}"
                r: dict[str, Any] = {
                    "case": case,
                    "times_s": {"dmlnumba graph replay": nz, "torch.sum": sm},
                    "spread_s": {"dmlnumba graph replay": (lo, hi)},
                    "read_vs_sum_pct": 100 * read,
                    "roofline_pct": 100 * moved,
                }
                rows.append(r)
                print(
                    f"  {case}: {nz * 1e3:.3f} ({lo * 1e3:.3f}-{hi * 1e3:.3f}) ms; "
                    f"reads at {100 * read:.0f}% of torch.sum's speed ({sm * 1e3:.3f} ms); "
                    f"read+written {100 * moved:.0f}% of copy bw",
                    flush=True,
                )
                del g, coords
            del x
            torch.cuda.empty_cache()
