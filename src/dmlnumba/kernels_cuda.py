"""CUDA kernels: the shared index math compiled by ``numba.cuda.jit(device=True)``.

Imported on the first CUDA call only.  Kernels compile lazily, once per bit
width, and are cached on disk.  Shapes and strides travel as fixed 8-tuples (by
value, in the launch's parameter buffer: no host-to-device copy), so one
specialization serves every rank.  All indexing is 64-bit.

nonzero is one pass over the input with a decoupled look-back scan (Merrill and
Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back", 2016):
each block takes the next tile through an atomic counter, counts its non-zeros
with warp ballots, publishes its count, and adds up its predecessors' published
counts (stopping at the first inclusive prefix) to learn where its rows start.
The rows come out in ascending element order with no sort and no second pass
over global memory, and the count never leaves the device.
"""

import numpy as np
from numba import config as _nbconfig
from numba import cuda, int32, int64, uint32, uint64

from . import config
from . import indexmath as _im
from .device_arrays import core_stream

SIM = bool(getattr(_nbconfig, "ENABLE_CUDASIM", False))

_device = cuda.jit(device=True, cache=not SIM)
unravel = _device(_im.unravel)
next_row = _device(_im.next_row)
offset = _device(_im.offset)
is_nonzero = _device(_im.is_nonzero)
write_coordinates = _device(_im.write_coordinates)
advance = _device(_im.advance)

MAXD = 8
FULL = 0xFFFFFFFF
# Look-back status words (all uint64, so that numba never mixes signed and
# unsigned 64-bit integers): 2 flag bits, a 22-bit epoch (the call's number, so
# that words left by earlier calls read as "not ready" and the scratch needs no
# zeroing between calls), then a 40-bit count.
FLAG_SHIFT = np.uint64(62)
EPOCH_SHIFT = np.uint64(40)
EPOCH_BITS = 22
EPOCH_MASK = np.uint64((1 << EPOCH_BITS) - 1)
VALUE_BITS = 40
VALUE_MASK = np.uint64((1 << VALUE_BITS) - 1)
AGGREGATE = np.uint64(1)
PREFIX = np.uint64(2)
AGGREGATE_BITS = np.uint64(1 << 62)
PREFIX_BITS = np.uint64(2 << 62)
#: Shared words the simulator's ballot needs (none on a GPU, which votes in hardware).
BALLOT_SCRATCH = 1024 if SIM else 1


if SIM:
    # The simulator has no warp votes: the same ballot through shared memory.
    @cuda.jit(device=True)
    def ballot(flag, scratch, tid):
        scratch[tid] = 1 if flag else 0
        cuda.syncthreads()
        base = tid - (tid & 31)
        m = 0
        for i in range(32):
            if scratch[base + i]:
                m |= 1 << i
        cuda.syncthreads()
        return m

    @cuda.jit(device=True)
    def warp_all(flag):
        # Block-wide here (the simulator's ballot is): a stricter, still uniform vote.
        return cuda.syncthreads_and(1 if flag else 0) != 0
else:

    @cuda.jit(device=True, cache=True)
    def ballot(flag, scratch, tid):
        return cuda.ballot_sync(FULL, flag)

    @cuda.jit(device=True, cache=True)
    def warp_all(flag):
        return cuda.all_sync(FULL, flag)


if SIM:
    # The simulator has no shuffles either: the same through shared memory.
    @cuda.jit(device=True)
    def shfl_down(x, d, scratch, tid):
        scratch[tid] = x
        cuda.syncthreads()
        lane = tid & 31
        r = scratch[tid + d] if lane + d < 32 else x
        cuda.syncthreads()
        return r

    @cuda.jit(device=True)
    def warp_sum(x, scratch, tid):
        scratch[tid] = x
        cuda.syncthreads()
        base = tid - (tid & 31)
        t = 0
        for i in range(32):
            t += scratch[base + i]
        cuda.syncthreads()
        return t
else:

    @cuda.jit(device=True, cache=True)
    def shfl_down(x, d, scratch, tid):
        return uint32(cuda.shfl_down_sync(FULL, int32(x), d))

    @cuda.jit(device=True, cache=True)
    def warp_sum(x, scratch, tid):
        x = int32(x)
        for d in (16, 8, 4, 2, 1):
            x += cuda.shfl_xor_sync(FULL, x, d)
        return int64(x)


