"""CUDA nonzero on non-contiguous layouts and small 1-d inputs, beside torch.nonzero:
``python3 scripts/nonzero_layouts.py [OLD]`` on a GPU.

Default calls on PyTorch CUDA tensors (new outputs, as users call it); each round times
every contender once, in a shuffled order (:func:`harness.compare`), as ``N``
back-to-back calls between two CUDA events (torch.nonzero
synchronizes inside every call, as it does for its users); prints the median and spread
(min-max) over ``ROUNDS`` rounds in microseconds, the ratio torch / dmlnumba, and the
share of the copy roofline (the input's bytes plus the coordinates' bytes written, over
the bandwidth of a 1 GiB device-to-device copy).  ``OLD``: an older source
tree (a commit, or a directory; :func:`harness.old_tree`), timed beside this one."""

import sys

import harness
import torch

import dmlnumba

ROUNDS = 9
N = 10
EVENTS = harness.cuda_events("torch")


def copy_bandwidth():
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    t = harness.compare({"copy": lambda: y.copy_(x)}, 7, clock=EVENTS, calls=5)
    return 2 * x.numel() / t["copy"].median


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
    old = harness.old_tree(sys.argv[1]) if len(sys.argv) > 1 else None
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
            ts = harness.compare(fns, ROUNDS, clock=EVENTS, calls=N)
            med = {k: v.median for k, v in ts.items()}
            moved = x.numel() * x.element_size() + len(want) * x.dim() * 4
            roof = 100 * moved / bw / med["dmlnumba"]
            extra = f"  new/old {med['dmlnumba'] / med['old']:.2f}" if old is not None else ""
            print(
                f"{name:30s} {d:4.2f}  {harness.line(ts, unit='us')}  "
                f"torch/dml {med['torch'] / med['dmlnumba']:5.2f}x  roofline {roof:4.0f}%{extra}",
                flush=True,
            )
            x = want = None
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
