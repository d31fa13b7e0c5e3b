"""The CUDA kernels' fixed policy: the shared-memory sizes that the nonzero kernel is
compiled with and that its plan (:mod:`dmlnumba.gpu.plans`, :mod:`dmlnumba.gpu.geometry`)
keeps within.  The tunable settings (threads a block, items a lane, tiles, register
caps, the 32-bit thresholds) are :mod:`dmlnumba.config`'s, each with its measurement in
docs/PERFORMANCE.md; the plan math that turns them into a launch is in
:mod:`dmlnumba.gpu.geometry`."""

#: Shared ballot masks per block: warps x items.  The plan keeps
#: ``(threads // 32) * items`` within this.
MAX_MASKS = 2048
#: Shared ballot masks per block of a kernel that reads a transposed input whole rows
#: at a time (:func:`~dmlnumba.gpu.nonzero_count.count_transposed`): twice as many,
#: so that a tile holds 8 rows of up to 16384 elements (8 rows of 4-byte items fill
#: whole sectors).  The width-1 kernel never reads that way (its inputs have one row).
MAX_MASKS_TRANSPOSED = 2 * MAX_MASKS
#: Rows each warp of a staged kernel holds in shared memory before storing them
#: (:func:`~dmlnumba.gpu.nonzero_write.stage_rows`): a ring of twice the 32 rows
#: it stores at a time.
RING = 64
#: Shared staging words per block of the staged write pass: warps x RING x width.
#: The plan allows staging only where ``(threads // 32) * RING * width`` is within this.
STAGE_WORDS = 4096
#: The narrowest packed 32-bit rows that a staged kernel with 32-bit positions writes
#: through the ring (:func:`~dmlnumba.gpu.nonzero_write.stage_rows`, whole sectors)
#: rather than expanded a row a lane (``expand_coords``, each lane's row ``4 * width``
#: bytes from the next): H100, 30% non-zero, widths 8 / 7 / 6: 329 -> 139, 803 -> 425,
#: 145 -> 120 us; widths 5, 4, 3 slower through the ring (174 -> 202, 81 -> 100,
#: 74 -> 96 us).  64-bit coordinates, which the ring does not hold, always expand.
RING_FROM = 6
#: Shared words a warp of the expanding write passes
#: (:func:`~dmlnumba.gpu.nonzero_write.expand_rows`, ``expand_coords``) holds: the
#: positions of 32 full mask words, and a word of padding after every 32.
EXPAND_WARP = 1024 + 32
#: Shared words per block of the expanding write passes: warps x EXPAND_WARP.  The
#: plan takes them only where ``(threads // 32) * EXPAND_WARP`` is within this.
EXPAND_WORDS = 8 * EXPAND_WARP
#: The same for a staged kernel that reads a transposed input, whose masks take twice
#: the shared memory: 16 mask words at a time, half the words.
EXPAND_HALF_WARP = EXPAND_WARP // 2
EXPAND_HALF_WORDS = EXPAND_WORDS // 2
#: A staged kernel's tile whose elements are at most 1 / SPARSE_OF non-zero writes
#: 32 mask words at once, one a lane (the lanes' rows follow each other), instead of
#: word by word with all lanes on one word's rows.
SPARSE_OF = 16
