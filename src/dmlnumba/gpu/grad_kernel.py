"""The CUDA slice_grad kernel of windows whose rows are not whole: every output
element written once, the gradient's element where the window holds it and zero
elsewhere, in one pass (no memset, whose sectors the window's stepped writes would
read back and write again).

A row takes ``L`` lanes, the fewest (a power of two, at most 32) that cover it a chunk
of ``CHUNK`` elements each, so that short rows keep every lane busy; a warp's
``32 / L`` groups of lanes take interleaved rows (its stores stay together).  A work
item is ``ROWS`` steps of ``32 / L`` consecutive rows, and a segment of
``2 * pairs * CHUNK * L`` elements of each (``pairs`` 1, or :data:`MOST_PAIRS` in rows
of 1024 elements or more where a work item has fewer than ``ROWS`` rows).  Each lane
writes ``CHUNK`` consecutive elements at a time, in one vector store where the output's
row is contiguous and starts on the store's alignment; the window's test
(``(index - low) % spacing == 0`` and within the count) takes one division by a
multiply a chunk, then steps element by element (:func:`take`); the next-to-last
dimension's takes one a row.  The outer dimensions are divided where a lane's row
enters a new plane (:data:`row_start`).  Every slot of the parameter block is read by
a literal index (the rows right-aligned to ``MAXD`` and padded with dimensions of size
1), so the block stays in the kernel's parameters.
"""

from numba import cuda, int32, uint32

from ..params import MAXD
from ..params import SLICE_GRAD_CUDA as P
from .nonzero_write import divide32
from .warp import agent, aligned4, store4

#: Consecutive elements a lane writes at a time.
CHUNK = 4
#: Pairs of chunks a lane takes of a row's segment where a work item has fewer than
#: ``ROWS`` rows (its divisions would otherwise weigh on few elements), else one.
MOST_PAIRS = 4
#: Steps of rows a warp's work item walks.
ROWS = 8


def pairs_of(many):
    """Pairs of chunks a lane takes of a row's segment: :data:`MOST_PAIRS` in the variant
    for long rows where a work item has fewer than ``ROWS`` rows (``many``), else one."""
    return MOST_PAIRS if many else 1


_K2 = MAXD - 2  # the next-to-last dimension's slot
_LAST = MAXD - 1


@agent
def window_at(t, magic, shift, spacing):
    """``(q, r)`` of ``t``, an index less the window's lowest: ``t = q * spacing + r``
    (``q`` 0 and ``r`` ``t`` before the window)."""
    q = int32(divide32(uint32(max(t, 0)), magic, shift))
    return q, int32(t - q * spacing)


@agent
def take(src, base, stride, t, r, q, count, spacing, v):
    """The gradient's element at ``(t, r, q)`` (:func:`window_at`) where the window holds
    one, else ``v``; and ``(t, r, q)`` one index on."""
    if t >= 0 and r == 0 and q < count:
        v = src[uint32(base + q * stride)]
    r += 1
    if r == spacing:
        r = 0
        q += 1
    return v, t + 1, r, q


@agent
def take_crop(src, base, stride, t, count, v):
    """:func:`take` where the window's spacing is 1: the gradient's element ``t`` where
    ``0 <= t < count``, else ``v``."""
    if t >= 0 and t < count:
        v = src[uint32(base + t * stride)]
    return v


@agent
def put(dst, base, stride, j, inner, v):
    """``v`` into element ``j`` of the output's row at ``base``, if the row has one."""
    if j < inner:
        dst[uint32(base + j * stride)] = v


def _row_start_source():
    """The source of ``row_start(p, row)``: ``(inside, src, dst, c, t, q, r)`` of row
    ``row`` of the outer dimensions: whether the window holds its dimensions before the
    next-to-last, the gradient's and the output's positions there, its coordinate in
    the next-to-last dimension and that coordinate's :func:`window_at`.  Straight-line
    code, one division by a multiply a dimension (dimension 0 takes what is left)."""
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
    lines += [
        f"    t2 = int32(c2 - int32(p[{P.low + _K2}]))",
        f"    q2, r2 = window_at(t2, uint32(p[{P.smagic + _K2}]), uint32(p[{P.sshift + _K2}]), "
        f"int32(p[{P.spacing + _K2}]))",
        "    return inside, src, dst, c2, t2, q2, r2",
    ]
    return "\n".join(lines) + "\n"


