"""The CUDA slice1 kernel: a strided copy, the same for every rank and layout.

The copy is tiled as (``nrows`` consecutive rows of the outer dimensions,
segment of ``seg`` elements of the inner one).  ``blockDim.y`` tiles per block,
``blockDim.x`` threads across a row segment: consecutive threads copy
consecutive elements.  A tile locates its first row by division once, then
steps to the next rows by adding strides (dividing again only where
the next-to-last dimension wraps).  Each thread issues ``loads`` loads
before it stores any (:data:`LOADS`; half as many of 8-byte items in 32-bit
positions), along its row segment and on into the next rows, so that many are in
flight whatever the rows' length (one body; ``loads`` is a compile-time constant,
so the loops unroll into registers).

The gather kernel (:func:`make_gather`) copies windows of 4- and 8-byte items and
windows whose rows are read with a step (the plan chooses, docs/PERFORMANCE.md):
one output element a thread and step, its source and destination found by a
32-bit division by a multiply per dimension, ``GATHER_LOADS`` loads in flight.
"""

from numba import cuda, int32, int64, uint32, uint64

from ..params import MAXD, rows_copier
from ..params import SLICE_CUDA as P
from ..params import SLICE_GATHER_CUDA as G
from .indexmath import row_start
from .nonzero_write import divide32
from .warp import agent

#: The parameter block's rows (the layout), from the kernel's parameters into shared
#: memory, one statement a slot (an index into the parameters' tuple that is not a
#: literal compiles to a switch over every slot).
copy_rows = cuda.jit(device=True)(rows_copier(P))


@agent
def reverse_items(x, bits):
    """The uint64 ``x`` with the order of its items of ``bits`` bits (8, 16 or 32)
    reversed: halves swapped, then 16-bit parts within them, then bytes."""
    x = (x >> uint64(32)) | (x << uint64(32))
    if bits <= 16:
        m = uint64(0x0000FFFF0000FFFF)
        x = ((x & m) << uint64(16)) | ((x >> uint64(16)) & m)
    if bits <= 8:
        m = uint64(0x00FF00FF00FF00FF)
        x = ((x & m) << uint64(8)) | ((x >> uint64(8)) & m)
    return x


#: Loads each thread has in flight (docs/PERFORMANCE.md, "slice1 loads in flight").
LOADS = 8


