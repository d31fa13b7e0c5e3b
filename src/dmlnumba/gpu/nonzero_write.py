"""The CUDA nonzero kernel's write pass (step 3 of :mod:`dmlnumba.gpu.nonzero_kernel`):
each warp writes its rows, in element order, from the mask words the count pass
kept, visiting only the words that hold a non-zero; a row's coordinates come from
its element's position by multiplies (:func:`write_row`; in 32 bits where
``narrow``: every position below 2**31), not an odometer.

Module-level device functions, inlined into the kernel (``forceinline``): the
kernel's variant (``narrow``, the staged width) arrives as arguments that are
constants at every call site, so the branches on them fold away after inlining.
``tests/test_gpu_agent.py`` runs each write pass in a small kernel of its own.
"""

from numba import cuda, uint32, uint64

from .policy import RING
from .warp import agent, ballot, shfl_idx, sync_warp, umulhi, umulhi32


@agent
def divide(e, magic, shift):
    """``e // n`` (``e`` a uint64) from :func:`dmlnumba.layout.divisor`'s ``(magic,
    shift)`` of ``n``: a multiply, not a division (the same steps as
    :func:`dmlnumba.layout.divide`, which the tests check)."""
    t = umulhi(e, magic)
    s1 = uint64(1) if shift > 0 else uint64(0)
    s2 = uint64(shift - 1) if shift > 0 else uint64(0)
    return (t + ((e - t) >> s1)) >> s2


@agent
def divide32(e, magic, shift):
    """``e // n`` for uint32 ``e`` below 2**31 and :func:`dmlnumba.layout.divisor32`'s
    ``(magic, shift)`` of ``n``: the high word of ``2e * magic``, shifted (all in 32
    bits, one high multiply)."""
    return uint32(umulhi32(uint32(e << uint32(1)), magic) >> shift)


@agent
def write_row(out, pos, cs, e, dv, width, narrow):
    """Write the last ``width`` coordinates of element ``e`` (a uint64, row-major
    position) at ``out[pos]``, ``out[pos + cs]``, ...: innermost first, each the
    remainder of a division by its dimension (``dv``: shape, magic, shift, ndim).
    The first column is what is left (the dimensions before it have size 1).
    ``width`` is at least 1; ``narrow``: divide in 32 bits."""
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


@agent
def lowest_bit(x):
    """``(the index of the lowest set bit of the non-zero uint32 x, x without it)``:
    the popcount of that bit and those below it, less one."""
    return cuda.popc(uint32(x ^ (x - uint32(1)))) - 1, uint32(x & (x - uint32(1)))


@agent
def counts_below(c, lt):
    """``(the sum of the lanes' counts c below this lane, the sum of all 32)``
    (``lt``: the mask of the lanes below), counts under 64: one ballot per bit of a
    count."""
    below = uint32(0)
    total = uint32(0)
    for t in range(6):
        bt = ballot((c >> t) & 1 != 0)
        below = uint32(below + uint32(cuda.popc(bt & lt) << t))
        total = uint32(total + uint32(cuda.popc(bt) << t))
    return below, total


@agent
def next_word(live, bw, base):
    """The first mask word left of the 32 from ``base`` (``live``: bit j set where word
    ``base + j`` holds a non-zero; lane j holds that word in ``bw``): ``(live without
    it, the word, its index)``."""
    j, live = lowest_bit(live)
    return live, shfl_idx(bw, j), base + j


@agent
def stage_row(stage, pos, e, inner, dv, width, narrow):
    """Write the last ``width`` (at least 2) coordinates of element ``e`` (a uint32
    position where ``narrow``, else a uint64) at ``stage[pos] ...``, a row: as
    :func:`write_row`, with the two innermost dimensions' shape and divisor from
    registers (``inner``) where ``narrow``."""
    if not narrow:
        write_row(stage, pos, 1, e, dv, width, narrow)
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