def _row_start():
    scope = {"int32": int32, "uint32": uint32, "divide32": divide32, "max": max}
    scope["window_at"] = window_at
    exec(compile(_row_start_source(), "<grad_kernel.row_start>", "exec"), scope)
    return agent(scope["row_start"])


row_start = _row_start()


def make_grad(item, pairs):
    """The one-pass slice_grad kernel for elements of numba type ``item`` (an unsigned
    integer type of the element's width), each lane taking ``pairs`` pairs of chunks of
    a row's segment: ``(p, src, dst)``, ``p`` a
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
        sp2 = int32(p[P.spacing + _K2])
        cnt2 = int32(p[P.count + _K2])
        gs2 = int32(p[P.src_strides + _K2])
        ds2 = int32(p[P.dst_strides + _K2])
        m2, s2 = uint32(p[P.smagic + _K2]), uint32(p[P.sshift + _K2])
        inner = int32(p[P.inner])
        nseg = int32(p[P.nseg])
        nwork = int32(p[P.nwork])
        rows = int32(p[P.rows])
        lanes_log = int32(p[P.lanes_log])
        lanes = int32(1) << lanes_log  # L: a row's lanes
        across = int32(32) >> lanes_log  # rows a step
        zero = item(0)
        lane = int32(cuda.threadIdx.x % 32)
        col = lane & (lanes - 1)
        w = int32((cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) // 32)
        nw = int32(cuda.gridDim.x * cuda.blockDim.x // 32)
        while w < nwork:
            group = int32(w // nseg)
            j0 = int32((w - group * nseg) * (2 * CHUNK) * lanes * pairs)
            first = int32(group * ROWS * across)
            row = int32(first + (lane >> lanes_log))
            end = min(first + ROWS * across, rows)
            if row < end:
                outer, src0, dst0, c2, t2, q2, r2 = row_start(p, row)
                while True:
                    inside = outer and t2 >= 0 and r2 == 0 and q2 < cnt2
                    gb = int32(src0 + q2 * gs2)
                    db = int32(dst0 + c2 * ds2)
                    # Chunks start on multiples of CHUNK: the row's start tells for all.
                    vec = ds == 1 and aligned4(dst, uint32(db))
                    for v in range(pairs):
                        for u in range(2):
                            j = int32(j0 + CHUNK * (col + lanes * (2 * v + u)))
                            if j < inner:
                                v0 = v1 = v2 = v3 = zero
                                t = int32(j - low)
                                if inside and sp == 1:  # a crop: no steps to count
                                    v0 = take_crop(src, gb, gs, t, cnt, v0)
                                    v1 = take_crop(src, gb, gs, t + 1, cnt, v1)
                                    v2 = take_crop(src, gb, gs, t + 2, cnt, v2)
                                    v3 = take_crop(src, gb, gs, t + 3, cnt, v3)
                                elif inside:
                                    q, r = window_at(t, m, s, sp)
                                    v0, t, r, q = take(src, gb, gs, t, r, q, cnt, sp, v0)
                                    v1, t, r, q = take(src, gb, gs, t, r, q, cnt, sp, v1)
                                    v2, t, r, q = take(src, gb, gs, t, r, q, cnt, sp, v2)
                                    v3, t, r, q = take(src, gb, gs, t, r, q, cnt, sp, v3)
                                if vec and j + 3 < inner:
                                    store4(dst, uint32(db + j), v0, v1, v2, v3)
                                else:
                                    put(dst, db, ds, j, inner, v0)
                                    put(dst, db, ds, j + 1, inner, v1)
                                    put(dst, db, ds, j + 2, inner, v2)
                                    put(dst, db, ds, j + 3, inner, v3)
                    row += across
                    if row >= end:
                        break
                    c2 += across
                    if c2 < n2:
                        t2 += across
                        q2, r2 = window_at(t2, m2, s2, sp2)
                    else:  # in another plane: divided again
                        outer, src0, dst0, c2, t2, q2, r2 = row_start(p, row)
            w += nw

    return slice_grad
