"""The CUDA nonzero kernel: one pass over the input, rows in ascending element order.

Each block takes the next tile (:func:`~dmlnumba.tile_status.take_tile`) and
runs three named steps:

1. **count** (:func:`count_vector`, then :func:`count_strided` for what is
   left): each warp reads its ``32 * items`` consecutive elements once, keeps
   one 32-bit ballot mask per 32 of them in shared memory, and counts;
2. **look-back** (:func:`~dmlnumba.tile_status.look_back`): the block publishes
   its count and learns where its rows start;
3. **write** (:func:`write_rows`): each warp writes its rows from the kept
   masks, visiting only the mask words that hold a non-zero; a row's
   coordinates come from its element's position by multiplies
   (:func:`write_row`; in 32 bits where every position fits), not an
   odometer.  Dense tiles of a staged kernel gather each word's rows in shared
   memory and store them as one run.

The count never leaves the device: the block of the last tile writes it.  The
kernel is made per element width (``V`` elements in 16 bytes), a compile-time
constant, so the loops over a vector's elements unroll into registers.
"""

from numba import cuda, int64, uint32, uint64

from . import tile_status as ts
from .indexmath_gpu import advance, is_nonzero, offset, unravel
from .params import MAXD
from .params import NONZERO_CUDA as P
from .warp import (
    all_lanes,
    ballot,
    inline,
    load16,
    shfl_down,
    sync_warp,
    umulhi,
    umulhi32,
    warp_sum,
)

#: Shared ballot masks per block: warps x items.  The host keeps
#: ``(threads // 32) * items`` within this.
MAX_MASKS = 2048
#: Shared staging words per block of the staged write pass: warps x 32 x width.
#: The host allows staging only where ``threads * width`` is within this.
STAGE_WORDS = 2048
#: A tile stages its rows where at least 1 / STAGE_OF of its elements are non-zero
#: (3 in 4: dense tiles, where lanes storing their own rows fill each 32-byte
#: sector a column at a time, and the write pass is bound by L2 writes).  A float:
#: the integer test of the same bound changes ptxas's spills (40 / 76 -> 36 / 64
#: bytes) and, tried with other changes, measured 6-10% slower at 1%
#: (docs/PERFORMANCE.md).
STAGE_OF = 4 / 3
#: A staged kernel's tile whose elements are at most 1 / SPARSE_OF non-zero writes
#: 32 mask words at once, one a lane (the lanes' rows follow each other), instead of
#: word by word with all lanes on one word's rows.
SPARSE_OF = 16
#: 16-byte loads each lane has in flight in the vector count.
VECTOR_LOADS = 4
#: Element loads each lane has in flight in the strided count.
STRIDED_LOADS = 8