if SIM:

    @cuda.jit(device=True)
    def word_at(word, k, masks, i):
        """Lane ``k``'s ``word`` (which is ``masks[i]``): read back from shared memory."""
        return masks[i]
else:

    @cuda.jit(device=True, cache=True)
    def word_at(word, k, masks, i):
        """Lane ``k``'s ``word`` (which is ``masks[i]``): one shuffle, no address
        arithmetic."""
        return uint32(cuda.shfl_sync(FULL, int32(word), int32(k)))


if SIM:

    @cuda.jit(device=True)
    def pause(ns):

        pass
else:

    @cuda.jit(device=True, cache=True)
    def pause(ns):
        cuda.nanosleep(uint32(ns))


#: Device functions made inside a kernel factory (compiled into the kernel,
#: which is what the disk cache keeps).
_device_nc = cuda.jit(device=True)

if SIM:

    def load16(src, i):
        """16 bytes from element ``i`` on: two little-endian 64-bit words."""
        w = src.itemsize
        a = b = 0
        for j in range(16 // w):
            v = int(src[i + j]) << (8 * ((j * w) % 8))
            if j * w < 8:
                a |= v
            else:
                b |= v
        return np.uint64(a), np.uint64(b)
else:
    from llvmlite import ir as _ir
    from numba import types as _types
    from numba.cuda.extending import intrinsic as _intrinsic

    @_intrinsic
    def load16(typingctx, ptr, idx):
        """16 bytes from element ``idx`` of ``ptr`` on, in one vector load
        (``ld.global.v2.u64``; the address must be 16-byte aligned): two
        little-endian 64-bit words."""
        sig = _types.UniTuple(_types.uint64, 2)(ptr, idx)

        def codegen(context, builder, signature, args):
            p, i = args
            vty = _ir.VectorType(_ir.IntType(64), 2)
            v = builder.load(builder.bitcast(builder.gep(p, [i]), vty.as_pointer()), align=16)
            words = [builder.extract_element(v, _ir.Constant(_ir.IntType(32), k)) for k in range(2)]
            return context.make_tuple(builder, signature.return_type, words)

        return sig, codegen


# Slots of the scalars after the geometry rows in a parameter block.
SLICE_SCALARS = 3 * MAXD  # src_base, dst_base, ndim, seg, nseg, rows, nrows, ntiles
NZ_SCALARS = 2 * MAXD  # src_base, ndim, total, items, out_base, rs, cs, width, count_pos,
# window, backoff, limit (rows of out)


def _slice_copy(src, dst, geom):
    """Strided copy, tiled as (``nrows`` consecutive rows of the outer dimensions,
    segment of ``seg`` elements of the inner one).

    ``blockDim.y`` tiles per block, ``blockDim.x`` threads across a row segment:
    consecutive threads copy consecutive elements.  A tile locates its first row
    by division once, then steps to the next rows with an odometer.
    """
    k = SLICE_SCALARS
    src_base = geom[k]
    dst_base = geom[k + 1]
    ndim = geom[k + 2]
    seg = geom[k + 3]
    nseg = geom[k + 4]
    rows = geom[k + 5]
    nrows = geom[k + 6]
    ntiles = geom[k + 7]
    coords = cuda.local.array(MAXD, int64)
    shape = cuda.local.array(MAXD, int64)
    sst = cuda.local.array(MAXD, int64)
    dstr = cuda.local.array(MAXD, int64)
    for d in range(ndim):
        shape[d] = geom[d]
        sst[d] = geom[MAXD + d]
        dstr[d] = geom[2 * MAXD + d]
    last = ndim - 1
    inner = shape[last]
    ss = sst[last]
    ds = dstr[last]
    tile = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    step = cuda.gridDim.x * cuda.blockDim.y
    while tile < ntiles:
        group = tile // nseg
        j0 = (tile - group * nseg) * seg + cuda.threadIdx.x
        end = min((tile - group * nseg) * seg + seg, inner)
        r = group * nrows
        r_end = min(r + nrows, rows)
        unravel(r, shape, last, coords)
        while r < r_end:
            s = src_base + offset(coords, sst, last)
            d = dst_base + offset(coords, dstr, last)
            j = j0
            bx = cuda.blockDim.x
            while j + 7 * bx < end:  # eight independent loads in flight
                a0 = src[s + j * ss]
                a1 = src[s + (j + bx) * ss]
                a2 = src[s + (j + 2 * bx) * ss]
                a3 = src[s + (j + 3 * bx) * ss]
                a4 = src[s + (j + 4 * bx) * ss]
                a5 = src[s + (j + 5 * bx) * ss]
                a6 = src[s + (j + 6 * bx) * ss]
                a7 = src[s + (j + 7 * bx) * ss]
                dst[d + j * ds] = a0
                dst[d + (j + bx) * ds] = a1
                dst[d + (j + 2 * bx) * ds] = a2
                dst[d + (j + 3 * bx) * ds] = a3
                dst[d + (j + 4 * bx) * ds] = a4
                dst[d + (j + 5 * bx) * ds] = a5
                dst[d + (j + 6 * bx) * ds] = a6
                dst[d + (j + 7 * bx) * ds] = a7
                j += 8 * bx
            while j + 3 * bx < end:  # four
                a0 = src[s + j * ss]
                a1 = src[s + (j + bx) * ss]
                a2 = src[s + (j + 2 * bx) * ss]
                a3 = src[s + (j + 3 * bx) * ss]
                dst[d + j * ds] = a0
                dst[d + (j + bx) * ds] = a1
                dst[d + (j + 2 * bx) * ds] = a2
                dst[d + (j + 3 * bx) * ds] = a3
                j += 4 * bx
            while j < end:
                dst[d + j * ds] = src[s + j * ss]
                j += bx
            next_row(coords, shape, ndim)
            r += 1
        tile += step


#: Shared ballot masks per block: warps x items.  The target keeps
#: ``(threads // 32) * items`` within this.
MAX_MASKS = 2048


def make_nonzero(V):
    """The nonzero kernel for inputs of ``16 // V``-byte elements.

    ``V`` (elements in 16 bytes) is a compile-time constant of each kernel, so
    the vector path's loops over element positions unroll into registers.
    """
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

    @_device_nc
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

    @_device_nc
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

    @_device_nc
    def gather_word(a, b, mask, scratch, tid):
        """Each lane's ``V`` bits, gathered from ``W`` neighbouring lanes into
        32-bit mask words (element order) by a shuffle butterfly: lane ``q * W``
        returns word ``q`` of the warp's ``32 * V`` elements."""
        x = lane_bits(a, b, mask)
        s = 1
        while s < W:  # constant trip count: unrolled
            x = uint32(x + (uint32(shfl_down(x, s, scratch, tid)) << uint32(V * s)))  # disjoint
            s *= 2
        return x

    @_device_nc
    def store_step(a0, b0, a1, b1, a2, b2, a3, b3, mask, scratch, tid, masks, i):
        """Four loads' mask words (``4 V`` of them, from ``masks[i]`` on); returns
        the lane's count of their non-zeros (lanes ``q * W`` count, others 0)."""
        x0 = gather_word(a0, b0, mask, scratch, tid)
        x1 = gather_word(a1, b1, mask, scratch, tid)
        x2 = gather_word(a2, b2, mask, scratch, tid)
        x3 = gather_word(a3, b3, mask, scratch, tid)
        lane = tid & 31
        if lane % W == 0:  # lane q * W stores word q of each load
            i += uint64(lane // W)
            masks[i] = x0
            masks[i + uint64(V)] = x1
            masks[i + uint64(2 * V)] = x2
            masks[i + uint64(3 * V)] = x3
            return int64(cuda.popc(x0) + cuda.popc(x1) + cuda.popc(x2) + cuda.popc(x3))
        return int64(0)

    @_device_nc
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

    def _nonzero_tiles(src, mask, geom, status, out, count, epoch, tile_base, vec):
        """One tile per block: ``blockDim.x // 32`` warps, each over ``32 * items``
        consecutive elements, 32 at a time (lane i reads element i: coalesced).

        The input is read once: the count pass keeps each step's warp ballot in
        shared memory, and the write pass works from those masks.  The innermost
        coordinate lives in a register; the odometer (with its divisions) runs only
        when a row wraps.  ``status[0]`` is a tile counter that is never reset: this
        call's tiles are its values ``tile_base``, ``tile_base + 1``, ...; then come
        one look-back word per tile, tagged with ``epoch`` (words of other calls do
        not count).  The block that takes the last tile writes the count.
        """
        k = NZ_SCALARS
        src_base = geom[k]
        ndim = geom[k + 1]
        total = geom[k + 2]
        items = geom[k + 3]
        out_base = geom[k + 4]
        rs = geom[k + 5]
        cs = geom[k + 6]
        width = geom[k + 7]
        count_pos = geom[k + 8]
        window = min(geom[k + 9], cuda.blockDim.x)  # tiles read per look-back round
        backoff = geom[k + 10]  # ns to wait after a round that found no tile ready
        limit = geom[k + 11]  # rows ``out`` holds: rows at and past it are not written
        warp_rows = cuda.shared.array(33, int64)
        tile_info = cuda.shared.array(2, int64)
        look = cuda.shared.array(5, int64)
        wsum = cuda.shared.array(32, int64)
        masks = cuda.shared.array(MAX_MASKS, uint32)
        scratch = cuda.shared.array(BALLOT_SCRATCH, uint32)
        coords = cuda.local.array(MAXD, int64)
        shape = cuda.local.array(MAXD, int64)
        strides = cuda.local.array(MAXD, int64)
        for d in range(ndim):
            shape[d] = geom[d]
            strides[d] = geom[MAXD + d]
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        nwarps = cuda.blockDim.x >> 5
        ntiles = cuda.gridDim.x
        tag = (uint64(epoch) & EPOCH_MASK) << EPOCH_SHIFT
        if tid == 0:
            tile_info[0] = int64(cuda.atomic.add(status, 0, uint64(1)) - uint64(tile_base))
        cuda.syncthreads()
        tile = int64(tile_info[0])
        seg = 32 * items
        e0 = tile * seg * nwarps + warp * seg + lane
        lt = uint32((1 << lane) - 1)
        last = ndim - 1
        n_last = shape[last]
        s_last = strides[last]
        m0 = warp * items

        # Count this warp's non-zeros; keep the ballots.
        n = 0
        it = 0
        if vec != 0:
            # A C-contiguous input whose first element is 16-byte aligned: each
            # lane loads V consecutive elements at once (four loads a step),
            # turns them into V bits, and a shuffle butterfly gathers those bits
            # into 32-element mask words (element order).  Full tiles skip the
            # range checks and issue each step's loads a step early.
            wfirst = e0 - lane + lane * V
            full = (tile + 1) * seg * nwarps <= total
            nl = 0
            if full and it + 4 * V <= items:
                # Full tiles: the next step's loads are issued before this step's
                # arithmetic, so a warp always has loads in flight.
                p = src_base + wfirst
                a0, b0 = load16(src, p)
                a1, b1 = load16(src, p + 32 * V)
                a2, b2 = load16(src, p + 64 * V)
                a3, b3 = load16(src, p + 96 * V)
                more = True
                while more:
                    more = it + 8 * V <= items
                    c0 = d0 = c1 = d1 = c2 = d2 = c3 = d3 = uint64(0)
                    if more:
                        p += 128 * V
                        c0, d0 = load16(src, p)
                        c1, d1 = load16(src, p + 32 * V)
                        c2, d2 = load16(src, p + 64 * V)
                        c3, d3 = load16(src, p + 96 * V)
                    nl += store_step(
                        a0, b0, a1, b1, a2, b2, a3, b3, mask, scratch, tid, masks, uint64(m0 + it)
                    )
                    it += 4 * V
                    a0, b0, a1, b1, a2, b2, a3, b3 = c0, d0, c1, d1, c2, d2, c3, d3
            while it + 4 * V <= items:  # the last tile: range-checked loads
                p = wfirst + it * 32
                a0, b0 = load_lane(src, src_base, p, total)
                a1, b1 = load_lane(src, src_base, p + 32 * V, total)
                a2, b2 = load_lane(src, src_base, p + 64 * V, total)
                a3, b3 = load_lane(src, src_base, p + 96 * V, total)
                nl += store_step(
                    a0, b0, a1, b1, a2, b2, a3, b3, mask, scratch, tid, masks, uint64(m0 + it)
                )
                it += 4 * V
            while it + V <= items:
                a0, b0 = load_lane(src, src_base, wfirst + it * 32, total)
                x0 = gather_word(a0, b0, mask, scratch, tid)
                if lane % W == 0:
                    masks[uint64(m0 + it + lane // W)] = x0
                    nl += int64(cuda.popc(x0))
                it += V
            n = warp_sum(nl, scratch, tid)
        e = e0 + it * 32
        unravel(e, shape, ndim, coords)
        off = src_base + offset(coords, strides, ndim)
        c_last = coords[last]
        while it < items:
            # Eight or four steps at once (as many loads in flight) where the whole
            # warp is in range and no lane's row wraps within them: a warp vote
            # (block-wide under the simulator, whose ballot is block-wide too).
            if warp_all(it + 8 <= items and e + 224 < total and c_last + 224 < n_last):
                # Eight steps at once where that holds for the whole warp.
                v0 = src[off]
                v1 = src[off + 32 * s_last]
                v2 = src[off + 64 * s_last]
                v3 = src[off + 96 * s_last]
                v4 = src[off + 128 * s_last]
                v5 = src[off + 160 * s_last]
                v6 = src[off + 192 * s_last]
                v7 = src[off + 224 * s_last]
                b0 = uint32(ballot(is_nonzero(v0, mask), scratch, tid))
                b1 = uint32(ballot(is_nonzero(v1, mask), scratch, tid))
                b2 = uint32(ballot(is_nonzero(v2, mask), scratch, tid))
                b3 = uint32(ballot(is_nonzero(v3, mask), scratch, tid))
                b4 = uint32(ballot(is_nonzero(v4, mask), scratch, tid))
                b5 = uint32(ballot(is_nonzero(v5, mask), scratch, tid))
                b6 = uint32(ballot(is_nonzero(v6, mask), scratch, tid))
                b7 = uint32(ballot(is_nonzero(v7, mask), scratch, tid))
                if lane == 0:
                    masks[m0 + it] = b0
                    masks[m0 + it + 1] = b1
                    masks[m0 + it + 2] = b2
                    masks[m0 + it + 3] = b3
                    masks[m0 + it + 4] = b4
                    masks[m0 + it + 5] = b5
                    masks[m0 + it + 6] = b6
                    masks[m0 + it + 7] = b7
                n += (
                    cuda.popc(b0)
                    + cuda.popc(b1)
                    + cuda.popc(b2)
                    + cuda.popc(b3)
                    + cuda.popc(b4)
                    + cuda.popc(b5)
                    + cuda.popc(b6)
                    + cuda.popc(b7)
                )
                it += 8
                e += 256
                c_last += 256
                off += 256 * s_last
            elif warp_all(it + 4 <= items and e + 96 < total and c_last + 96 < n_last):
                v0 = src[off]
                v1 = src[off + 32 * s_last]
                v2 = src[off + 64 * s_last]
                v3 = src[off + 96 * s_last]
                b0 = uint32(ballot(is_nonzero(v0, mask), scratch, tid))
                b1 = uint32(ballot(is_nonzero(v1, mask), scratch, tid))
                b2 = uint32(ballot(is_nonzero(v2, mask), scratch, tid))
                b3 = uint32(ballot(is_nonzero(v3, mask), scratch, tid))
                if lane == 0:
                    masks[m0 + it] = b0
                    masks[m0 + it + 1] = b1
                    masks[m0 + it + 2] = b2
                    masks[m0 + it + 3] = b3
                n += cuda.popc(b0) + cuda.popc(b1) + cuda.popc(b2) + cuda.popc(b3)
                it += 4
                e += 128
                c_last += 128
                off += 128 * s_last
            else:
                flag = False
                if e < total:
                    flag = is_nonzero(src[off], mask)
                b = uint32(ballot(flag, scratch, tid))
                if lane == 0:
                    masks[m0 + it] = b
                n += cuda.popc(b)
                it += 1
                e += 32
                c_last += 32
                off += 32 * s_last
            if c_last >= n_last:  # a row wrapped: let the odometer carry from the last step
                coords[last] = c_last - 32
                off = advance(coords, shape, strides, ndim, 32, off - 32 * s_last)
                c_last = coords[last]
        if lane == 0:
            warp_rows[warp] = n
        cuda.syncthreads()

        # Scan the warps, publish this tile's count, then look back ``window`` tiles
        # at a time: thread i < window reads the status of tile (p - i); shared-memory
        # atomics find the window's first non-aggregate and add up the window to the
        # nearest inclusive prefix (per warp, then across warps).  The loop is
        # block-uniform (its state lives in shared memory), so every thread meets the
        # same barriers.
        if tid == 0:
            acc = int64(0)
            for w in range(nwarps):
                c = warp_rows[w]
                warp_rows[w] = acc
                acc += c
                wsum[w] = 0
            warp_rows[32] = acc
            if tile == 0:
                cuda.atomic.exch(status, 1, PREFIX_BITS | tag | uint64(acc))
            else:
                cuda.atomic.exch(status, tile + 1, AGGREGATE_BITS | tag | uint64(acc))
            look[0] = 0  # exclusive prefix so far
            look[1] = tile - 1  # newest tile of the next window
            look[2] = 1 if tile == 0 else 0  # done
            look[3] = window  # first thread of a window whose tile is not an aggregate
        cuda.syncthreads()
        while look[2] == 0:
            q = look[1] - tid
            word = PREFIX_BITS  # before tile 0: an inclusive prefix of 0
            flag = uint64(3)  # past the window: neither kind, ends nothing
            if tid < window:
                if q >= 0:
                    word = cuda.atomic.add(status, q + 1, uint64(0))
                    if (word & (EPOCH_MASK << EPOCH_SHIFT)) != tag:
                        word = uint64(0)  # another call's word: not ready
                flag = word >> FLAG_SHIFT
                if flag != AGGREGATE:  # the first such thread ends the window
                    cuda.atomic.min(look, 3, int64(tid))
            cuda.syncthreads()
            stop = look[3]
            if tid < stop or (tid == stop and flag == PREFIX):
                cuda.atomic.add(wsum, warp, int64(word & VALUE_MASK))
            if tid == stop:
                look[4] = 1 if flag == PREFIX else 0
            cuda.syncthreads()
            if tid == 0:
                for w in range(nwarps):
                    look[0] += wsum[w]
                    wsum[w] = 0
                if stop < window and look[4] == 1:
                    look[2] = 1
                else:
                    look[1] -= stop  # past the aggregates; a tile not ready is read again
                    if stop == 0 and backoff > 0:
                        pause(backoff)  # the newest tile is not ready: let others issue
                look[3] = window
            cuda.syncthreads()
        if tid == 0:
            excl = look[0]
            acc = warp_rows[32]
            if tile != 0:
                cuda.atomic.exch(status, tile + 1, PREFIX_BITS | tag | uint64(excl + acc))
            tile_info[1] = excl
            if tile == ntiles - 1:
                count[count_pos] = excl + acc
        cuda.syncthreads()

        # Write this warp's rows, in element order, from the kept ballots.  Lane i
        # reads word ``base + i`` of the next 32 and one ballot says which of them
        # hold non-zeros: the warp visits those words only (at 1% density, about
        # 3 in 4 words are empty).
        row = tile_info[1] + warp_rows[warp]
        unravel(e0, shape, ndim, coords)
        c0 = coords[last]
        c_last = c0
        # No lane's row wraps within the warp's elements (always so for 1-d inputs):
        # word k's innermost coordinate is then c0 + 32 k, with no odometer.
        flat = warp_all(c0 + 32 * (items - 1) < n_last)
        at = 0  # else: the word (from m0) that the odometer stands at
        base = 0
        while base < items:
            bw = uint32(0)
            if base + lane < items:
                bw = masks[uint64(m0 + base + lane)]
            live = uint32(ballot(bw != uint32(0), scratch, tid))
            while live != uint32(0):
                # The first word left: its bit and those below it, then cleared.
                k = base + cuda.popc(uint32(live ^ (live - uint32(1)))) - 1
                live = uint32(live & (live - uint32(1)))
                b = word_at(bw, k - base, masks, uint64(m0 + k))
                if flat:
                    c_last = c0 + 32 * k
                else:
                    step = (k - at) * 32
                    at = k
                    c_last += step
                    if c_last >= n_last:  # rows wrapped: let the odometer carry
                        coords[last] = c_last - step
                        advance(coords, shape, strides, ndim, step, 0)
                        c_last = coords[last]
                r = row + cuda.popc(b & lt)
                if (b >> lane) & 1 and r < limit:
                    if width == 1:  # the common case, without the column loop
                        out[out_base + r * rs] = c_last
                    else:
                        write_coordinates(out, out_base + r * rs, cs, coords, ndim, width, c_last)
                row += cuda.popc(b)
            base += 32

    return _nonzero_tiles


def pack_params(rows, scalars):
    """One int64 parameter block: the geometry rows (shape, strides, ...), each
    padded to 8, then the scalars."""
    g = np.zeros(MAXD * len(rows) + len(scalars), np.int64)
    for i, r in enumerate(rows):
        g[i * MAXD : i * MAXD + len(r)] = r
    g[MAXD * len(rows) :] = scalars
    return g


_UINT = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}
_kernels = {}


def _signature(name, src_bits, out_bits):
    from numba import types as t

    u = getattr(t, _UINT[src_bits // 8])
    p = t.CPointer
    if name == "slice":
        args = (p(u), p(u), p(t.int64))
    else:
        o = getattr(t, _UINT[out_bits // 8])
        args = (p(u), t.uint64, p(t.int64), t.uint64[::1], p(o), p(o), t.uint64, t.uint64, t.uint64)
    return t.void(*args)


def kernel(name, src_bits, out_bits=0):
    """The compiled kernel for these bit widths, built on first use.

    On a GPU: compiled for raw device pointers (``CPointer`` arguments), so that a
    launch passes plain integers; launched by :func:`launch`.  Under the simulator:
    the same Python function as an ordinary kernel over arrays."""
    regs = config.CUDA_NONZERO_MAX_REGISTERS if name == "nonzero" else 0
    key = (name, src_bits, out_bits, regs)
    k = _kernels.get(key)
    if k is None:
        fn = _slice_copy if name == "slice" else make_nonzero(128 // src_bits)
        if SIM:
            k = cuda.jit(fn)
        else:
            sig = _signature(name, src_bits, out_bits)
            opts = {"max_registers": regs} if regs else {}
            disp = cuda.jit(sig, cache=True, **opts)(fn)
            k = disp.overloads[sig.args]
        _kernels[key] = k
    return k


_configs = {}
_functions = {}


def array_arg(ptr, n, itemsize):
    """The launch arguments of a 1-d C-contiguous array parameter (numba's ABI:
    meminfo, parent, size, itemsize, data, shape, strides)."""
    return (0, 0, n, itemsize, ptr, n, itemsize)


def launch(k, grid, block, stream, args, ctx=0):
    """Launch ``k`` (on a GPU: with ``args`` already flat, pointer-sized integers)
    through cuda.core directly: no per-call argument typing, and the launch
    configuration and the function handle (per context ``ctx``) are cached."""
    if SIM:
        k[grid, block, stream](*args)
        return
    if not isinstance(block, tuple):
        block = (block, 1, 1)
    elif len(block) == 2:
        block = block + (1,)
    key = (grid, block)
    cfg = _configs.get(key)
    if cfg is None:
        from cuda.core import LaunchConfig

        if len(_configs) >= 4096:
            _configs.clear()
        cfg = _configs[key] = LaunchConfig(grid=(grid, 1, 1), block=block, shmem_size=0)
    fkey = (id(k), ctx)
    f = _functions.get(fkey)
    if f is None:
        f = _functions[fkey] = k._codelibrary.get_cufunc().kernel
    _launch(core_stream(stream), cfg, f, *args)


def _launch(*a):
    global _launch
    from cuda.core import launch as _launch

    _launch(*a)