def make_slice(item, narrow=False, swap=0, loads=LOADS, fill=False, *, regs=0):
    """The slice kernel for elements of numba type ``item`` (an unsigned integer
    type of the element's width): ``(p, src, dst)``, ``p`` a :data:`SLICE_CUDA`
    block passed by value (a tuple of kernel parameters).  ``narrow``: every
    element position of both arrays is below 2**31, and the positions a thread
    keeps in flight are 32-bit.  ``swap``: 0, or (64-bit words) the bits of the
    items whose order each word reverses (:func:`reverse_items`): a reversed row
    of small items copied a word at a time.  ``loads``: the loads each thread has
    in flight.  ``fill``: the stores only, of zero bits (``src`` is not read): the
    same tiles zero a strided view at a memset's speed.  ``regs``: the register cap it is
    compiled with, held in the closure so that numba's disk cache keys on it
    (:func:`~dmlnumba.gpu.launch.python_kernel`)."""
    I = int32 if narrow else int64  # noqa: E741

    def slice_copy(params, src, dst):
        cap = regs  # noqa: F841 (a closure cell: the disk cache's key, see make_slice)
        p = params  # read by literal slots: kernel parameters, no registers held
        src_base = I(p[P.src_base])
        dst_base = I(p[P.dst_base])
        ndim = p[P.ndim]
        seg = I(p[P.seg])
        nseg = I(p[P.nseg])
        rows = I(p[P.rows])
        nrows = I(p[P.nrows])
        ntiles = I(p[P.ntiles])
        # The layout, one copy per block in shared memory, and no coordinates array:
        # numba zero-fills every cuda.local.array at kernel entry, which cost each
        # thread 256 bytes of local-memory stores (docs/PERFORMANCE.md).
        shape = cuda.shared.array(MAXD, int64)
        sst = cuda.shared.array(MAXD, int64)
        dstr = cuda.shared.array(MAXD, int64)
        if cuda.threadIdx.y == 0 and cuda.threadIdx.x == 0:
            copy_rows(params, shape, sst, dstr)
        cuda.syncthreads()
        v = cuda.local.array(loads, item)
        sa = cuda.local.array(loads, I)
        da = cuda.local.array(loads, I)
        last = ndim - 1
        inner = I(shape[last])
        ss = I(sst[last])
        ds = I(dstr[last])
        # One row on in the next-to-last dimension, and that dimension's size.
        s_outer = I(sst[last - 1] if last > 0 else 0)
        d_outer = I(dstr[last - 1] if last > 0 else 0)
        n_outer = I(shape[last - 1] if last > 0 else 1)
        bx = I(cuda.blockDim.x)
        tile = I(cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y)
        step = I(cuda.gridDim.x * cuda.blockDim.y)
        while tile < ntiles:
            group = I(tile // nseg)
            start = I((tile - group * nseg) * seg)
            end = I(min(start + seg, inner))
            width = I(end - start)  # the segment's elements in each row
            # Thread x takes elements x, x + bx, ... of the tile's rows read as one
            # run, row after row: where a segment is shorter than bx (short rows), a
            # warp's lanes go on into the next rows instead of idling.
            k0 = I(cuda.threadIdx.x // width)
            j = I(start + cuda.threadIdx.x - k0 * width)
            r = I(group * nrows)
            r_end = I(min(r + nrows, rows))
            r = I(r + k0)
            if r < r_end:
                s, d, c = row_start(r, shape, last, sst, dstr)
                s = I(s + src_base)
                d = I(d + dst_base)
                c = I(c)
            while r < r_end:
                # The next LOADS elements of this thread, along its row segment and on
                # into the next rows: their addresses first, then all the loads, then
                # the stores, so that short rows keep as many loads in flight as long
                # ones.  A row step adds strides; where the next-to-last dimension
                # wraps, the batch ends there and the next row's start is divided out
                # after it, outside the unrolled loop (which keeps its arrays in
                # registers that way).
                n = 0
                wrapped = False
                for u in range(loads):
                    if r < r_end and not wrapped:
                        sa[u] = I(s + j * ss)
                        da[u] = I(d + j * ds)
                        n = u + 1
                        j = I(j + bx)
                        if j >= end:  # on into the next row (rows, where they are short)
                            k = I(1)
                            j = I(j - width)
                            while j >= end:
                                j = I(j - width)
                                k = I(k + 1)
                            r = I(r + k)
                            c = I(c + k)
                            s = I(s + k * s_outer)
                            d = I(d + k * d_outer)
                            wrapped = c >= n_outer
                for u in range(loads):
                    if fill:
                        v[u] = item(0)
                    elif u < n:
                        v[u] = src[sa[u]]
                for u in range(loads):
                    if u < n:
                        dst[da[u]] = reverse_items(v[u], swap) if swap else v[u]
                if wrapped and r < r_end:
                    s, d, c = row_start(r, shape, last, sst, dstr)
                    s = I(s + src_base)
                    d = I(d + dst_base)
                    c = I(c)
            tile = I(tile + step)

    return slice_copy


#: Loads each thread of the gather kernel has in flight (half as many of 8-byte items:
#: the same bytes as 4-byte items, :func:`gather_loads`).
GATHER_LOADS = 4


def gather_loads(bits):
    """The loads in flight of the gather kernel of ``bits``-bit items."""
    return GATHER_LOADS // 2 if bits == 64 else GATHER_LOADS


def _gather_offsets_source():
    """The source of ``offsets(p, e, lo)``: the source and destination offsets of
    element ``e`` (of the copy's row-major order) from a
    :data:`~dmlnumba.params.SLICE_GATHER_CUDA` block ``p`` passed by value, its
    dimensions in slots ``lo + 1 ..`` of each row (``lo = MAXD - ndim``; the first
    dimension's strides are scalars).  Straight-line code, each slot read by a
    literal index (a kernel parameter, no shared-memory copy), one 32-bit division
    by a multiply per dimension but the first, the innermost first."""
    lines = ["def offsets(p, e, lo):", "    s = int32(0)", "    d = int32(0)"]
    for k in range(MAXD - 1, 0, -1):
        lines += [
            f"    if lo < {k}:",
            f"        q = int32(divide32(uint32(e), uint32(p[{G.magic + k}]), "
            f"uint32(p[{G.shift + k}])))",
            f"        c = int32(e - q * int32(p[{G.shape + k}]))",
            f"        s = int32(s + c * int32(p[{G.src_strides + k}]))",
            f"        d = int32(d + c * int32(p[{G.dst_strides + k}]))",
            "        e = q",
        ]
    lines += [
        f"    s = int32(s + e * int32(p[{G.src_stride0}]))",
        f"    d = int32(d + e * int32(p[{G.dst_stride0}]))",
        "    return s, d",
    ]
    return "\n".join(lines) + "\n"


def _gather_offsets():
    scope = {"int32": int32, "uint32": uint32, "divide32": divide32}
    exec(compile(_gather_offsets_source(), "<slice_kernel.offsets>", "exec"), scope)
    return agent(scope["offsets"])


gather_offsets = _gather_offsets()


def make_gather(item, loads):
    """The gather kernel for elements of numba type ``item``: ``(p, src, dst)``, ``p``
    a :data:`~dmlnumba.params.SLICE_GATHER_CUDA` block passed by value.  Thread
    ``t`` of ``T`` copies output elements ``t``, ``t + T``, ... (in the copy's
    row-major order), ``loads`` at a time: each element's positions by
    :data:`gather_offsets` (every position below 2**30), then all the loads, then
    the stores.  Consecutive threads copy consecutive elements, so short rows and
    rows read with a step keep every lane busy (CuPy's elementwise copy has this
    shape, with 64-bit divisions)."""

    def gather(params, src, dst):
        p = params
        lo = MAXD - p[G.ndim]
        total = p[G.total]
        sb = int32(p[G.src_base])
        db = int32(p[G.dst_base])
        v = cuda.local.array(loads, item)
        sa = cuda.local.array(loads, int32)
        da = cuda.local.array(loads, int32)
        # The element counter in 64 bits (numba's integer arithmetic): its last step
        # may pass 2**31.
        step = int64(cuda.gridDim.x * cuda.blockDim.x)
        i = int64(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x)
        while i < total:
            n = 0
            for u in range(loads):
                if i + u * step < total:
                    s, d = gather_offsets(p, int32(i + u * step), lo)
                    sa[u] = int32(sb + s)
                    da[u] = int32(db + d)
                    n = u + 1
            for u in range(loads):
                if u < n:
                    v[u] = src[sa[u]]
            for u in range(loads):
                if u < n:
                    dst[da[u]] = v[u]
            i += loads * step

    return gather
