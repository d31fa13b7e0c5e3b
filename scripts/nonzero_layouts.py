"""CUDA nonzero on non-contiguous layouts and small 1-d inputs, beside torch.nonzero:
``python3 scripts/nonzero_layouts.py [OLD_DIR]`` on a GPU.

Default calls on PyTorch CUDA tensors (new outputs, as users call it); each round times
every contender once, as ``N`` back-to-back calls between two CUDA events (torch.nonzero
synchronizes inside every call, as it does for its users); prints the median and spread
(min-max) over ``ROUNDS`` rounds in microseconds, the ratio torch / dmlnumba, and the
share of the copy roofline (the input's bytes plus the coordinates' bytes written, over
the bandwidth of a 1 GiB device-to-device copy).  ``OLD_DIR``: a directory holding an
older source tree as ``dmlnumba_old``, timed beside this one."""

import statistics
import sys

import torch

import dmlnumba

ROUNDS = 9
N = 10


def per_call(f, n=N):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        f()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / n * 1e3


def copy_bandwidth():
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    ts = [per_call(lambda: y.copy_(x), 5) for _ in range(7)]
    return 2 * x.numel() / (statistics.median(ts) * 1e-6)


def layouts():
    """(name, make(density) -> tensor)."""
    g = torch.Generator(device="cuda").manual_seed(0)

    def dense(shape, d):
        x = torch.randn(shape, device="cuda", generator=g)
        x[torch.rand(shape, device="cuda", generator=g) >= d] = 0
        return x

    return [
        ("(16384, 16384).T f32", lambda d: dense((16384, 16384), d).T),
        ("(8192, 8192, 4)[:, :, 1] f32", lambda d: dense((8192, 8192, 4), d)[:, :, 1]),
        ("(64, 4096, 1024).mT f32", lambda d: dense((64, 4096, 1024), d).mT),
        ("(2**20,) f32", lambda d: dense((1 << 20,), d)),
    ]


def main():
    old = None
    if len(sys.argv) > 1:
        sys.path.insert(0, sys.argv[1])
        import dmlnumba_old as old
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e9:.0f} GB/s; {torch.cuda.get_device_name()}")
    for name, make in layouts():
        for d in (0.01, 0.1, 0.5):
            x = make(d)
            want = torch.nonzero(x)
            fns = {
                "torch": lambda: torch.nonzero(x),
                "dmlnumba": lambda: dmlnumba.nonzero_coordinates(x),
            }
            if old is not None:
                fns["old"] = lambda: old.nonzero_coordinates(x)
            for k, f in fns.items():
                if k != "torch":
                    count, coords = f()
                    n = int(count[0])
                    assert n == len(want) and bool((coords[:n].long() == want).all()), (name, k)
                f()
            ts = {k: [] for k in fns}
            for _ in range(ROUNDS):
                for k, f in fns.items():
                    ts[k].append(per_call(f))
            med = {k: statistics.median(v) for k, v in ts.items()}
            moved = x.numel() * x.element_size() + len(want) * x.dim() * 4
            roof = 100 * moved / bw / (med["dmlnumba"] * 1e-6)
            parts = [f"{k} {med[k]:8.1f} ({min(v):.1f}-{max(v):.1f})" for k, v in ts.items()]
            extra = f"  new/old {med['dmlnumba'] / med['old']:.2f}" if old is not None else ""
            print(
                f"{name:30s} {d:4.2f}  {'  '.join(parts)} us  "
                f"torch/dml {med['torch'] / med['dmlnumba']:5.2f}x  roofline {roof:4.0f}%{extra}",
                flush=True,
            )
            x = want = None
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
