"""The CUDA nonzero kernel: one pass over the input, rows in ascending element order.

Each block takes the next tile (:func:`~dmlnumba.gpu.tile_status.take_tile`) and
runs CUB's three steps, each a module-level device function inlined into the kernel:

1. **count** (:func:`count_span`: :mod:`dmlnumba.gpu.nonzero_count`'s
   :func:`count_vector`, then :func:`count_strided` for what is left; or
   :func:`count_rows` over :func:`count_transposed`): each warp reads its
   ``32 * items`` consecutive elements once, keeps one 32-bit ballot mask per 32 of
   them in shared memory, and counts;
2. **look-back** (:func:`scan_tile`, over :func:`~dmlnumba.gpu.tile_status.look_back`):
   the block publishes its count and learns where its rows start;
3. **write** (:mod:`dmlnumba.gpu.nonzero_write`: :func:`write_rows`,
   :func:`stage_rows`, :func:`expand_rows`, :func:`expand_coords`): each warp writes
   its rows from the kept masks, visiting only the mask words that hold a non-zero.

The count never leaves the device: the block of the last tile writes it.  The
kernel is made per element width (``V`` elements in 16 bytes) and variant
(``narrow``, ``staged``, ``transposed``): constants that the kernel passes to the steps, so that
after inlining their loops over a vector's elements unroll into registers and the
branches on the variant fold away.
"""

from numba import cuda, int64, uint32, uint64

from ..params import MAXD, rows_copier
from ..params import NONZERO_CUDA as P
from . import tile_status as ts
from .indexmath import offset, unravel
from .nonzero_count import STRIDED_LOADS, count_strided, count_transposed, count_vector
from .nonzero_write import expand_coords, expand_rows, stage_rows, write_rows
from .policy import (
    EXPAND_HALF_WARP,
    EXPAND_HALF_WORDS,
    EXPAND_WARP,
    EXPAND_WORDS,
    MAX_MASKS,
    MAX_MASKS_TRANSPOSED,
    RING,
    RING_FROM,
    SPARSE_OF,
    STAGE_WORDS,
)
from .warp import agent, item_bits, local_array, warp_sum

#: Slots of the parameter block, and its copy into shared memory.
copy_rows = cuda.jit(device=True)(rows_copier(P))


@agent
def count_rows(src, src_base, total, items, mask, masks, tile, warp, nwarps, lane, g, U, v):
    """Step 1 of a kernel that reads ``U`` whole rows a tile (:func:`count_transposed`,
    every warp's mask words, then a barrier): the warp's count, in every lane."""
    m0 = warp * items
    n = int64(0)
    rows = total // g[1][g[3] - 1]  # g: the odometer, shape, strides, ndim
    count_transposed(src, src_base, mask, masks, tile, warp, nwarps, lane, g, rows, U, v)
    cuda.syncthreads()  # every warp's words are written: count the warp's own
    j = lane
    while j < items:
        n += cuda.popc(masks[uint64(m0 + j)])
        j += 32
    return warp_sum(n)


@agent
def count_span(src, src_base, total, items, mask, masks, tile, nwarps, lane, e0, m0, g, vec, V, v):
    """Step 1 of the other kernels: the warp's ``32 * items`` consecutive elements from
    element ``e0 - lane`` on, 16 bytes a lane where ``vec`` (:func:`count_vector`),
    the rest one element a lane (:func:`count_strided`).  Lane 0's result is the
    warp's count."""
    coords, dshape, dstrides, ndim = g
    seg = 32 * items
    n = int64(0)
    it = 0
    if vec != 0:
        full = (tile + 1) * seg * nwarps <= total
        n, it = count_vector(
            src, src_base, total, items, mask, masks, m0, e0 - lane + lane * V, full, lane, V
        )
        n = warp_sum(n)
    if it < items:  # (warp-uniform) steps left: the odometer, in local memory, only here
        e = e0 + it * 32
        unravel(e, dshape, ndim, coords)
        off = src_base + offset(coords, dstrides, ndim)
        n += count_strided(
            src, off, e, coords[ndim - 1], it, items, total, mask, masks, m0, lane, g, v
        )
    return n


