"""The CUDA nonzero kernel: one pass over the input, rows in ascending element order.

Each block takes the next tile (:func:`~dmlnumba.gpu.tile_status.take_tile`) and
runs three named steps:

1. **count** (:func:`count_vector`, then :func:`count_strided` for what is
   left): each warp reads its ``32 * items`` consecutive elements once, keeps
   one 32-bit ballot mask per 32 of them in shared memory, and counts;
2. **look-back** (:func:`~dmlnumba.gpu.tile_status.look_back`): the block publishes
   its count and learns where its rows start;
3. **write** (:func:`write_rows`, :func:`stage_rows`): each warp writes its
   rows from the kept masks, visiting only the mask words that hold a
   non-zero; a row's coordinates come from its element's position by
   multiplies (:func:`write_row`; in 32 bits where every position is below
   2**31), not an odometer.  A staged kernel (32-bit rows of several columns)
   gathers the rows of tiles that are not sparse in a ring of shared memory
   and stores them 32 rows at a time, in whole sectors.

The count never leaves the device: the block of the last tile writes it.  The
kernel is made per element width (``V`` elements in 16 bytes), a compile-time
constant, so the loops over a vector's elements unroll into registers.
"""

from numba import cuda, int64, uint32, uint64

from ..params import MAXD, copier, size
from ..params import NONZERO_CUDA as P
from . import tile_status as ts
from .indexmath import advance, is_nonzero, offset, unravel
from .warp import (
    all_lanes,
    ballot,
    inline,
    load16,
    shfl_down,
    shfl_idx,
    sync_warp,
    umulhi,
    umulhi32,
    warp_sum,
)

#: Slots of the parameter block, and its copy into shared memory.
PSIZE = size(P)
copy_params = cuda.jit(device=True)(copier(P))
#: Shared ballot masks per block: warps x items.  The host keeps
#: ``(threads // 32) * items`` within this.
MAX_MASKS = 2048
#: Rows each warp of a staged kernel holds in shared memory before storing them
#: (:func:`stage_rows`): a ring of twice the 32 rows it stores at a time.
RING = 64
#: Shared staging words per block of the staged write pass: warps x RING x width.
#: The host allows staging only where ``(threads // 32) * RING * width`` is within this.
STAGE_WORDS = 4096
#: Shared words a warp of the width-1 write pass (:func:`expand_rows`) holds: the
#: rows of 32 full mask words, and a word of padding after every 32.
EXPAND_WARP = 1024 + 32
#: Shared words per block of the width-1 write pass: warps x EXPAND_WARP.  The host
#: takes that pass only where ``(threads // 32) * EXPAND_WARP`` is within this.
EXPAND_WORDS = 8 * EXPAND_WARP
#: A staged kernel's tile whose elements are at most 1 / SPARSE_OF non-zero writes
#: 32 mask words at once, one a lane (the lanes' rows follow each other), instead of
#: word by word with all lanes on one word's rows.
SPARSE_OF = 16
#: 16-byte loads each lane has in flight in the vector count.
VECTOR_LOADS = 4
#: Element loads each lane has in flight in the strided count.
STRIDED_LOADS = 8


