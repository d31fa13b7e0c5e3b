"""The CUDA nonzero kernel's count pass (step 1 of :mod:`dmlnumba.gpu.nonzero_kernel`):
each warp reads its ``32 * items`` consecutive elements once, keeps one 32-bit
ballot mask per 32 of them in shared memory, and counts.

Module-level device functions, inlined into the kernel (``forceinline``): the
element width arrives as ``V`` (elements in 16 bytes), a constant at every call
site, so that after inlining the loops over a vector's elements unroll into
registers and the branches on the width fold away.  ``tests/test_gpu_agent.py``
runs each in a small kernel of its own.
"""

from numba import cuda, int64, uint32, uint64

from .indexmath import advance, is_nonzero, offset, unravel
from .warp import agent, all_lanes, ballot, load16, local_array, shfl_down

#: 16-byte loads each lane has in flight in the vector count.
VECTOR_LOADS = 4
#: Element loads each lane has in flight in the strided count.
STRIDED_LOADS = 8


@agent
def word_bits(w, m, V):
    """Bit k set where element k of the 32-bit word ``w`` (elements of ``128 // V``
    bits, 8 or 16) has a bit of the replicated mask ``m`` set, without a branch:
    adding LOW7 (each element's bits but its highest) to an element's low bits
    carries into its top bit exactly when one is set."""
    bits = 128 // V
    e = 32 // bits  # elements in the word
    ones = uint32(0x01010101) if bits == 8 else uint32(0x00010001)
    top = uint32(ones << uint32(bits - 1))
    low7 = uint32(ones * uint32((1 << (bits - 1)) - 1))
    t = (((w & m & low7) + low7) | (w & m)) & top
    y = uint32(t >> uint32(bits - 1))
    # A multiply moves the flags next to each other (no two partial products
    # meet); 32 x 32 -> 64 bits, one wide multiply.
    if e == 4:  # bits 0, 8, 16, 24 to 21..24
        return uint32(uint32((uint64(y) * uint64(0x00204081)) >> uint64(21)) & uint32(0xF))
    # e == 2: bits 0, 16 to 15, 16
    return uint32(uint32((uint64(y) * uint64(0x8001)) >> uint64(15)) & uint32(0x3))


@agent
def lane_bits(a, b, mask, V):
    """The ``V`` elements in 16 bytes ``(a, b)``, one bit each (bit j: element j is
    non-zero)."""
    bits = 128 // V
    if bits == 64:
        return uint32(
            uint32((a & mask) != uint64(0)) + (uint32((b & mask) != uint64(0)) << uint32(1))
        )
    if bits == 32:  # a select per element, no arithmetic
        m = uint32(mask)
        return uint32(
            (uint32(1) if uint32(a) & m else uint32(0))
            | (uint32(2) if uint32(a >> uint64(32)) & m else uint32(0))
            | (uint32(4) if uint32(b) & m else uint32(0))
            | (uint32(8) if uint32(b >> uint64(32)) & m else uint32(0))
        )
    e = 32 // bits
    m = uint32(uint32(mask) * (uint32(0x01010101) if bits == 8 else uint32(0x00010001)))
    # The parts do not overlap: adding them is or-ing them (shift-adds fuse).
    # (numba widens uint32 arithmetic to 64 bits; the casts keep it 32-bit.)
    return uint32(
        word_bits(uint32(a & uint64(0xFFFFFFFF)), m, V)
        + (word_bits(uint32(a >> uint64(32)), m, V) << uint32(e))
        + (word_bits(uint32(b & uint64(0xFFFFFFFF)), m, V) << uint32(2 * e))
        + (word_bits(uint32(b >> uint64(32)), m, V) << uint32(3 * e))
    )


@agent
def gather_word(a, b, mask, V):
    """Each lane's ``V`` bits, gathered from ``32 // V`` neighbouring lanes into
    32-bit mask words (element order) by a shuffle butterfly: lane ``q * (32 // V)``
    returns word ``q`` of the warp's ``32 * V`` elements."""
    x = lane_bits(a, b, mask, V)
    s = 1
    while s < 32 // V:  # constant trip count: unrolled
        x = uint32(x + (uint32(shfl_down(x, s)) << uint32(V * s)))  # disjoint
        s *= 2
    return x


