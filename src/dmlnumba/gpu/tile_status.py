"""The decoupled look-back of the CUDA nonzero: tile status words and the
block-wide look-back over them (CUB's ``ScanTileState`` and
``TilePrefixCallbackOp``; Merrill and Garland, "Single-pass Parallel Prefix Scan
with Decoupled Look-back", 2016).

Each tile publishes one status word: first its own count (an ``AGGREGATE``),
then, once it knows the counts of all tiles before it, its inclusive prefix (a
``PREFIX``).  A tile learns its exclusive prefix by adding up its predecessors'
words from the newest back to the first ``PREFIX``.

A word is a uint64 (numba never mixes signed and unsigned 64-bit integers):
2 kind bits, then a 40-bit value.  Slot 0 of the buffer is the tile counter;
tile ``t``'s word is slot ``t + 1``.  As in CUB, the buffer belongs to one call:
the host zeroes it on the call's stream just before the launch (a memset that a
CUDA graph captures with the launch), so every word starts ``NOT_READY`` and the
counter at 0, and nothing the kernel reads is host state that a replay repeats.
An input of one tile needs no buffer: its block neither takes nor publishes.
"""

import numpy as np
from numba import cuda, int64, uint32, uint64

from .warp import ballot, device, load_volatile, warp_sum

#: Status kinds.
NOT_READY = np.uint64(0)
AGGREGATE = np.uint64(1)
PREFIX = np.uint64(2)

KIND_SHIFT = np.uint64(62)
#: Bits of a word's value: the most elements an input may have is 2**40 - 1.
VALUE_BITS = 40
VALUE_MASK = np.uint64((1 << VALUE_BITS) - 1)


@device
def take_tile(status):
    """The next tile of this call (its number from 0): tiles are taken in launch
    order, so a tile's predecessors are running or done and the look-back cannot
    wait on a block that was never scheduled."""
    return int64(cuda.atomic.add(status, 0, uint64(1)))


@device
def publish(status, tile, kind, value):
    cuda.atomic.exch(status, tile + 1, (kind << KIND_SHIFT) | uint64(value))


@device
def read(status, tile):
    """Tile ``tile``'s word (0, ``NOT_READY``, until the tile publishes): a volatile
    load, whole (its kind and value are one word, so no fence orders them)."""
    return load_volatile(status, tile + 1)


@device
def kind_of(word):
    return word >> KIND_SHIFT


@device
def value_of(word):
    return int64(word & VALUE_MASK)


@device
def look_back(status, tile):
    """The exclusive prefix of ``tile`` (the sum of the values of tiles 0 to
    ``tile - 1``), found by every thread of the block together and returned to
    all of them.

    A round reads a window of ``blockDim.x`` predecessors, thread ``i`` the tile
    ``newest - i``.  A ballot per warp and one shared-memory minimum (a lane per
    warp at most) find the window's first word that is not an ``AGGREGATE`` (the
    stop); a warp sum adds up the words before it, and the stop's thread adds
    the warps' sums, and its own word where it is a ``PREFIX``.  A ``PREFIX``
    stop ends the look-back; a ``NOT_READY`` one starts the next round at the
    stop's tile, which is read again.  The loop is block-uniform (its state is
    shared), so every thread meets the same barriers.

    (Shared-memory atomic adds of every thread's 64-bit word are compare-and-swap
    loops, 32 lanes on one address, where small inputs stalled; docs/PERFORMANCE.md.)
    An aggregate is one tile's count, so a warp's 32 of them fit the 32-bit warp
    sum; only a ``PREFIX`` may be larger.  The stop stays an int64: as an int32 it
    takes more instructions in the same registers.
    """
    prefix = cuda.shared.array(1, int64)  # sum of the words added so far
    newest = cuda.shared.array(1, int64)  # the newest tile of the next window
    done = cuda.shared.array(1, int64)
    stop = cuda.shared.array(1, int64)  # first thread whose word is no AGGREGATE
    warp_sums = cuda.shared.array(32, int64)
    tid = cuda.threadIdx.x
    lane = tid & 31
    window = cuda.blockDim.x
    if tid == 0:
        prefix[0] = 0
        newest[0] = tile - 1
        done[0] = 1 if tile == 0 else 0
        stop[0] = window
    cuda.syncthreads()
    while done[0] == 0:
        q = newest[0] - tid
        word = PREFIX << KIND_SHIFT  # before tile 0: an inclusive prefix of 0
        if q >= 0:
            word = read(status, q)
        kind = kind_of(word)
        late = ballot(kind != AGGREGATE)  # this warp's lanes past the aggregates
        if kind != AGGREGATE and late & uint32((1 << lane) - 1) == 0:
            cuda.atomic.min(stop, 0, int64(tid))  # the warp's first such lane
        cuda.syncthreads()
        first = stop[0]
        s = warp_sum(value_of(word) if tid < first else 0)
        if lane == 0:
            warp_sums[tid >> 5] = s
        cuda.syncthreads()
        lead = first if first < window else 0
        if tid == lead:  # the stop's thread (thread 0 after a window of aggregates)
            t = prefix[0]
            for w in range(window >> 5):
                t += warp_sums[w]
            if first < window and kind == PREFIX:
                t += value_of(word)
                done[0] = 1
            else:  # past the aggregates; a tile not ready is read again
                newest[0] -= first
            prefix[0] = t
            stop[0] = window
        cuda.syncthreads()
    return prefix[0]