@agent
def scan_tile(status, tile, tid, nwarps, warp_rows, count, count_pos):
    """Step 2: the warps' counts (``warp_rows``) scanned in place into their first rows
    within the tile, with the tile's total in ``warp_rows[32]``; the tile's count
    published and its first row learnt (returned to every thread); the last tile's
    block writes the total count at ``count[count_pos]``."""
    if tid == 0:
        acc = int64(0)
        for w in range(nwarps):
            c = warp_rows[w]
            warp_rows[w] = acc
            acc += c
        warp_rows[32] = acc
        if cuda.gridDim.x != 1:
            ts.publish(status, tile, ts.PREFIX if tile == 0 else ts.AGGREGATE, acc)
    excl = ts.look_back(status, tile)  # tile 0's is 0, with no read of the buffer
    if tid == 0:
        acc = warp_rows[32]
        if tile != 0:
            ts.publish(status, tile, ts.PREFIX, excl + acc)
        if tile == cuda.gridDim.x - 1:
            count[count_pos] = excl + acc
    cuda.syncthreads()
    return excl


def _write_space(staged, narrow, transposed):
    """``(expand, expand_warp, group, stage_words)`` of a kernel variant: whether a
    staged kernel's tiles that are not sparse expand their positions
    (:func:`expand_coords`), the shared words a warp's expansion takes, the mask
    words it expands at a time, and the block's shared staging words."""
    # A staged kernel's tiles that are not sparse: positions expanded 32 mask words at a
    # time, then a row a lane (expand_coords), where positions fit 32 bits: faster than
    # the ring at mid densities.  Transposed tiles, whose masks take twice the shared
    # memory, expand 16 words at a time in half the space (with 32 they ran slower,
    # docs/PERFORMANCE.md).
    expand = staged > 1 and narrow
    group = 16 if transposed else 32
    expand_warp = EXPAND_HALF_WARP if transposed else EXPAND_WARP
    if staged == 1 or (expand and not transposed):
        stage_words = EXPAND_WORDS
    elif expand:
        stage_words = EXPAND_HALF_WORDS
    else:
        stage_words = STAGE_WORDS if staged else 1
    return expand, expand_warp, group, stage_words