@agent
def keep_words(a, b, loads, mask, masks, i, lane, V):
    """The mask words of ``loads`` 16-byte loads per lane (``a[u], b[u]``), kept at
    ``masks[i]`` on (``V`` words a load); returns the lane's count of their
    non-zeros (lanes ``q * (32 // V)`` count, the others 0)."""
    x = cuda.local.array(VECTOR_LOADS, uint32)
    for u in range(loads):
        x[u] = gather_word(a[u], b[u], mask, V)
    n = int64(0)
    if lane % (32 // V) == 0:  # lane q * W keeps word q of each load
        i += lane // (32 // V)
        for u in range(loads):
            masks[uint64(i + u * V)] = x[u]
            n += cuda.popc(x[u])
    return n


@agent
def load_lane(src, base, ev, total, V):
    """Elements ``ev .. ev + V - 1`` as 16 bytes (two little-endian words), one
    vector load where all are in range, else element by element (zeros past the
    end)."""
    if ev + V <= total:
        return load16(src, base + ev)
    bits = 128 // V
    half = max(V // 2, 1)  # elements in 8 bytes
    a = uint64(0)
    b = uint64(0)
    for j in range(V):
        if ev + j < total:
            v = uint64(src[base + ev + j])
            if j < half:
                a |= v << uint64(bits * j)
            else:
                b |= v << uint64(bits * (j - half))
    return a, b


@agent
def count_vector(src, src_base, total, items, mask, masks, m0, wfirst, full, lane, V):
    """Count pass for a C-contiguous, 16-byte aligned input: each lane loads ``V``
    consecutive elements at once, turns them into ``V`` bits, and a shuffle
    butterfly gathers those into mask words.  Full tiles issue each step's loads a
    step early, so a warp always has loads in flight; the last tile's loads are
    range-checked.  Returns ``(lane's count, steps done)``: the steps left (fewer
    than ``V``) are :func:`count_strided`'s."""
    a = cuda.local.array(VECTOR_LOADS, uint64)
    b = cuda.local.array(VECTOR_LOADS, uint64)
    na = cuda.local.array(VECTOR_LOADS, uint64)
    nb = cuda.local.array(VECTOR_LOADS, uint64)
    step = VECTOR_LOADS * V  # steps of 32 elements per round
    n = int64(0)
    it = 0
    if full and step <= items:
        p = src_base + wfirst
        for u in range(VECTOR_LOADS):
            a[u], b[u] = load16(src, p + u * 32 * V)
        more = True
        while more:
            more = it + 2 * step <= items
            if more:
                p += 32 * step
                for u in range(VECTOR_LOADS):
                    na[u], nb[u] = load16(src, p + u * 32 * V)
            n += keep_words(a, b, VECTOR_LOADS, mask, masks, m0 + it, lane, V)
            it += step
            for u in range(VECTOR_LOADS):
                a[u] = na[u]
                b[u] = nb[u]
    while it + V <= items:  # range-checked, one load at a time
        a[0], b[0] = load_lane(src, src_base, wfirst + it * 32, total, V)
        n += keep_words(a, b, 1, mask, masks, m0 + it, lane, V)
        it += V
    return n, it


@agent
def count_strided(src, off, e, c_last, it, items, total, mask, masks, m0, lane, g, v):
    """Count pass over any layout from step ``it``: lane ``i`` reads element ``e``
    (``32 * step + i`` of the warp's), at ``off``, innermost coordinate ``c_last``.
    ``STRIDED_LOADS`` steps at once where the whole warp is in range and no lane's
    row wraps within them, else one; the odometer (``g``: coords, shape, strides,
    ndim) carries only when a row wraps.  ``v``: the caller's local array of
    ``STRIDED_LOADS`` elements of the input's type.  Returns the lane's share of the
    count (every lane counts whole ballots: the caller takes lane 0's)."""
    coords, shape, strides, ndim = g
    last = ndim - 1
    n_last = shape[last]
    s_last = strides[last]
    bal = local_array(STRIDED_LOADS, uint32)  # (each ballot written before it is read)
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


@agent
def count_transposed(src, src_base, mask, masks, tile, warp, nwarps, lane, g, rows, U, v):
    """Count pass of a tile of ``U`` whole rows (the rows of the last dimension) of an
    input whose next-to-last dimension is contiguous (a transposed matrix): the rows
    ``U * tile`` on lie next to each other in memory, so a load of ``U`` rows at
    ``32 // U`` columns reads whole sectors where :func:`count_strided` reads one
    element a sector.  The block's warps take the tile's 32-column blocks in turn;
    for each, lane ``i + U * k`` loads row ``i``'s columns ``k``, ``k + 32 // U``, ...,
    one ballot a load, and lane ``i`` (below ``U``) gathers row ``i``'s 32 bits from
    the ballots into its mask word, in element order.  Writes every mask word of the
    tile (zero past ``rows``); the caller counts them after a barrier.  ``g``: the
    odometer, shape, strides, ndim; ``v``: a local array of at least ``U`` elements."""
    coords, shape, strides, ndim = g
    last = ndim - 1
    n_last = shape[last]
    s_last = strides[last]
    wpr = n_last >> 5  # mask words a row
    C = 32 // U  # columns a load covers
    q0 = tile * U
    unravel(q0 * n_last, shape, ndim, coords)
    i = lane & (U - 1)
    k = lane // U
    here = q0 + i < rows
    row = src_base + offset(coords, strides, ndim) + i  # rows one element apart
    bal = local_array(STRIDED_LOADS, uint32)  # (each ballot written before it is read)
    # The multiply that gathers a row's C bits of a ballot (U >= C): bits kk * U to
    # top + kk, top = (C - 1) * (U - 1).
    top = (C - 1) * (U - 1)
    spaced = 0
    gather = 0
    for kk in range(C):
        spaced |= 1 << (kk * U)
        gather |= 1 << (top - kk * (U - 1))
    low = (1 << C) - 1
    cb = warp
    while cb < wpr:
        p = row + (cb * 32 + k) * s_last
        for s in range(U):
            if here:
                v[s] = src[p + s * C * s_last]
        for s in range(U):
            bal[s] = ballot(here and is_nonzero(v[s], mask))
        if lane < U:
            w = uint32(0)
            for s in range(U):
                if U >= C:
                    # Bits lane, lane + U, ... of the ballot next to each other by one
                    # multiply (no two partial products meet where U >= C).
                    y = uint64(uint32(bal[s] >> uint32(lane)) & uint32(spaced))
                    b = uint32(uint64(y * uint64(gather)) >> uint64(top)) & uint32(low)
                    w = uint32(w | uint32(b << uint32(s * C)))
                else:
                    for kk in range(C):
                        bit = uint32(uint32(bal[s] >> uint32(kk * U + lane)) & uint32(1))
                        w = uint32(w | uint32(bit << uint32(s * C + kk)))
            masks[uint64(lane * wpr + cb)] = w
        cb += nwarps
