"""The launch geometry of the CUDA plans (:mod:`.plans`): tiles, grids and parameter
blocks, as pure functions of the layouts and the settings (:mod:`dmlnumba.config`),
within the kernels' fixed shared-memory policy (:mod:`.policy`)."""

from .. import config
from ..layout import divisor32, extent
from ..params import MAXD, SLICE_CUDA, SLICE_GATHER_CUDA, pack
from .policy import MAX_MASKS, MAX_MASKS_TRANSPOSED
from .slice_kernel import LOADS


def nonzero_tiling(size, shape, strides, itemsize, threads):
    """``(items, transposed, ntiles)`` of the nonzero kernel over an input of this
    layout (``size`` elements, ``strides`` in items) in blocks of ``threads``: the
    steps of 32 elements each warp takes, the rows a tile where it reads whole rows
    (:func:`transposed_rows`; else 0), and the tiles."""
    # Tiles: about CUDA_NONZERO_TILES where the input allows (enough to fill the
    # GPU, few enough that looking back stays short), each lane taking
    # CUDA_NONZERO_MIN_ITEMS to CUDA_NONZERO_ITEMS steps, in multiples of 4.
    # A 1-d input that those steps would cut into more than CUDA_NONZERO_TILES tiles
    # (about a wave of blocks on an H100 or H200: 132 SMs, 4 blocks each) and at most 8
    # times as many takes at most CUDA_NONZERO_ITEMS_1D steps: shorter tiles, a shorter
    # last wave.
    items = min(config.CUDA_NONZERO_ITEMS, MAX_MASKS // (threads // 32))
    many = size // (threads * items)
    if len(shape) == 1 and config.CUDA_NONZERO_TILES < many <= 8 * config.CUDA_NONZERO_TILES:
        items = min(items, config.CUDA_NONZERO_ITEMS_1D)
    items = max(
        min(config.CUDA_NONZERO_MIN_ITEMS, items),
        min(items, size // (threads * config.CUDA_NONZERO_TILES) // 4 * 4),
    )
    # An input that fits one tile takes only the steps it fills, in multiples of 4
    # (1000 elements: 4 steps a warp, not 16).
    items = min(items, max(4, -(-size // (4 * threads)) * 4))
    # A transposed input (the next-to-last dimension contiguous) whose tiles can be
    # whole rows: read U rows at a time, in whole sectors (count_transposed).
    tposed = transposed_rows(shape, strides, itemsize, threads)
    if tposed:
        items = tposed * shape[-1] // threads
    ntiles = -(-size // (threads * items))
    return items, tposed, ntiles


def transposed_rows(shape, strides, itemsize, threads):
    """The rows ``U`` (8, 4 or 2, at most a sector's worth of elements) of the nonzero
    kernel's tiles where ``count_transposed`` reads them: the next-to-last dimension
    contiguous (stride 1) and a multiple of ``U``, the last not, a multiple of 32
    columns, and ``U`` rows making a whole tile that fits the shared masks
    (``MAX_MASKS_TRANSPOSED``).  0 where the layout is not such a one."""
    if len(shape) < 2 or strides[-2] != 1 or strides[-1] == 1 or shape[-1] % 32:
        return 0
    for u in (8, 4, 2):
        tile = u * shape[-1]
        if (
            u * itemsize <= max(32, 2 * itemsize)
            and shape[-2] % u == 0
            and tile % threads == 0
            and tile // threads <= MAX_MASKS_TRANSPOSED // (threads // 32)
        ):
            return u
    return 0


def slice_spec(bits, shape, ss, ds, sb, db, swap=0, fill=False):
    """``(bits, variant, block, geometry)`` of a copy of ``bits``-bit items:
    ``variant`` the kernel's ``(pos32, swap, loads, fill)`` (:func:`make_slice`;
    ``swap``: 0, or the bits of the items each 64-bit word's are reversed in;
    ``fill``: zeros stored, nothing read), ``block`` its
    threads, ``geometry`` what :func:`slice_tiles` makes the launch of."""
    inner = shape[-1]
    threads = config.CUDA_THREADS
    items = config.CUDA_SLICE_ITEMS
    # Enough threads across a row that each copies about ``items`` elements of it.
    tx = min(threads, max(32, 32 * -(-inner // (32 * items))))
    ty = max(1, threads // tx)
    seg = tx * items
    rows = 1
    for n in shape[:-1]:
        rows *= n
    # Positions in 32 bits where every one (and so a tile's number) is below
    # CUDA_SLICE_32BIT_BELOW, 2**30, which leaves room for a thread's next position
    # and a tile's next: fewer registers, more threads an SM.  8-byte items (also the
    # word copy of contiguous rows) then keep half the loads in flight (the same
    # bytes as 4-byte items): with all of them they spill under that kernel's cap.
    top = max(sb + extent(shape, ss, 1)[1], db + extent(shape, ds, 1)[1])
    pos32 = top < config.CUDA_SLICE_32BIT_BELOW
    loads = LOADS // 2 if pos32 and bits == 64 else LOADS
    geometry = (shape, ss, ds, sb, db, seg, rows)
    return (bits, (pos32, swap, loads, fill), (tx, ty), geometry)


def slice_tiles(geometry, ty, slots):
    """``(grid, params)`` of a slice launch: the copy tiled as (``nrows`` rows, a
    segment of ``seg`` elements of each), ``ty`` tiles a block.

    Up to CUDA_SLICE_ROWS rows a tile, or where rows are short as many as hold as
    many elements (the threads go on from row to row), fewer where that leaves
    fewer than about CUDA_SLICE_TILES tiles (too few to keep the GPU's memory system
    busy).  ``slots``: the tiles of one wave of resident blocks (0: unknown); the
    tiles are then spread evenly over whole waves, as many as those rules fill (at
    least one), where whole rows let that fill the waves better, so that no last
    wave runs a few blocks on an idle GPU (docs/PERFORMANCE.md, "Specialised
    paths")."""
    shape, ss, ds, sb, db, seg, rows = geometry
    nseg = -(-shape[-1] // seg)
    want = max(config.CUDA_SLICE_ROWS, config.CUDA_SLICE_ROWS * seg // shape[-1])
    nrows = max(1, min(want, rows * nseg // config.CUDA_SLICE_TILES))
    ntiles = -(-rows // nrows) * nseg
    if slots:
        groups = max(1, max(1, ntiles // slots) * slots // nseg)  # row groups
        even = -(-rows // groups)
        tiles = -(-rows // even) * nseg
        if wave_fill(tiles, slots) > wave_fill(ntiles, slots):  # rows are whole
            nrows, ntiles = even, tiles
    params = pack(
        SLICE_CUDA,
        shape=shape,
        src_strides=ss,
        dst_strides=ds,
        src_base=sb,
        dst_base=db,
        ndim=len(shape),
        seg=seg,
        nseg=nseg,
        rows=rows,
        nrows=nrows,
        ntiles=ntiles,
    )
    return min(-(-ntiles // ty), 1 << 22), tuple(params.tolist())


def gather_grid(geometry, threads, loads):
    """``(grid, params)`` of a launch of the gather kernel
    (:func:`~dmlnumba.gpu.slice_kernel.make_gather`) over ``geometry`` (as
    :func:`slice_spec` makes it): ``loads`` elements a thread, blocks of
    ``threads``, every element in one pass where the grid allows."""
    shape, ss, ds, sb, db, _, _ = geometry
    total = 1
    for n in shape:
        total *= n
    pad = (0,) * (MAXD - len(shape))  # the rows right-aligned
    divs = [divisor32(n) for n in shape]
    params = pack(
        SLICE_GATHER_CUDA,
        shape=pad + shape,
        src_strides=pad + ss,
        dst_strides=pad + ds,
        magic=pad + tuple(m for m, _ in divs),
        shift=pad + tuple(h for _, h in divs),
        src_base=sb,
        dst_base=db,
        ndim=len(shape),
        total=total,
        src_stride0=ss[0],
        dst_stride0=ds[0],
    )
    return min(-(-total // (threads * loads)), 1 << 22), tuple(params.tolist())


def wave_fill(tiles, slots):
    """The share of the tile slots of the waves ``tiles`` tiles take that they fill."""
    return tiles / (-(-tiles // slots) * slots)
