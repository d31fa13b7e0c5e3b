"""Compile every CUDA kernel to PTX for sm_90 without a GPU (needs ``numba-cuda[cu13]``;
``python scripts/compile_check.py ["(True, 0)" ...]``: only those variants):
catches typing and lowering errors before any device time is spent.

numba-cuda asks the driver for the current device's compute capability when it
compiles device functions; a stand-in device answers (9, 0) here."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "src"))
import numba.cuda.api as api  # noqa: E402
import numba.cuda.dispatcher as _d  # noqa: E402
from numba import cuda  # noqa: E402


class _Dev:
    compute_capability = (9, 0)


api.get_current_device = _d.get_current_device = lambda: _Dev()
from dmlnumba.gpu import launch  # noqa: E402

# (name, source bits, output bits, variant): every bit width of both kernels (the slice
# kernel with 64- and 32-bit positions), and the nonzero kernel's staged variants (32-bit
# rows of 2, 3 and 8 columns, 32- and 64-bit divisions) and width-1 variant (32-bit
# positions, both output widths) for 32-bit elements; the one-pass slice_grad kernel (1 or
# MOST_PAIRS pairs of chunks a lane).
cases = [("slice", sb, 0, (False, 0)) for sb in (8, 16, 32, 64)]
cases += [("slice", sb, 0, (True, 0)) for sb in (8, 16, 32)]  # 32-bit positions
cases += [("slice", 64, 0, (False, swap)) for swap in (8, 16, 32)]  # reversed rows as words
cases += [("nonzero", sb, ob, (False, 0)) for sb in (8, 16, 32, 64) for ob in (32, 64)]
cases += [("nonzero", 32, 32, (narrow, w)) for narrow in (True, False) for w in (2, 3, 8)]
cases += [("nonzero", 32, ob, (True, 1)) for ob in (32, 64)]
cases += [("nonzero", sb, 32, (True, 2, u)) for sb, u in ((8, 8), (32, 8), (64, 4))]  # transposed
cases += [("slice", 64, 0, (True, swap, 4)) for swap in (0, 8, 16, 32)]  # 32-bit words
cases += [("gather", sb, 0, "gather") for sb in (8, 16, 32, 64)]  # one element a thread
cases += [("grad", sb, 0, (many, 0)) for sb in (8, 16, 32, 64) for many in (False, True)]
only = sys.argv[1:]
for name, sb, ob, variant in cases:
    if only and str(variant) not in only:
        continue
    fn, sig = launch.python_kernel(name, sb, variant), launch.signature(name, sb, ob)
    ptx, _ = cuda.compile_ptx(fn, sig, cc=(9, 0))
    local = ptx.count("ld.local") + ptx.count("st.local")
    what = f"{name:8s} src {sb:2d} bits, out {ob:2d} bits, variant {variant}"
    stores = ptx.count("st.global.v")  # vector stores (the slice_grad kernel's chunks)
    print(f"{what}: ok ({len(ptx)} chars of PTX, {local} local accesses, {stores} vector stores)")