@agent
def store_run(stage, sb, h, n, row, lane, out, out_base, w, lim):
    """Store ``n`` (at most 32) rows of the warp's ring from its row ``h``, a multiple
    of 32 (rows ``row + h`` on, ``w`` values each): the ring's first or second half,
    so the run does not wrap.  Lane ``i`` takes values ``i, i + 32, ...`` of the run:
    whole 32-byte sectors.  Values at and past ``lim`` (the limit's) are not
    stored."""
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


@agent
def stage_rows(wm, dv, out, out_base, width, limit, stage, sb, narrow):
    """The write pass of a staged kernel's tile that is not sparse: the warp puts each
    mask word's rows in its ring of :data:`~dmlnumba.gpu.policy.RING` rows of shared
    memory (``stage`` from ``sb``), each lane its own row's coordinates
    (:func:`stage_row`), and stores the ring 32 rows at a time as one run
    (:func:`store_run`): whole sectors, where lanes storing their own rows ``width``
    words apart write each sector a column at a time.  ``wm``: the warp's masks, as
    :func:`write_rows` takes them.  Ring positions count from ``row`` (32 bits: a
    warp has fewer rows)."""
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
                if narrow:
                    stage_row(stage, pos, uint32(e), inner, dv, w, narrow)
                else:
                    stage_row(stage, pos, uint64(e), inner, dv, w, narrow)
            f = uint32(f + uint32(cuda.popc(b)))
            if uint32(f - h) >= uint32(32):
                sync_warp()
                store_run(stage, sb, h, uint32(32), row, lane, out, out_base, w, lim)
                h = uint32(h + uint32(32))
                sync_warp()
        base += 32
    sync_warp()
    store_run(stage, sb, h, uint32(f - h), row, lane, out, out_base, w, lim)


@agent
def expand_words(wm, base, lt, stage, sb, group):
    """Lane ``i`` (below ``group``) expands the positions of the non-zeros of mask word
    ``base + i`` into ``stage`` from ``sb``, at its first row: the counts of the words
    below it (summed by one ballot per bit of a count, as :func:`write_rows`'s sparse
    tiles do); position ``t`` sits at ``t + t // 32``, so that lanes whose first rows
    are 32 apart (full words) write different banks.  Returns the group's non-zeros,
    after a warp barrier.  ``wm`` as :func:`write_rows` takes it; ``lt`` the mask of
    the lanes below this one."""
    masks, m0, items, row, e0, lane = wm
    bw = uint32(0)
    if lane < group and base + lane < items:
        bw = masks[uint64(m0 + base + lane)]
    r, n = counts_below(cuda.popc(bw), lt)
    ew = uint32(e0 - lane + 32 * (base + lane))  # element 0 of the lane's word
    while bw != uint32(0):
        j, bw = lowest_bit(bw)
        stage[uint32(sb + r + (r >> uint32(5)))] = uint32(ew + uint32(j))
        r = uint32(r + uint32(1))
    sync_warp()
    return n


@agent
def expand_coords(wm, dv, out, out_base, width, limit, stage, sb, group):
    """The write pass of a staged kernel's tile (packed rows of ``width`` 32-bit
    coordinates, positions below 2**31) that is not sparse: ``group`` (32 or 16) mask
    words at a time, lane ``i`` expands the positions of word ``base + i``'s non-zeros
    into the warp's part of ``stage`` (``33 * group`` words from ``sb``, as
    :func:`expand_rows` does), then lane ``t`` turns positions ``t, t + 32, ...`` into
    their rows (a division per column, every lane busy) and stores them.  ``wm`` as
    :func:`write_rows` takes it."""
    masks, m0, items, row, e0, lane = wm
    shape, magic, shift, ndim = dv
    d1 = uint64(ndim - 1)
    d2 = uint64(ndim - 2)
    n1, m1, l1 = uint32(shape[d1]), uint32(magic[d1]), uint32(shift[d1])
    n2, m2, l2 = uint32(shape[d2]), uint32(magic[d2]), uint32(shift[d2])
    w = uint64(width)
    lt = uint32((1 << lane) - 1)
    base = 0
    while base < items:
        n = expand_words(wm, base, lt, stage, sb, group)
        left = limit - row  # rows the limit still allows
        m = n if left >= n else (uint32(left) if left > 0 else uint32(0))
        t = uint32(lane)
        while t < m:
            e = stage[uint32(sb + t + (t >> uint32(5)))]
            pos = uint64(out_base + (row + t) * w + w - uint64(1))
            q = divide32(e, m1, l1)
            out[pos] = uint32(e - uint32(q * n1))
            pos -= uint64(1)
            e = q
            if width > 2:
                q = divide32(e, m2, l2)
                out[pos] = uint32(e - uint32(q * n2))
                pos -= uint64(1)
                e = q
                for jj in range(2, width - 1):
                    d = uint64(ndim - 1 - jj)
                    q = divide32(e, uint32(magic[d]), uint32(shift[d]))
                    out[pos] = uint32(e - uint32(q * uint32(shape[d])))
                    pos -= uint64(1)
                    e = q
            out[pos] = e
            t = uint32(t + uint32(32))
        sync_warp()
        row += n
        base += group


