"""The CUDA slice_grad kernel of windows whose rows are not whole: every output
element written once, the gradient's element where the window holds it and zero
elsewhere, in one pass (no memset, whose sectors the window's stepped writes would
read back and write again).

A warp's work item is ``ROWS`` consecutive rows of the outer dimensions and a
segment of ``SEGMENT`` elements of each.  Each lane writes ``CHUNK`` consecutive
elements at a time; the window's test (``(index - low) % spacing == 0`` and within
the count) takes one division by a multiply a chunk, then steps element by element,
and the next-to-last dimension's test steps row by row the same way.  The outer
dimensions are divided once a work item (:data:`row_start`).  Every slot of the
parameter block is read by a literal index (the rows right-aligned to ``MAXD`` and
padded with dimensions of size 1), so the block stays in the kernel's parameters.
"""

from numba import cuda, int32, uint32

from ..params import MAXD
from ..params import SLICE_GRAD_CUDA as P
from .nonzero_write import divide32
from .warp import agent

#: Consecutive elements a lane writes at a time.
CHUNK = 4
#: A warp's segment of a row: 32 lanes, two chunks each.
SEGMENT = 32 * CHUNK * 2
#: Rows a warp's work item walks.
ROWS = 8

_K2 = MAXD - 2  # the next-to-last dimension's slot
_LAST = MAXD - 1


def _row_start_source():
    """The source of ``row_start(p, row)``: ``(inside, src, dst, c)`` of row ``row`` of
    the outer dimensions: whether the window holds its dimensions before the
    next-to-last, the gradient's and the output's positions there, and its
    coordinate in the next-to-last dimension.  Straight-line code, one division by a
    multiply a dimension (dimension 0 takes what is left)."""
    lines = [
        "def row_start(p, row):",
        f"    src = int32(p[{P.src_base}])",
        f"    dst = int32(p[{P.dst_base}])",
        "    inside = True",
        f"    q = int32(divide32(uint32(row), uint32(p[{P.magic + _K2}]), "
        f"uint32(p[{P.shift + _K2}])))",
        f"    c2 = int32(row - q * int32(p[{P.shape + _K2}]))",
        "    e = q",
    ]
    for k in range(_K2 - 1, -1, -1):
        if k:
            lines += [
                f"    q = int32(divide32(uint32(e), uint32(p[{P.magic + k}]), "
                f"uint32(p[{P.shift + k}])))",
                f"    c = int32(e - q * int32(p[{P.shape + k}]))",
                "    e = q",
            ]
        else:
            lines.append("    c = e")
        lines += [
            f"    dst = int32(dst + c * int32(p[{P.dst_strides + k}]))",
            f"    t = int32(c - int32(p[{P.low + k}]))",
            f"    g = int32(divide32(uint32(max(t, 0)), uint32(p[{P.smagic + k}]), "
            f"uint32(p[{P.sshift + k}])))",
            f"    inside = inside and t >= 0 and g * int32(p[{P.spacing + k}]) == t "
            f"and g < int32(p[{P.count + k}])",
            f"    src = int32(src + g * int32(p[{P.src_strides + k}]))",
        ]
    lines.append("    return inside, src, dst, c2")
    return "\n".join(lines) + "\n"


def _row_start():
    scope = {"int32": int32, "uint32": uint32, "divide32": divide32, "max": max}
    exec(compile(_row_start_source(), "<grad_kernel.row_start>", "exec"), scope)
    return agent(scope["row_start"])


row_start = _row_start()


def make_grad(item):
    """The one-pass slice_grad kernel for elements of numba type ``item`` (an unsigned
    integer type of the element's width): ``(p, src, dst)``, ``p`` a
    :data:`~dmlnumba.params.SLICE_GRAD_CUDA` block passed by value, ``src`` the
    gradient, ``dst`` the output; every position below 2**31."""

    def slice_grad(params, src, dst):
        p = params
        low = int32(p[P.low + _LAST])
        sp = int32(p[P.spacing + _LAST])
        cnt = int32(p[P.count + _LAST])
        gs = int32(p[P.src_strides + _LAST])
        ds = int32(p[P.dst_strides + _LAST])
        m, s = uint32(p[P.smagic + _LAST]), uint32(p[P.sshift + _LAST])
        n2 = int32(p[P.shape + _K2])
        low2 = int32(p[P.low + _K2])
        sp2 = int32(p[P.spacing + _K2])
        cnt2 = int32(p[P.count + _K2])
        gs2 = int32(p[P.src_strides + _K2])
        ds2 = int32(p[P.dst_strides + _K2])
        m2, s2 = uint32(p[P.smagic + _K2]), uint32(p[P.sshift + _K2])
        inner = int32(p[P.inner])
        nseg = int32(p[P.nseg])
        nwork = int32(p[P.nwork])
        rows = int32(p[P.rows])
        zero = item(0)
        lane = int32(cuda.threadIdx.x % 32)
        w = int32((cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) // 32)
        nw = int32(cuda.gridDim.x * cuda.blockDim.x // 32)
        while w < nwork:
            group = int32(w // nseg)
            j0 = int32((w - group * nseg) * SEGMENT)
            row = int32(group * ROWS)
            end = min(row + ROWS, rows)
            outer, src0, dst0, c2 = row_start(p, row)
            t2 = int32(c2 - low2)
            q2 = int32(divide32(uint32(max(t2, 0)), m2, s2))
            r2 = int32(t2 - q2 * sp2)  # t2 itself (q2 0) before the window: 0 at its start
            while row < end:
                inside = outer and t2 >= 0 and r2 == 0 and q2 < cnt2
                gb = int32(src0 + q2 * gs2)
                db = int32(dst0 + c2 * ds2)
                for u in range(SEGMENT // (32 * CHUNK)):
                    j = int32(j0 + CHUNK * (lane + 32 * u))
                    if j < inner:
                        t = int32(j - low)
                        q = int32(divide32(uint32(max(t, 0)), m, s))
                        r = int32(t - q * sp)
                        v0 = v1 = v2 = v3 = zero
                        if inside:
                            if t >= 0 and r == 0 and q < cnt:
                                v0 = src[uint32(gb + q * gs)]
                            t += 1
                            r += 1
                            if r == sp:
                                r = 0
                                q += 1
                            if t >= 0 and r == 0 and q < cnt:
                                v1 = src[uint32(gb + q * gs)]
                            t += 1
                            r += 1
                            if r == sp:
                                r = 0
                                q += 1
                            if t >= 0 and r == 0 and q < cnt:
                                v2 = src[uint32(gb + q * gs)]
                            t += 1
                            r += 1
                            if r == sp:
                                r = 0
                                q += 1
                            if t >= 0 and r == 0 and q < cnt:
                                v3 = src[uint32(gb + q * gs)]
                        dst[uint32(db + j * ds)] = v0
                        if j + 1 < inner:
                            dst[uint32(db + (j + 1) * ds)] = v1
                        if j + 2 < inner:
                            dst[uint32(db + (j + 2) * ds)] = v2
                        if j + 3 < inner:
                            dst[uint32(db + (j + 3) * ds)] = v3
                row += 1
                c2 += 1
                if c2 == n2:  # on into the next plane: divided again
                    if row < end:
                        outer, src0, dst0, c2 = row_start(p, row)
                        t2 = int32(c2 - low2)
                        q2 = int32(divide32(uint32(max(t2, 0)), m2, s2))
                        r2 = int32(t2 - q2 * sp2)
                else:
                    t2 += 1
                    r2 += 1
                    if r2 == sp2:
                        r2 = 0
                        q2 += 1
            w += nw

    return slice_grad
