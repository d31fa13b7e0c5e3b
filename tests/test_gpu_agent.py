"""The CUDA nonzero kernel's steps, each run alone in a small kernel of its own (on a
GPU, or under numba's simulator in CI) and checked against NumPy:

- the count pass (:mod:`dmlnumba.gpu.nonzero_count`): one warp's mask words and
  count, for every element width, from the vector count and from the strided count
  over a transposed layout;
- the look-back (:mod:`dmlnumba.gpu.tile_status`): each tile's exclusive prefix,
  tiles taken in any order by several blocks;
- the write pass (:mod:`dmlnumba.gpu.nonzero_write`): one warp's rows from given
  mask words, through each of its three ways (word by word or sparse, staged in a
  ring, expanded for one column), in 32 and 64 bits, with a row limit.

Every test's name says "cuda", so CI's simulator run (``-k cuda``) takes them.
"""

import numpy as np
import pytest

from devices import CUDA, SIM

pytestmark = pytest.mark.skipif(not CUDA, reason="needs CUDA (a GPU or the simulator)")

if CUDA:  # at module level: the simulator swaps in its own ``cuda`` for the kernels' globals
    from numba import cuda, int64, types, uint32

#: Words a warp holds in these tests (its ``items``): 32 * 16 = 512 elements.
ITEMS = 16


def _uint(bits):
    return np.dtype(f"uint{bits}")


def _mask_words(nz):
    """Mask word k of a 1-d bool array (a multiple of 32 long): bit j set where
    element 32 k + j is non-zero."""
    b = nz.reshape(-1, 32).astype(np.uint64) << np.arange(32, dtype=np.uint64)
    return b.sum(axis=1).astype(np.uint32)


def _values(rng, n, bits, density):
    x = rng.integers(1, 1 << min(bits, 62), n, dtype=np.uint64).astype(_uint(bits))
    x[rng.random(n) >= density] = 0
    return x


def test_local_array_cuda_holds_what_each_thread_writes():
    """``warp.local_array`` (a thread's array without numba-cuda's zero fill): each
    thread's items, written at indices known only at run time, read back as written,
    for every integer width the kernels use."""
    from dmlnumba.gpu.warp import local_array

    def kernel_of(ty):
        @cuda.jit
        def kernel(out, k):
            a = local_array(8, ty)
            t = cuda.threadIdx.x
            for i in range(k):  # a run-time bound: the array stays in local memory
                a[(i + t) % k] = ty(t + i)
            s = 0
            for i in range(k):
                s += int64(a[i]) * (i + 1)
            out[t] = s

        return kernel

    for ty in (uint32, int64, types.uint8, types.uint16, types.uint64):
        out = cuda.device_array(64, np.int64)
        kernel_of(ty)[1, 64](out, 8)
        t = np.arange(64)
        want = sum((t + i) * ((i + t) % 8 + 1) for i in range(8))
        np.testing.assert_array_equal(out.copy_to_host(), want)


# ------------------------------------------------------------------ count pass


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
@pytest.mark.parametrize("density", [0.0, 0.03, 0.5, 1.0])
def test_count_pass_cuda_vector_then_strided(bits, density):
    """``count_vector`` over a contiguous run, then ``count_strided`` for the steps it
    leaves (the last tile's ragged end included): the masks and the count."""

    from dmlnumba.gpu.nonzero_count import STRIDED_LOADS, count_strided, count_vector
    from dmlnumba.gpu.warp import warp_sum

    V = 128 // bits
    item = getattr(types, f"uint{bits}")
    rng = np.random.default_rng(bits)
    x = _values(rng, 32 * ITEMS, bits, density)

    def kernel(src, total, full, mask, masks_out, count_out):
        masks = cuda.shared.array(ITEMS, uint32)
        coords = cuda.local.array(1, int64)
        shape = cuda.local.array(1, int64)
        strides = cuda.local.array(1, int64)
        v = cuda.local.array(STRIDED_LOADS, item)
        lane = cuda.threadIdx.x
        n, it = count_vector(src, 0, total, ITEMS, mask, masks, 0, lane * V, full, lane, V)
        n = warp_sum(n)
        shape[0] = total
        strides[0] = 1
        e = it * 32 + lane
        coords[0] = e
        g = (coords, shape, strides, 1)
        n += count_strided(src, e, e, e, it, ITEMS, total, mask, masks, 0, lane, g, v)
        cuda.syncthreads()  # lane 0 kept the masks
        for k in range(lane, ITEMS, 32):
            masks_out[k] = masks[k]
        if lane == 0:
            count_out[0] = n

    if SIM:
        go = cuda.jit(kernel)
    else:  # the vector load reads through a raw pointer, as in the real kernel
        sig = (types.CPointer(item), int64, types.boolean, types.uint64)
        go = cuda.jit(types.void(*sig, uint32[::1], int64[::1]))(kernel)
    mask = np.uint64((1 << bits) - 1)  # the element's bits (an unsigned integer's mask)
    for total, full in ((32 * ITEMS, True), (32 * ITEMS - 5, False)):
        xs = x.copy()
        xs[total:] = 0
        d = cuda.to_device(xs)
        src = d if SIM else d.device_ctypes_pointer.value
        masks_out = cuda.device_array(ITEMS, np.uint32)
        count_out = cuda.device_array(1, np.int64)
        go[1, 32](src, total, full, mask, masks_out, count_out)
        np.testing.assert_array_equal(masks_out.copy_to_host(), _mask_words(xs != 0))
        assert int(count_out.copy_to_host()[0]) == int(np.count_nonzero(xs[:total]))