@agent
def expand_rows(wm, out, out_base, rs, limit, stage, sb):
    """The write pass of rows of one column (the width-1 kernel, positions below
    2**31): 32 mask words at a time, lane ``i`` expands the positions of word
    ``base + i``'s non-zeros into the warp's part of ``stage`` (from ``sb``, 1024
    words: 32 full words' rows) at its first row, the counts of the words below it
    (summed by one ballot per bit of a count, as :func:`write_rows`'s sparse tiles
    do); then the warp stores those rows in order, lane ``i`` taking rows ``i, i +
    32, ...``: coalesced stores.  A word costs a few instructions a non-zero instead
    of :func:`write_rows`'s 30 or so a word (docs/PERFORMANCE.md).  Row ``t`` sits at
    ``t + t // 32``: lanes whose first rows are 32 apart (full words) write
    different banks.  Rows at and past ``limit`` are not stored.  ``wm`` as
    :func:`write_rows` takes it."""
    masks, m0, items, row, e0, lane = wm
    lt = uint32((1 << lane) - 1)
    urs = uint64(rs)
    base = 0
    while base < items:
        n = expand_words(wm, base, lt, stage, sb, 32)
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


@agent
def write_rows(wm, dv, out, ow, limit, sparse, narrow):
    """Write this warp's rows from ``row`` on, in element order, from its kept masks
    (``wm``: ``(masks, m0, items, row, e0, lane)``, ``masks[m0 + k]`` for ``k <
    items`` holding elements ``e0 - lane + 32 k`` on).  Lane ``i`` reads word ``base
    + i`` of the next 32, and one ballot says which of them hold non-zeros: the warp
    visits those words only (at 1% density, about 3 in 4 are empty).  A lane with a
    non-zero computes its coordinates from its element's position
    (:func:`write_row`): no odometer, no state from one word to the next.  Rows at
    and past ``limit`` are not written (none where the width is 0: ``limit`` is then
    0).  ``ow``: the output's base, row and column strides, and width.

    ``sparse`` (a tile of a staged kernel with at most 1 / SPARSE_OF of its elements
    non-zero): the warp takes 32 words at once, lane ``i`` writing the rows of word
    ``base + i`` (a lane's first row: the counts of the words below it, summed by
    one ballot per bit), instead of one word at a time; at 1-5% density, most words
    hold at most one non-zero, so one step writes the rows of 32 words."""
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
                    write_row(out, out_base + r * rs, cs, uint64(ew + j), dv, width, narrow)
                r += 1
            base += 32
            continue
        live = ballot(bw != uint32(0))
        while live != uint32(0):
            live, b, k = next_word(live, bw, base)
            r = row + cuda.popc(b & lt)
            if (b >> lane) & 1 and r < limit:
                write_row(out, out_base + r * rs, cs, uint64(e0 + 32 * k), dv, width, narrow)
            row += cuda.popc(b)
        base += 32