def make_nonzero(V, item, narrow=False, staged=False):
    """The nonzero kernel for elements of ``16 // V`` bytes, read as numba type
    ``item`` (the unsigned integer type of that width).  ``narrow``: every element
    position is below 2**32, and the write pass divides in 32 bits (the parameter
    block's ``magic`` then holds :func:`dmlnumba.layout.divisor32`'s).
    ``staged``: the coordinates are 32-bit, several columns in contiguous rows
    (row stride the width, column stride 1), and dense tiles stage their rows in
    shared memory (:func:`write_rows`)."""
    W = 32 // V  # lanes whose elements make up one 32-element mask word
    BITS = 128 // V  # bits an element
    HALF = max(V // 2, 1)  # elements in 8 bytes
    E = max(32 // BITS, 1)  # elements in 32 bits
    # Per-element constants replicated across a 32-bit word (for widths under 32
    # bits): ONES has each element's lowest bit, TOP its highest, LOW7 all but the
    # highest.
    ONES = sum(1 << (BITS * k) for k in range(E)) if BITS < 32 else 1
    TOP = uint32(ONES << (BITS - 1)) if BITS < 32 else uint32(0)
    LOW7 = uint32(ONES * ((1 << (BITS - 1)) - 1)) if BITS < 32 else uint32(0)
    ONES = uint32(ONES)

    @inline
    def word_bits(w, m):
        """Bit k set where element k of the 32-bit word ``w`` (``E`` elements) has a
        bit of the replicated mask ``m`` set, without a branch: adding LOW7 to an
        element's low bits carries into its top bit exactly when one is set.  (For
        8- and 16-bit elements; wider ones take a select each.)"""
        t = (((w & m & LOW7) + LOW7) | (w & m)) & TOP
        y = uint32(t >> uint32(BITS - 1))
        # A multiply moves the flags next to each other (no two partial products
        # meet); 32 x 32 -> 64 bits, one wide multiply.
        if E == 4:  # bits 0, 8, 16, 24 to 21..24
            return uint32(uint32((uint64(y) * uint64(0x00204081)) >> uint64(21)) & uint32(0xF))
        # E == 2: bits 0, 16 to 15, 16
        return uint32(uint32((uint64(y) * uint64(0x8001)) >> uint64(15)) & uint32(0x3))

    @inline
    def lane_bits(a, b, mask):
        """The ``V`` elements in 16 bytes ``(a, b)``, one bit each (bit j: element
        j is non-zero)."""
        if BITS == 64:
            return uint32(
                uint32((a & mask) != uint64(0)) + (uint32((b & mask) != uint64(0)) << uint32(1))
            )
        if BITS == 32:  # a select per element, no arithmetic
            m = uint32(mask)
            return uint32(
                (uint32(1) if uint32(a) & m else uint32(0))
                | (uint32(2) if uint32(a >> uint64(32)) & m else uint32(0))
                | (uint32(4) if uint32(b) & m else uint32(0))
                | (uint32(8) if uint32(b >> uint64(32)) & m else uint32(0))
            )
        m = uint32(uint32(mask) * ONES)
        # The parts do not overlap: adding them is or-ing them (shift-adds fuse).
        # (numba widens uint32 arithmetic to 64 bits; the casts keep it 32-bit.)
        return uint32(
            word_bits(uint32(a & uint64(0xFFFFFFFF)), m)
            + (word_bits(uint32(a >> uint64(32)), m) << uint32(E))
            + (word_bits(uint32(b & uint64(0xFFFFFFFF)), m) << uint32(2 * E))
            + (word_bits(uint32(b >> uint64(32)), m) << uint32(3 * E))
        )

    @inline
    def gather_word(a, b, mask):
        """Each lane's ``V`` bits, gathered from ``W`` neighbouring lanes into
        32-bit mask words (element order) by a shuffle butterfly: lane ``q * W``
        returns word ``q`` of the warp's ``32 * V`` elements."""
        x = lane_bits(a, b, mask)
        s = 1
        while s < W:  # constant trip count: unrolled
            x = uint32(x + (uint32(shfl_down(x, s)) << uint32(V * s)))  # disjoint
            s *= 2
        return x

    @inline
    def keep_words(a, b, loads, mask, masks, i, lane):
        """The mask words of ``loads`` 16-byte loads per lane (``a[u], b[u]``), kept
        at ``masks[i]`` on (``V`` words a load); returns the lane's count of their
        non-zeros (lanes ``q * W`` count, the others 0)."""
        x = cuda.local.array(VECTOR_LOADS, uint32)
        for u in range(loads):
            x[u] = gather_word(a[u], b[u], mask)
        n = int64(0)
        if lane % W == 0:  # lane q * W keeps word q of each load
            i += lane // W
            for u in range(loads):
                masks[uint64(i + u * V)] = x[u]
                n += cuda.popc(x[u])
        return n

    @inline
    def load_lane(src, base, ev, total):
        """Elements ``ev .. ev + V - 1`` as 16 bytes (two little-endian words),
        one vector load where all are in range, else element by element (zeros
        past the end)."""
        if ev + V <= total:
            return load16(src, base + ev)
        a = uint64(0)
        b = uint64(0)
        for j in range(V):
            if ev + j < total:
                v = uint64(src[base + ev + j])
                if j < HALF:
                    a |= v << uint64(BITS * j)
                else:
                    b |= v << uint64(BITS * (j - HALF))
        return a, b

    @inline
    def count_vector(src, src_base, total, items, mask, masks, m0, wfirst, full, lane):
        """Count pass for a C-contiguous, 16-byte aligned input: each lane loads
        ``V`` consecutive elements at once, turns them into ``V`` bits, and a
        shuffle butterfly gathers those into mask words.  Full tiles issue each
        step's loads a step early, so a warp always has loads in flight; the last
        tile's loads are range-checked.  Returns ``(lane's count, steps done)``:
        the steps left (fewer than ``V``) are the strided count's."""
        a = cuda.local.array(VECTOR_LOADS, uint64)
        b = cuda.local.array(VECTOR_LOADS, uint64)
        na = cuda.local.array(VECTOR_LOADS, uint64)
        nb = cuda.local.array(VECTOR_LOADS, uint64)
        STEP = VECTOR_LOADS * V  # steps of 32 elements per round
        n = int64(0)
        it = 0
        if full and STEP <= items:
            p = src_base + wfirst
            for u in range(VECTOR_LOADS):
                a[u], b[u] = load16(src, p + u * 32 * V)
            more = True
            while more:
                more = it + 2 * STEP <= items
                if more:
                    p += 32 * STEP
                    for u in range(VECTOR_LOADS):
                        na[u], nb[u] = load16(src, p + u * 32 * V)
                n += keep_words(a, b, VECTOR_LOADS, mask, masks, m0 + it, lane)
                it += STEP
                for u in range(VECTOR_LOADS):
                    a[u] = na[u]
                    b[u] = nb[u]
        while it + V <= items:  # range-checked, one load at a time
            a[0], b[0] = load_lane(src, src_base, wfirst + it * 32, total)
            n += keep_words(a, b, 1, mask, masks, m0 + it, lane)
            it += V
        return n, it

    @inline
    def count_strided(src, off, e, c_last, it, items, total, mask, masks, m0, lane, g):
        """Count pass over any layout from step ``it``: lane ``i`` reads element
        ``e`` (``32 * step + i`` of the warp's), at ``off``, innermost coordinate
        ``c_last``.  ``STRIDED_LOADS`` steps at once where the whole warp is in
        range and no lane's row wraps within them, else one; the odometer
        (``g``: coords, shape, strides, ndim) carries only when a row wraps.
        Returns the lane's share of the count (every lane counts whole ballots:
        the caller takes lane 0's)."""
        coords, shape, strides, ndim = g
        last = ndim - 1
        n_last = shape[last]
        s_last = strides[last]
        v = cuda.local.array(STRIDED_LOADS, item)
        bal = cuda.local.array(STRIDED_LOADS, uint32)
        S = STRIDED_LOADS
        n = int64(0)
        while it < items:
            if all_lanes(
                it + S <= items and e + 32 * (S - 1) < total and c_last + 32 * (S - 1) < n_last
            ):
                for u in range(S):
                    v[u] = src[off + 32 * u * s_last]
                for u in range(S):
                    bal[u] = ballot(is_nonzero(v[u], mask))
                for u in range(S):
                    if lane == 0:
                        masks[uint64(m0 + it + u)] = bal[u]
                    n += cuda.popc(bal[u])
                k = S
            else:
                flag = False
                if e < total:
                    flag = is_nonzero(src[off], mask)
                bal[0] = ballot(flag)
                if lane == 0:
                    masks[uint64(m0 + it)] = bal[0]
                n += cuda.popc(bal[0])
                k = 1
            it += k
            e += 32 * k
            c_last += 32 * k
            off += 32 * k * s_last
            if c_last >= n_last:  # a row wrapped: let the odometer carry from the last step
                coords[last] = c_last - 32
                off = advance(coords, shape, strides, ndim, 32, off - 32 * s_last)
                c_last = coords[last]
        return n

    @inline
    def divide(e, magic, shift):
        """``e // n`` (``e`` a uint64) from :func:`dmlnumba.layout.divisor`'s
        ``(magic, shift)`` of ``n``: a multiply, not a division (the same steps as
        :func:`dmlnumba.layout.divide`, which the tests check)."""
        t = umulhi(e, magic)
        s1 = uint64(1) if shift > 0 else uint64(0)
        s2 = uint64(shift - 1) if shift > 0 else uint64(0)
        return (t + ((e - t) >> s1)) >> s2

    @inline
    def divide32(e, magic, shift):
        """``e // n`` for uint32 ``e`` and :func:`dmlnumba.layout.divisor32`'s
        ``(magic, shift)`` of ``n``, all in 32 bits (one high multiply)."""
        t = umulhi32(e, uint32(magic))
        sh = uint32(shift)
        s1 = uint32(1) if sh > uint32(0) else uint32(0)
        s2 = uint32(sh - uint32(1)) if sh > uint32(0) else uint32(0)
        return uint32(uint32(t + uint32(uint32(e - t) >> s1)) >> s2)

    @inline
    def write_row(out, pos, cs, e, dv, width):
        """Write the last ``width`` coordinates of element ``e`` (a uint64, row-major
        position) at ``out[pos]``, ``out[pos + cs]``, ...: innermost first, each
        the remainder of a division by its dimension (``dv``: shape, magic,
        shift, ndim).  The first column is what is left (the dimensions before
        it have size 1).  ``width`` is at least 1."""
        shape, magic, shift, ndim = dv
        pos += (width - 1) * cs
        if narrow:
            e32 = uint32(e)
            for j in range(width - 1):
                d = uint64(ndim - 1 - j)  # unsigned: no negative-index check
                q32 = divide32(e32, magic[d], shift[d])
                out[pos] = uint32(e32 - uint32(q32 * uint32(shape[d])))
                pos -= cs
                e32 = q32
            out[pos] = e32
        else:
            for j in range(width - 1):
                d = ndim - 1 - j
                q = divide(e, magic[d], shift[d])
                out[pos] = e - q * uint64(shape[d])
                pos -= cs
                e = q
            out[pos] = e

    @inline
    def write_rows(masks, m0, items, row, e0, lane, dv, out, ow, limit, stage, sb, dense, sparse):
        """Write this warp's rows from ``row`` on, in element order, from its kept
        masks (``masks[m0 + k]``: elements ``e0 - lane + 32 k`` on).  Lane ``i``
        reads word ``base + i`` of the next 32, and one ballot says which of them
        hold non-zeros: the warp visits those words only (at 1% density, about 3
        in 4 are empty).  A lane with a non-zero computes its coordinates from
        its element's position (:func:`write_row`): no odometer, no state from
        one word to the next.  Rows at and past ``limit`` are not written (none
        where the width is 0: ``limit`` is then 0).  ``ow``: the output's base,
        row and column strides, and width.

        ``sparse`` (a tile of a staged kernel with at most 1 / SPARSE_OF of its
        elements non-zero): the warp takes 32 words at once, lane ``i`` writing the
        rows of word ``base + i`` (a lane's first row: the counts of the words
        below it, summed by one ballot per bit), instead of one word at a time; at
        1-5% density, most words hold at most one non-zero, so one step writes
        the rows of 32 words.

        ``dense`` (a dense tile of a staged kernel, see :func:`make_nonzero`): the
        lanes write a word's rows into ``stage`` (this warp's ``32 * width`` words
        of shared memory, from ``sb``), and the warp stores them as one run, lane
        ``i`` taking words ``i, i + 32, ...``: full 32-byte sectors, where lanes
        storing their own rows ``width`` words apart fill each sector a column at
        a time."""
        out_base, rs, cs, width = ow
        lt = uint32((1 << lane) - 1)
        base = 0
        while base < items:
            bw = uint32(0)
            if base + lane < items:
                bw = masks[uint64(m0 + base + lane)]
            if sparse:
                # A sparse tile: every lane writes its own word's rows, all lanes at
                # once.  A lane's first row is the sum of the counts below it, one
                # ballot per bit of the count.
                c = cuda.popc(bw)
                r = row
                for t in range(6):
                    bt = ballot((c >> t) & 1 != 0)
                    r += cuda.popc(bt & lt) << t
                    row += cuda.popc(bt) << t
                ew = e0 - lane + 32 * (base + lane)  # element 0 of the lane's word
                while bw != uint32(0):
                    j = cuda.popc(uint32(bw ^ (bw - uint32(1)))) - 1
                    bw = uint32(bw & (bw - uint32(1)))
                    if r < limit:
                        write_row(out, out_base + r * rs, cs, uint64(ew + j), dv, width)
                    r += 1
                base += 32
                continue
            live = ballot(bw != uint32(0))
            while live != uint32(0):
                # The first word left: its bit and those below it, then cleared.
                k = base + cuda.popc(uint32(live ^ (live - uint32(1)))) - 1
                live = uint32(live & (live - uint32(1)))
                b = masks[uint64(m0 + k)]
                q = cuda.popc(b & lt)
                nb = cuda.popc(b)
                if dense:
                    if (b >> lane) & 1:
                        write_row(stage, sb + q * width, 1, uint64(e0 + 32 * k), dv, width)
                    sync_warp()
                    run = (min(nb, limit - row) if row < limit else 0) * width
                    pos = out_base + row * width
                    t = lane
                    while t < run:
                        out[pos + t] = stage[sb + t]
                        t += 32
                    sync_warp()
                else:
                    r = row + q
                    if (b >> lane) & 1 and r < limit:
                        write_row(out, out_base + r * rs, cs, uint64(e0 + 32 * k), dv, width)
                row += nb
            base += 32

    def nonzero_tiles(src, mask, p, status, out, count, epoch, tile_base, vec):
        """One tile per block: ``blockDim.x // 32`` warps, each over ``32 * items``
        consecutive elements, 32 at a time (lane i reads element i: coalesced).

        ``p`` is a :data:`~dmlnumba.params.NONZERO_CUDA` block; ``status`` the
        look-back buffer (:mod:`dmlnumba.tile_status`), ``epoch`` this call's
        number on it and ``tile_base`` its first tile-counter value; ``vec`` 1
        where the input is C-contiguous and 16-byte aligned.
        """
        src_base = p[P.src_base]
        ndim = p[P.ndim]
        total = p[P.total]
        items = p[P.items]
        warp_rows = cuda.shared.array(33, int64)
        tile_info = cuda.shared.array(1, int64)
        masks = cuda.shared.array(MAX_MASKS, uint32)
        stage = cuda.shared.array(STAGE_WORDS if staged else 1, uint32)
        coords = cuda.local.array(MAXD, int64)  # the odometer
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        nwarps = cuda.blockDim.x >> 5
        tag = ts.tag_of(epoch)
        # The layout and the write pass's divisors, one copy per block in shared
        # memory: numba zero-fills a cuda.local.array at kernel entry, so local copies
        # cost every thread their size in local-memory stores (docs/PERFORMANCE.md).
        dshape = cuda.shared.array(MAXD, int64)
        dmagic = cuda.shared.array(MAXD, int64)
        dshift = cuda.shared.array(MAXD, int64)
        dstrides = cuda.shared.array(MAXD, int64)
        if tid < ndim:
            dshape[tid] = p[P.shape + tid]
            dmagic[tid] = p[P.magic + tid]
            dshift[tid] = p[P.shift + tid]
            dstrides[tid] = p[P.strides + tid]
        g = (coords, dshape, dstrides, ndim)
        if tid == 0:
            tile_info[0] = ts.take_tile(status, tile_base)
        cuda.syncthreads()
        tile = tile_info[0]
        seg = 32 * items
        e0 = tile * seg * nwarps + warp * seg + lane
        m0 = warp * items

        # 1. Count.
        n = int64(0)
        it = 0
        if vec != 0:
            full = (tile + 1) * seg * nwarps <= total
            n, it = count_vector(
                src, src_base, total, items, mask, masks, m0, e0 - lane + lane * V, full, lane
            )
            n = warp_sum(n)
        e = e0 + it * 32
        unravel(e, dshape, ndim, coords)
        off = src_base + offset(coords, dstrides, ndim)
        n += count_strided(
            src, off, e, coords[ndim - 1], it, items, total, mask, masks, m0, lane, g
        )
        if lane == 0:
            warp_rows[warp] = n
        cuda.syncthreads()

        # 2. Look back: scan the warps, publish the tile's count, learn its first row.
        if tid == 0:
            acc = int64(0)
            for w in range(nwarps):
                c = warp_rows[w]
                warp_rows[w] = acc
                acc += c
            warp_rows[32] = acc
            ts.publish(status, tile, ts.PREFIX if tile == 0 else ts.AGGREGATE, tag, acc)
        excl = ts.look_back(status, tile, tag)
        if tid == 0:
            acc = warp_rows[32]
            if tile != 0:
                ts.publish(status, tile, ts.PREFIX, tag, excl + acc)
            if tile == cuda.gridDim.x - 1:
                count[p[P.count_pos]] = excl + acc
        cuda.syncthreads()

        # 3. Write: staged where the tile is dense (block-uniform).
        width = p[P.width]
        dense = staged and warp_rows[32] * STAGE_OF >= seg * nwarps
        sparse = staged and warp_rows[32] * SPARSE_OF <= seg * nwarps
        write_rows(
            masks,
            m0,
            items,
            excl + warp_rows[warp],
            e0,
            lane,
            (dshape, dmagic, dshift, ndim),
            out,
            (p[P.out_base], p[P.rs], p[P.cs], width),
            p[P.limit],
            stage,
            warp * 32 * width,
            dense,
            sparse,
        )

    return nonzero_tiles
