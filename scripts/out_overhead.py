"""Per-call host time of small CPU calls as users make them, beside their peers:
nonzero_coordinates of 1000 float32 elements (50% non-zero) and slice1 of a (10, 10, 10)
window with a reversed dimension of a (20, 20, 20) input, on NumPy arrays and PyTorch
CPU tensors; default calls (window parameters as literal tuples, as users write them;
for nonzero_coordinates also a NumPy integer ``max_count`` and ``device="cpu"``; for
slice1 also as literal lists, as NumPy integer arrays made once and, for PyTorch, with a
``torch.Size``), calls into preallocated outputs of the input's library
(``out_count=``/``out_coordinates=``, ``out=``), and the peers: ``numpy.argwhere`` and
``torch.nonzero``; NumPy's slice and copy, and PyTorch's slicing and ``flip``;
slice_grad of that window's gradient back into (20, 20, 20) (its peer: ``numpy.zeros``
and an assignment into the window's view).  Each operator's default and preallocated
calls on PyTorch bfloat16 tensors too (``bfloat16``), beside float32's.
Every contender of an operator runs interleaved (:func:`harness.compare`), so the
ratios printed after them come from one run: ``out`` over the default call of its
library, ``list`` over ``tuple``, PyTorch's default over NumPy's, and each default
call over its library's peer.  ``--old REF`` adds every call of an older tree
(:func:`harness.old_tree`).  Median (min-max) over the rounds.

    python3 scripts/out_overhead.py [--old REF] [--rounds 15]
"""

import harness
import numpy as np
import torch

args, trees = harness.trees_cli()
h, cube = harness.small_inputs()
t, tc = torch.from_numpy(h), torch.from_numpy(cube)
outs = {
    "numpy": (np.empty(1, np.uint32), np.empty((1000, 1), np.uint32), np.empty((10,) * 3, "f4")),
    "torch": (
        torch.empty(1, dtype=torch.uint32),
        torch.empty((1000, 1), dtype=torch.uint32),
        torch.empty((10,) * 3),
    ),
}
bf = torch.bfloat16
outs["bfloat16"] = outs["torch"][:2] + (torch.empty((10,) * 3, dtype=bf),)
inputs = {"numpy": (h, cube), "torch": (t, tc), "bfloat16": (t.to(bf), tc.to(bf))}
grads = {"numpy": np.ones((10,) * 3, "f4"), "torch": torch.ones((10,) * 3)}
grads["bfloat16"] = grads["torch"].to(bf)
grad_outs = {"numpy": np.empty((20,) * 3, "f4"), "torch": torch.empty((20,) * 3)}
grad_outs["bfloat16"] = torch.empty((20,) * 3, dtype=bf)