def make_nonzero(V, item, narrow=False, staged=0, transposed=0, *, regs=0):
    """The nonzero kernel for elements of ``16 // V`` bytes, read as numba type
    ``item`` (the unsigned integer type of that width).  ``narrow``: every element
    position is below 2**31, and the write pass divides in 32 bits (the parameter
    block's ``magic`` then holds :func:`dmlnumba.layout.divisor32`'s).
    ``staged``: 0, or the width (2 to 8) of coordinates in contiguous rows (row
    stride the width, column stride 1; 32-bit ones unless ``narrow``), compiled in:
    tiles that are not sparse expand their positions in shared memory and write a row
    a lane (:func:`expand_coords`, where ``narrow``, but for 32-bit coordinates of
    ``RING_FROM`` or more columns of an input read row by row) or stage their rows in
    a ring (:func:`stage_rows`), and every loop over the columns unrolls
    (faster than the width read at run time, docs/PERFORMANCE.md).  1, with ``narrow``:
    rows of one column (any row stride and output width), written 32 mask words at
    a time through shared memory (:func:`expand_rows`).  ``transposed``: 0, or the
    rows ``U`` of a tile of an input whose next-to-last dimension is contiguous and
    whose tiles are ``U`` whole rows (:func:`count_transposed` reads them).  ``regs``:
    the register cap it is compiled with, held in the closure so that numba's disk
    cache keys on it (:func:`~dmlnumba.gpu.launch.python_kernel`)."""

    expand, expand_warp, group, stage_words = _write_space(staged, narrow, transposed)

    def nonzero_tiles(params, src, mask, status, out, count, vec):
        """One tile per block: ``blockDim.x // 32`` warps, each over ``32 * items``
        consecutive elements, 32 at a time (lane i reads element i: coalesced).

        ``p`` is a :data:`~dmlnumba.params.NONZERO_CUDA` block, passed by value
        (a tuple of kernel parameters: nothing to allocate or upload per call);
        ``status`` the look-back buffer (:mod:`dmlnumba.gpu.tile_status`), zeroed on
        the stream before the launch (unused by a launch of one block); ``vec`` 1
        where the input is C-contiguous and 16-byte aligned.
        """
        cap = regs  # noqa: F841 (a closure cell: the disk cache's key, see make_nonzero)
        p = params
        src_base = p[P.src_base]
        ndim = p[P.ndim]
        total = p[P.total]
        items = p[P.items]
        warp_rows = cuda.shared.array(33, int64)
        tile_info = cuda.shared.array(1, int64)
        masks = cuda.shared.array(MAX_MASKS_TRANSPOSED if transposed else MAX_MASKS, uint32)
        stage = cuda.shared.array(stage_words, uint32)
        coords = local_array(MAXD, int64)  # the odometer (written before it is read)
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        nwarps = cuda.blockDim.x >> 5
        # The layout and the write pass's divisors, one copy per block in shared
        # memory: a copy per thread costs every thread its size in local-memory stores
        # (docs/PERFORMANCE.md).  The thread's own arrays (the odometer, the strided
        # loads) are warp.local_array's, without numba-cuda's zero fill.
        dshape = cuda.shared.array(MAXD, int64)
        dmagic = cuda.shared.array(MAXD, int64)
        dshift = cuda.shared.array(MAXD, int64)
        dstrides = cuda.shared.array(MAXD, int64)
        if tid == 0:
            copy_rows(params, dshape, dstrides, dmagic, dshift)
        g = (coords, dshape, dstrides, ndim)
        if tid == 0:  # one tile (grid of one block): no look-back buffer
            tile_info[0] = 0 if cuda.gridDim.x == 1 else ts.take_tile(status)
        cuda.syncthreads()
        tile = tile_info[0]
        seg = 32 * items
        e0 = tile * seg * nwarps + warp * seg + lane
        m0 = warp * items

        # 1. Count.
        v = local_array(STRIDED_LOADS, item)  # count_strided's or count_transposed's loads
        if transposed:
            n = count_rows(
                src, src_base, total, items, mask, masks, tile, warp, nwarps, lane, g, transposed, v
            )
        else:
            n = count_span(
                src, src_base, total, items, mask, masks, tile, nwarps, lane, e0, m0, g, vec, V, v
            )
        if lane == 0:
            warp_rows[warp] = n
        cuda.syncthreads()

        # 2. Look back: scan the warps, publish the tile's count, learn its first row.
        excl = scan_tile(status, tile, tid, nwarps, warp_rows, count, p[P.count_pos])

        # 3. Write: a width-1 kernel's rows 32 words at a time through shared memory;
        # a staged kernel's tile through its warps' rings, unless it is sparse
        # (block-uniform).
        width = staged if staged else p[P.width]  # a staged kernel's width is its own
        sparse = staged > 1 and warp_rows[32] * SPARSE_OF <= seg * nwarps
        dv = (dshape, dmagic, dshift, ndim)
        wm = (masks, m0, items, excl + warp_rows[warp], e0, lane)
        limit = p[P.limit]
        # Wide rows of 32-bit coordinates through the ring, whole sectors (policy.RING_FROM).
        ring = not transposed and staged >= RING_FROM and item_bits(out) == 32
        if staged == 1:
            expand_rows(wm, out, p[P.out_base], p[P.rs], limit, stage, warp * EXPAND_WARP)
        elif expand and not ring and not sparse:
            expand_coords(
                wm, dv, out, p[P.out_base], width, limit, stage, warp * expand_warp, group
            )
        elif staged and not sparse:
            stage_rows(wm, dv, out, p[P.out_base], width, limit, stage, warp * RING * width, narrow)
        else:
            ow = (p[P.out_base], p[P.rs], p[P.cs], width)
            write_rows(wm, dv, out, ow, limit, sparse, narrow)

    return nonzero_tiles