def test_count_pass_cuda_strided_over_a_transpose():
    """``count_strided`` alone over a transposed (10, 40) uint16 input: the odometer
    carries across rows of 10, and the masks hold the elements in row-major order."""

    from dmlnumba.gpu.nonzero_count import STRIDED_LOADS, count_strided

    rng = np.random.default_rng(5)
    base = _values(rng, 400, 16, 0.3).reshape(40, 10)
    xt = base.T  # (10, 40), strides (1, 10) in elements
    total = xt.size
    items = -(-total // 32)

    @cuda.jit
    def kernel(src, mask, masks_out, count_out):
        masks = cuda.shared.array(ITEMS, uint32)
        coords = cuda.local.array(2, int64)
        shape = cuda.local.array(2, int64)
        strides = cuda.local.array(2, int64)
        v = cuda.local.array(STRIDED_LOADS, types.uint16)
        lane = cuda.threadIdx.x
        shape[0], shape[1] = 10, 40
        strides[0], strides[1] = 1, 10
        coords[0], coords[1] = lane // 40, lane % 40
        off = coords[0] * strides[0] + coords[1] * strides[1]
        g = (coords, shape, strides, 2)
        n = count_strided(src, off, lane, coords[1], 0, items, total, mask, masks, 0, lane, g, v)
        cuda.syncthreads()  # lane 0 kept the masks
        for k in range(lane, items, 32):
            masks_out[k] = masks[k]
        if lane == 0:
            count_out[0] = n

    masks_out = cuda.device_array(items, np.uint32)
    count_out = cuda.device_array(1, np.int64)
    mask = np.uint64(0xFFFF)
    kernel[1, 32](cuda.to_device(base.reshape(-1)), mask, masks_out, count_out)
    nz = np.zeros(32 * items, bool)
    nz[:total] = xt.reshape(-1) != 0  # row-major order of the transposed view
    np.testing.assert_array_equal(masks_out.copy_to_host(), _mask_words(nz))
    assert int(count_out.copy_to_host()[0]) == int(np.count_nonzero(xt))


# ------------------------------------------------------------------ look-back


def test_look_back_cuda_exclusive_prefix_of_tiles():
    """Blocks take tiles in whatever order they start, publish their counts and look
    back: each tile learns the sum of the counts before it."""

    from dmlnumba.gpu import tile_status as ts

    rng = np.random.default_rng(7)
    ntiles = 6 if SIM else 300
    counts = rng.integers(0, 1000, ntiles).astype(np.int64)

    @cuda.jit
    def kernel(status, counts, prefix, order):
        tile_info = cuda.shared.array(1, np.int64)
        if cuda.threadIdx.x == 0:
            tile_info[0] = ts.take_tile(status)
        cuda.syncthreads()
        tile = tile_info[0]
        c = counts[tile]
        if cuda.threadIdx.x == 0:
            ts.publish(status, tile, ts.PREFIX if tile == 0 else ts.AGGREGATE, c)
        excl = ts.look_back(status, tile)
        if cuda.threadIdx.x == 0:
            if tile != 0:
                ts.publish(status, tile, ts.PREFIX, excl + c)
            prefix[tile] = excl
            order[cuda.blockIdx.x] = tile

    status = cuda.to_device(np.zeros(ntiles + 1, np.uint64))
    prefix = cuda.device_array(ntiles, np.int64)
    order = cuda.device_array(ntiles, np.int64)
    kernel[ntiles, 32](status, cuda.to_device(counts), prefix, order)
    want = np.concatenate([[0], np.cumsum(counts)[:-1]])
    np.testing.assert_array_equal(prefix.copy_to_host(), want)
    assert sorted(order.copy_to_host()) == list(range(ntiles))


# ------------------------------------------------------------------ write pass


def _write_case(shape, density, seed):
    """A warp's elements (``32 * ITEMS`` of an array of ``shape``, from element 0),
    their mask words, and the rows ``np.argwhere`` gives for them."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    nz = rng.random(n) < density
    nz[32 * ITEMS :] = False
    return nz, _mask_words(np.resize(nz, 32 * ITEMS)), np.argwhere(nz.reshape(shape))


@pytest.mark.parametrize(
    "way",
    ["rows", "sparse", "staged", "expand", "expand_coords", "expand_coords_16", "expand_coords_64"],
)
@pytest.mark.parametrize("narrow", [True, False])
@pytest.mark.parametrize("density", [0.02, 0.5, 1.0])
def test_write_pass_cuda(way, narrow, density):
    """One warp writes its rows from given mask words: every row as ``np.argwhere``
    has it, rows at and past the limit untouched."""

    from dmlnumba.gpu.nonzero_write import expand_coords, expand_rows, stage_rows, write_rows
    from dmlnumba.gpu.policy import EXPAND_WARP, RING
    from dmlnumba.layout import divisor, divisor32

    if way.startswith("expand") and not narrow:
        pytest.skip("the expanding passes are made for 32-bit positions only")
    shape = (4, 8, 16)
    width = 1 if way == "expand" else 3
    if way == "expand":
        shape = (32 * ITEMS,)
    nz, words, rows = _write_case(shape, density, 11)
    if width == 1:
        rows = rows[:, -1:]
    limit = max(len(rows) - 3, 0)  # the limit cuts the last rows
    ndim = len(shape)
    dv_h = [divisor32(n) if narrow else divisor(n) for n in shape]
    sh = np.array(shape, np.int64)
    mg = np.array([d[0] for d in dv_h], np.int64)
    sf = np.array([d[1] for d in dv_h], np.int64)
    fill = np.uint32(0xDEADBEEF)
    out_dtype = np.uint32 if narrow and not way.endswith("64") else np.uint64
    nrows = 32 * ITEMS
    # Constants for the kernel (which cannot call string methods).
    stage_words = EXPAND_WARP if way.startswith("expand") else RING * 3
    coords_way = way.startswith("expand_coords")
    group = 16 if way.endswith("16") else 32

    @cuda.jit
    def kernel(words_in, shape_in, magic_in, shift_in, out):
        masks = cuda.shared.array(ITEMS, uint32)
        stage = cuda.shared.array(stage_words, uint32)
        dshape = cuda.shared.array(3, int64)
        dmagic = cuda.shared.array(3, int64)
        dshift = cuda.shared.array(3, int64)
        lane = cuda.threadIdx.x
        for k in range(lane, ITEMS, 32):
            masks[k] = words_in[k]
        if lane < ndim:
            dshape[lane] = shape_in[lane]
            dmagic[lane] = magic_in[lane]
            dshift[lane] = shift_in[lane]
        cuda.syncthreads()
        wm = (masks, 0, ITEMS, 0, lane, lane)
        dv = (dshape, dmagic, dshift, ndim)
        if way == "expand":
            expand_rows(wm, out, 0, 1, limit, stage, 0)
        elif coords_way:
            expand_coords(wm, dv, out, 0, width, limit, stage, 0, group)
        elif way == "staged":
            stage_rows(wm, dv, out, 0, width, limit, stage, 0, narrow)
        else:
            write_rows(wm, dv, out, (0, width, 1, width), limit, way == "sparse", narrow)

    out = cuda.to_device(np.full(nrows * width, fill, out_dtype))
    kernel[1, 32](cuda.to_device(words), sh, mg, sf, out)
    got = out.copy_to_host().reshape(nrows, width)
    np.testing.assert_array_equal(got[:limit], rows[:limit].astype(out_dtype))
    assert (got[limit:] == out_dtype(fill)).all()


@pytest.mark.parametrize("name, variant", [("slice", (True, 0)), ("nonzero", (True, 1))])
def test_cuda_register_cap_is_part_of_the_kernels_cache_key(name, variant):
    """numba's disk cache keys a kernel by its bytecode and its closure's contents,
    not by ``max_registers``: the cap is a closure cell of the kernel function, so a
    kernel cached under one cap (CUDA_NONZERO_MAX_REGISTERS, CUDA_SLICE_32BIT_REGISTERS)
    is never loaded under another."""
    from dmlnumba.gpu import launch

    for regs in (0, 48, 56):
        fn = launch.python_kernel(name, 32, variant, regs)
        cells = dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__)))
        assert cells["regs"] == regs