WINDOW_ARRAYS = (np.array([2, 3, 4]), np.array([10, 10, 10]), np.array([-1, 1, 1]))
SIZE = torch.Size([10, 10, 10])
MOST = np.int64(1000)  # a NumPy integer max_count (computed with NumPy)
nz, sl, sg = {}, {}, {}
for tag, m in trees.items():
    for lib, (x, c) in inputs.items():
        oc, ox, os_ = outs[lib]
        nz[f"{tag}{lib}"] = lambda m=m, x=x: m.nonzero_coordinates(x)
        nz[f"{tag}{lib} out"] = lambda m=m, x=x, oc=oc, ox=ox: m.nonzero_coordinates(
            x, out_count=oc, out_coordinates=ox
        )
        if lib == "bfloat16":  # its default and preallocated calls only
            sl[f"{tag}{lib}"] = lambda m=m, c=c: m.slice1(c, (2, 3, 4), (10, 10, 10), (-1, 1, 1))
            sl[f"{tag}{lib} out"] = lambda m=m, c=c, os_=os_: m.slice1(
                c, (2, 3, 4), (10, 10, 10), (-1, 1, 1), out=os_
            )
            g, go = grads[lib], grad_outs[lib]
            sg[f"{tag}{lib}"] = lambda m=m, g=g: m.slice_grad(
                g, (20, 20, 20), (2, 3, 4), (10, 10, 10), (-1, 1, 1)
            )
            sg[f"{tag}{lib} out"] = lambda m=m, g=g, go=go: m.slice_grad(
                g, (20, 20, 20), (2, 3, 4), (10, 10, 10), (-1, 1, 1), out=go
            )
            continue
        nz[f"{tag}{lib} max_count"] = lambda m=m, x=x: m.nonzero_coordinates(x, max_count=MOST)
        nz[f"{tag}{lib} cpu"] = lambda m=m, x=x: m.nonzero_coordinates(x, device="cpu")
        # Literal parameters, as users write them (the NumPy peer's slices are too).
        sl[f"{tag}{lib}"] = lambda m=m, c=c: m.slice1(c, (2, 3, 4), (10, 10, 10), (-1, 1, 1))
        sl[f"{tag}{lib} out"] = lambda m=m, c=c, os_=os_: m.slice1(
            c, (2, 3, 4), (10, 10, 10), (-1, 1, 1), out=os_
        )
        sl[f"{tag}{lib} list"] = lambda m=m, c=c: m.slice1(c, [2, 3, 4], [10, 10, 10], [-1, 1, 1])
        # The window held as NumPy integer arrays (made once, as an ONNX port holds it);
        # a PyTorch tensor's as torch.Size (what ``t.shape`` gives).
        sl[f"{tag}{lib} arrays"] = lambda m=m, c=c: m.slice1(c, *WINDOW_ARRAYS)
        if lib == "torch":
            sl[f"{tag}torch Size"] = lambda m=m, c=c: m.slice1(c, (2, 3, 4), SIZE, (-1, 1, 1))
        g, go = grads[lib], grad_outs[lib]
        sg[f"{tag}{lib}"] = lambda m=m, g=g: m.slice_grad(
            g, (20, 20, 20), (2, 3, 4), (10, 10, 10), (-1, 1, 1)
        )
        sg[f"{tag}{lib} out"] = lambda m=m, g=g, go=go: m.slice_grad(
            g, (20, 20, 20), (2, 3, 4), (10, 10, 10), (-1, 1, 1), out=go
        )
nz["numpy.argwhere"] = lambda: np.argwhere(h)
nz["torch.nonzero"] = lambda: torch.nonzero(t)
sl["numpy slice+copy"] = lambda: cube[11:1:-1, 3:13, 4:14].copy()
sl["torch slice+flip"] = lambda: tc[2:12, 3:13, 4:14].flip(0)


def numpy_grad(g=grads["numpy"]):
    o = np.zeros((20,) * 3, np.float32)
    o[11:1:-1, 3:13, 4:14] = g
    return o


sg["numpy zeros+assign"] = numpy_grad

ratios = [
    ("numpy out", "numpy"),
    ("torch out", "torch"),
    ("torch", "numpy"),
    ("numpy list", "numpy"),
    ("torch list", "torch"),
    ("numpy max_count", "numpy"),
    ("torch cpu", "torch"),
    ("numpy arrays", "numpy"),
    ("torch arrays", "torch"),
    ("torch Size", "torch"),
    ("bfloat16", "torch"),
    ("bfloat16 out", "bfloat16"),
]
print(f"{args.rounds} interleaved rounds; us a call: median (min-max)")
for op, cases, peers in (
    ("nonzero_coordinates", nz, {"numpy": "numpy.argwhere", "torch": "torch.nonzero"}),
    ("slice1", sl, {"numpy": "numpy slice+copy", "torch": "torch slice+flip"}),
    ("slice_grad", sg, {"numpy": "numpy zeros+assign"}),
):
    st = harness.compare(cases, args.rounds)
    print(f"{op}:")
    for k, s in st.items():
        print(f"  {k:18s} {s.fmt('us')}")
    pairs = ratios + [(lib, peer) for lib, peer in peers.items()]
    pairs += [(f"old {a}", f"old {b}") for a, b in ratios] if args.old else []
    pairs += [(f"old {lib}", peer) for lib, peer in peers.items()] if args.old else []
    shown = [f"{a}/{b} {st[a].median / st[b].median:.2f}" for a, b in pairs if a in st]
    print("  " + "  ".join(shown))