def make_nonzero(V, item, narrow=False, staged=0):
    """The nonzero kernel for elements of ``16 // V`` bytes, read as numba type
    ``item`` (the unsigned integer type of that width).  ``narrow``: every element
    position is below 2**31, and the write pass divides in 32 bits (the parameter
    block's ``magic`` then holds :func:`dmlnumba.layout.divisor32`'s).
    ``staged``: 0, or the width (2 to 8) of 32-bit coordinates in contiguous rows
    (row stride the width, column stride 1), compiled in: tiles that are not sparse
    stage their rows in shared memory (:func:`stage_rows`), and every loop over the
    columns unrolls (8-22% faster than the width read at run time on (65536, 64, 64)
    and (64, 64, 256, 256) at 2**28, docs/PERFORMANCE.md).  1, with ``narrow``:
    rows of one column (any row stride and output width), written 32 mask words at
    a time through shared memory (:func:`expand_rows`)."""
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
        """``e // n`` for uint32 ``e`` below 2**31 and :func:`dmlnumba.layout.divisor32`'s
        ``(magic, shift)`` of ``n``: the high word of ``2e * magic``, shifted (all
        in 32 bits, one high multiply)."""
        return uint32(umulhi32(uint32(e << uint32(1)), magic) >> shift)

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
                q32 = divide32(e32, uint32(magic[d]), uint32(shift[d]))
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
    def lowest_bit(x):
        """``(the index of the lowest set bit of the non-zero uint32 x, x without
        it)``: the popcount of that bit and those below it, less one."""
        return cuda.popc(uint32(x ^ (x - uint32(1)))) - 1, uint32(x & (x - uint32(1)))

    @inline
    def counts_below(c, lt):
        """``(the sum of the lanes' counts c below this lane, the sum of all 32)``
        (``lt``: the mask of the lanes below), counts under 64: one ballot per bit of
        a count."""
        below = uint32(0)
        total = uint32(0)
        for t in range(6):
            bt = ballot((c >> t) & 1 != 0)
            below = uint32(below + uint32(cuda.popc(bt & lt) << t))
            total = uint32(total + uint32(cuda.popc(bt) << t))
        return below, total

    @inline
    def next_word(live, bw, base):
        """The first mask word left of the 32 from ``base`` (``live``: bit j set where
        word ``base + j`` holds a non-zero; lane j holds that word in ``bw``):
        ``(live without it, the word, its index)``."""
        j, live = lowest_bit(live)
        return live, shfl_idx(bw, j), base + j

    @inline
    def stage_row(stage, pos, e, inner, dv, width):
        """Write the last ``width`` (at least 2) coordinates of element ``e`` (a
        uint32 position where ``narrow``, else a uint64) at ``stage[pos] ...``, a
        row: as :func:`write_row`, with the two innermost dimensions' shape and
        divisor from registers (``inner``) where ``narrow``."""
        if not narrow:
            write_row(stage, pos, 1, e, dv, width)
            return
        shape, magic, shift, ndim = dv
        n1, m1, l1, n2, m2, l2 = inner
        pos = uint32(pos + uint32(width - 1))
        q = divide32(e, m1, l1)
        stage[pos] = uint32(e - uint32(q * n1))
        pos = uint32(pos - uint32(1))
        e = q
        if width > 2:
            q = divide32(e, m2, l2)
            stage[pos] = uint32(e - uint32(q * n2))
            pos = uint32(pos - uint32(1))
            e = q
            for j in range(2, width - 1):
                d = uint64(ndim - 1 - j)
                q = divide32(e, uint32(magic[d]), uint32(shift[d]))
                stage[pos] = uint32(e - uint32(q * uint32(shape[d])))
                pos = uint32(pos - uint32(1))
                e = q
        stage[pos] = e

    @inline
    def store_run(stage, sb, h, n, row, lane, out, out_base, w, lim):
        """Store ``n`` (at most 32) rows of the warp's ring from its row ``h``, a
        multiple of 32 (rows ``row + h`` on, ``w`` values each): the ring's first or
        second half, so the run does not wrap.  Lane ``i`` takes values ``i, i + 32,
        ...`` of the run: whole 32-byte sectors.  Values at and past ``lim`` (the
        limit's) are not stored."""
        v0 = (row + h) * w  # the run's first value
        m = uint32(n * w)
        src = uint32(sb + uint32(uint32(h & uint32(RING - 1)) * w) + uint32(lane))
        dst = uint64(out_base + v0 + lane)
        if n == 32 and v0 + m <= lim:  # 32 whole rows: w stores a lane, unrolled
            for i in range(w):
                out[dst + uint64(32 * i)] = stage[uint32(src + uint32(32 * i))]
            return
        if v0 + m > lim:  # the limit cuts the run
            m = uint32(lim - v0) if lim > v0 else uint32(0)
        t = uint32(lane)
        while t < m:
            out[dst] = stage[src]
            src = uint32(src + uint32(32))
            dst += uint64(32)
            t = uint32(t + uint32(32))

    @inline
    def stage_rows(wm, dv, out, out_base, width, limit, stage, sb):
        """The write pass of a staged kernel's tile that is not sparse: the warp
        puts each mask word's rows in its ring of :data:`RING` rows of shared
        memory (``stage`` from ``sb``), each lane its own row's coordinates
        (:func:`stage_row`), and stores the ring 32 rows at a time as one run
        (:func:`store_run`): whole sectors, where lanes storing their own rows
        ``width`` words apart write each sector a column at a time.  ``wm``: the
        warp's masks, as :func:`write_rows` takes them.  Ring positions count
        from ``row`` (32 bits: a warp has fewer rows)."""
        masks, m0, items, row, e0, lane = wm
        shape, magic, shift, ndim = dv
        d1 = uint64(ndim - 1)
        d2 = uint64(ndim - 2)
        inner = (
            uint32(shape[d1]),
            uint32(magic[d1]),
            uint32(shift[d1]),
            uint32(shape[d2]),
            uint32(magic[d2]),
            uint32(shift[d2]),
        )
        w = uint32(width)
        lim = limit * w
        lt = uint32((1 << lane) - 1)
        h = uint32(0)  # the first row not stored yet
        f = uint32(0)  # the next row
        base = 0
        while base < items:
            bw = uint32(0)
            if base + lane < items:
                bw = masks[uint64(m0 + base + lane)]
            live = ballot(bw != uint32(0))
            while live != uint32(0):
                live, b, k = next_word(live, bw, base)
                if (b >> lane) & 1:
                    slot = uint32(f + uint32(cuda.popc(b & lt))) & uint32(RING - 1)
                    e = e0 + 32 * k  # this lane's element
                    pos = uint32(sb + uint32(slot * w))
                    stage_row(stage, pos, uint32(e) if narrow else uint64(e), inner, dv, w)
                f = uint32(f + uint32(cuda.popc(b)))
                if uint32(f - h) >= uint32(32):
                    sync_warp()
                    store_run(stage, sb, h, uint32(32), row, lane, out, out_base, w, lim)
                    h = uint32(h + uint32(32))
                    sync_warp()
            base += 32
        sync_warp()
        store_run(stage, sb, h, uint32(f - h), row, lane, out, out_base, w, lim)

    @inline
    def expand_rows(wm, out, out_base, rs, limit, stage, sb):
        """The write pass of rows of one column (the width-1 kernel, positions
        below 2**31): 32 mask words at a time, lane ``i`` expands the positions of
        word ``base + i``'s non-zeros into the warp's part of ``stage`` (from
        ``sb``, 1024 words: 32 full words' rows) at its first row, the counts of
        the words below it (summed by one ballot per bit of a count, as
        :func:`write_rows`'s sparse tiles do); then the warp stores those rows in
        order, lane ``i`` taking rows ``i, i + 32, ...``: coalesced stores.  A
        word costs a few instructions a non-zero instead of :func:`write_rows`'s
        30 or so a word (docs/PERFORMANCE.md).  Row ``t`` sits at ``t + t // 32``:
        lanes whose first rows are 32 apart (full words) write different banks.
        Rows at and past ``limit`` are not stored.  ``wm`` as :func:`write_rows`
        takes it."""
        masks, m0, items, row, e0, lane = wm
        lt = uint32((1 << lane) - 1)
        urs = uint64(rs)
        base = 0
        while base < items:
            bw = uint32(0)
            if base + lane < items:
                bw = masks[uint64(m0 + base + lane)]
            # This lane's first row in the group, and the group's rows.
            r, n = counts_below(cuda.popc(bw), lt)
            ew = uint32(e0 - lane + 32 * (base + lane))  # element 0 of the lane's word
            while bw != uint32(0):
                j, bw = lowest_bit(bw)
                stage[uint32(sb + r + (r >> uint32(5)))] = uint32(ew + uint32(j))
                r = uint32(r + uint32(1))
            sync_warp()
            left = limit - row  # rows the limit still allows
            m = n if left >= n else (uint32(left) if left > 0 else uint32(0))
            dst = uint64(out_base + row * rs)
            t = uint32(lane)
            while t < m:
                out[dst + uint64(t) * urs] = stage[uint32(sb + t + (t >> uint32(5)))]
                t = uint32(t + uint32(32))
            sync_warp()
            row += n
            base += 32

    @inline
    def write_rows(wm, dv, out, ow, limit, sparse):
        """Write this warp's rows from ``row`` on, in element order, from its kept
        masks (``wm``: ``(masks, m0, items, row, e0, lane)``, ``masks[m0 + k]`` for
        ``k < items`` holding elements ``e0 - lane + 32 k`` on).  Lane ``i``
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
        the rows of 32 words."""
        masks, m0, items, row, e0, lane = wm
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
                below, n = counts_below(cuda.popc(bw), lt)
                r = row + below
                row += n
                ew = e0 - lane + 32 * (base + lane)  # element 0 of the lane's word
                while bw != uint32(0):
                    j, bw = lowest_bit(bw)
                    if r < limit:
                        write_row(out, out_base + r * rs, cs, uint64(ew + j), dv, width)
                    r += 1
                base += 32
                continue
            live = ballot(bw != uint32(0))
            while live != uint32(0):
                live, b, k = next_word(live, bw, base)
                r = row + cuda.popc(b & lt)
                if (b >> lane) & 1 and r < limit:
                    write_row(out, out_base + r * rs, cs, uint64(e0 + 32 * k), dv, width)
                row += cuda.popc(b)
            base += 32

    def nonzero_tiles(params, src, mask, status, out, count, vec):
        """One tile per block: ``blockDim.x // 32`` warps, each over ``32 * items``
        consecutive elements, 32 at a time (lane i reads element i: coalesced).

        ``p`` is a :data:`~dmlnumba.params.NONZERO_CUDA` block, passed by value
        (a tuple of kernel parameters: nothing to allocate or upload per call);
        ``status`` the look-back buffer (:mod:`dmlnumba.gpu.tile_status`), zeroed on
        the stream before the launch (unused by a launch of one block); ``vec`` 1
        where the input is C-contiguous and 16-byte aligned.
        """
        # The parameter block, from the kernel's parameters into shared memory:
        # every read of it after that is a plain shared load.
        p = cuda.shared.array(PSIZE, int64)
        if cuda.threadIdx.x == 0:
            copy_params(params, p)
        cuda.syncthreads()
        src_base = p[P.src_base]
        ndim = p[P.ndim]
        total = p[P.total]
        items = p[P.items]
        warp_rows = cuda.shared.array(33, int64)
        tile_info = cuda.shared.array(1, int64)
        masks = cuda.shared.array(MAX_MASKS, uint32)
        stage = cuda.shared.array(
            EXPAND_WORDS if staged == 1 else (STAGE_WORDS if staged else 1), uint32
        )
        coords = cuda.local.array(MAXD, int64)  # the odometer
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        nwarps = cuda.blockDim.x >> 5
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
        if tid == 0:  # one tile (grid of one block): no look-back buffer
            tile_info[0] = 0 if cuda.gridDim.x == 1 else ts.take_tile(status)
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
            if cuda.gridDim.x != 1:
                ts.publish(status, tile, ts.PREFIX if tile == 0 else ts.AGGREGATE, acc)
        excl = ts.look_back(status, tile)  # tile 0's is 0, with no read of the buffer
        if tid == 0:
            acc = warp_rows[32]
            if tile != 0:
                ts.publish(status, tile, ts.PREFIX, excl + acc)
            if tile == cuda.gridDim.x - 1:
                count[p[P.count_pos]] = excl + acc
        cuda.syncthreads()

        # 3. Write: a width-1 kernel's rows 32 words at a time through shared memory;
        # a staged kernel's tile through its warps' rings, unless it is sparse
        # (block-uniform).
        width = staged if staged else p[P.width]  # a staged kernel's width is its own
        sparse = staged > 1 and warp_rows[32] * SPARSE_OF <= seg * nwarps
        dv = (dshape, dmagic, dshift, ndim)
        wm = (masks, m0, items, excl + warp_rows[warp], e0, lane)
        limit = p[P.limit]
        if staged == 1:
            expand_rows(wm, out, p[P.out_base], p[P.rs], limit, stage, warp * EXPAND_WARP)
        elif staged and not sparse:
            stage_rows(wm, dv, out, p[P.out_base], width, limit, stage, warp * RING * width)
        else:
            write_rows(wm, dv, out, (p[P.out_base], p[P.rs], p[P.cs], width), limit, sparse)

    return nonzero_tiles
