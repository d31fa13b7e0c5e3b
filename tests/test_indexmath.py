"""The shared index math and the layout arithmetic, run as plain Python."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dmlnumba import indexmath as im
from dmlnumba import layout

from strategies import LAYOUTS, laid_out, shapes

#: NumPy's byte_bounds (numpy.lib.array_utils from NumPy 2; the package supports 1.24 on).
byte_bounds = getattr(np.lib, "array_utils", np).byte_bounds


@given(shape=shapes(max_dims=8, max_side=5, max_size=400), data=st.data())
def test_unravel_matches_numpy(shape, data):
    size = int(np.prod(shape))
    linear = data.draw(st.integers(0, size - 1))
    coords = [0] * len(shape)
    im.unravel(linear, shape, len(shape), coords)
    assert tuple(coords) == tuple(int(c) for c in np.unravel_index(linear, shape))


@given(shape=shapes(max_dims=5, max_side=4, max_size=200))
def test_next_row_walks_every_row_in_order(shape):
    ndim = len(shape)
    coords = [0] * ndim
    seen = [tuple(coords[:-1])]
    while im.next_row(coords, shape, ndim):
        assert coords[-1] == 0
        seen.append(tuple(coords[:-1]))
    assert coords == [0] * ndim
    assert seen == list(itertools.product(*(range(n) for n in shape[:-1])))


@given(shape=shapes(max_dims=8, max_side=5, max_size=400), data=st.data())
def test_row_start_is_the_rows_offsets_in_both_layouts(shape, data):
    """Row ``r`` (of the coordinates before the last dimension) starts where its
    coordinates put it under either set of strides (any sign, zero too), and its
    next-to-last coordinate comes back with it."""
    ndim = len(shape)
    last = ndim - 1
    rows = int(np.prod(shape[:-1]))
    r = data.draw(st.integers(0, rows - 1))
    a = data.draw(st.lists(st.integers(-50, 50), min_size=ndim, max_size=ndim))
    b = data.draw(st.lists(st.integers(-50, 50), min_size=ndim, max_size=ndim))
    c = np.unravel_index(r, shape[:-1]) if last else ()
    assert im.row_start(r, shape, last, a, b) == (
        sum(int(x) * s for x, s in zip(c, a)),
        sum(int(x) * s for x, s in zip(c, b)),
        int(c[-1]) if last else r,
    )


@given(shape=shapes(max_dims=6, max_side=7, max_size=2000), data=st.data())
def test_advance_moves_the_odometer_and_the_offset(shape, data):
    """From any element, ``advance`` by any ``k`` lands where ``unravel`` puts element
    ``start + k``, with the offset moved to match (strides of any sign, zero too); past
    the last element, the outermost coordinate runs past its size."""
    ndim = len(shape)
    size = int(np.prod(shape))
    strides = data.draw(st.lists(st.integers(-50, 50), min_size=ndim, max_size=ndim))
    start = data.draw(st.integers(0, size - 1))
    k = data.draw(st.integers(0, 2 * size))
    coords = [0] * ndim
    im.unravel(start, shape, ndim, coords)
    base = data.draw(st.integers(-1000, 1000))
    off = im.advance(coords, shape, strides, ndim, k, base + im.offset(coords, strides, ndim))
    end = start + k
    if end < size:
        want = [0] * ndim
        im.unravel(end, shape, ndim, want)
        assert coords == want
    else:  # row-major position end, with the outermost coordinate unbounded
        assert coords[0] >= shape[0]
        inner = int(np.prod(shape[1:]))
        want = [0] * ndim
        im.unravel(end % inner if ndim > 1 else 0, shape[1:] or [1], max(ndim - 1, 1), want)
        assert coords[0] == end // inner
        assert coords[1:] == want[: ndim - 1]
    assert off == base + im.offset(coords, strides, ndim)


def test_a_parameter_blocks_rows_sit_where_the_kernels_read_them():
    """The CUDA kernels read a shape or strides entry ``d`` at ``p[P.<row> + d]``."""
    from dmlnumba.params import NONZERO_CUDA, pack

    p = pack(
        NONZERO_CUDA,
        **{f: 0 for f in NONZERO_CUDA._fields if f not in type(NONZERO_CUDA)._row_fields},
        shape=(3, 4, 5),
        strides=(-20, 5, 1),
        magic=(),
        shift=(),
    )
    assert [int(p[NONZERO_CUDA.strides + d]) for d in range(3)] == [-20, 5, 1]
    assert [int(p[NONZERO_CUDA.shape + d]) for d in range(3)] == [3, 4, 5]


def test_offset_is_dot_product():
    assert im.offset([1, 2, 3], [100, -10, 0], 3) == 80
    assert im.offset([4], [7], 1) == 28


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_is_nonzero_on_float_bits(dtype):
    from dmlnumba.validation import nonzero_mask, uint_of_size

    dt = np.dtype(dtype)
    mask = nonzero_mask(dt)
    vals = np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1.0, -2.0], dt)
    raw = vals.view(uint_of_size(dt.itemsize))
    got = [im.is_nonzero(int(b), mask) for b in raw]
    assert got == [False, False, True, True, True, True, True, True]


@pytest.mark.parametrize("dtype", ["int8", "uint64", "bool", "int64"])
def test_is_nonzero_on_integer_bits(dtype):
    from dmlnumba.validation import nonzero_mask

    dt = np.dtype(dtype)
    mask = nonzero_mask(dt)
    assert im.is_nonzero(0, mask) is False
    assert im.is_nonzero(1, mask) is True
    assert im.is_nonzero(mask, mask) is True  # all bits set: -1 or the maximum


def test_write_coordinates_right_aligned_with_strides():
    out = [0] * 12
    im.write_coordinates(out, 1, 3, [5, 6, 7, 0], 4, 3, 9)  # columns at 1, 4, 7
    assert out[1] == 6 and out[4] == 7 and out[7] == 9
    assert sum(out) == 22
    out = [0] * 3
    im.write_coordinates(out, 0, 1, [5], 1, 0, 9)  # width 0 writes nothing
    assert out == [0, 0, 0]


def test_block_bounds_cover_the_range():
    total, bs = 23, 5
    got = [im.block_bounds(b, bs, total) for b in range(5)]
    assert got == [(0, 5), (5, 10), (10, 15), (15, 20), (20, 23)]


@given(
    shape=shapes(max_dims=6, max_side=5, max_size=500),
    layout_name=st.sampled_from(LAYOUTS),
    data=st.data(),
)
def test_extent_spans_exactly_the_array(shape, layout_name, data):
    base = np.arange(int(np.prod(shape)), dtype=np.int32)
    a = data.draw(laid_out(base, shape, layout_name))
    low, span, base, es = layout.extent(a.shape, a.strides, a.itemsize)
    lo, hi = byte_bounds(a)
    ptr = a.__array_interface__["data"][0]
    assert ptr + low == lo
    assert span * a.itemsize == hi - lo
    assert base * a.itemsize == ptr - lo
    assert [s * a.itemsize for s in es] == list(a.strides)


@given(
    shape=shapes(max_dims=6, max_side=5, max_size=500),
    layout_name=st.sampled_from(LAYOUTS),
    data=st.data(),
)
def test_cpu_flat_view_spans_the_array_in_memory_order(shape, layout_name, data):
    """The CPU target's flat view of an input (the kernels index it with extent()'s
    base and strides): for dense layouts NumPy's memory-order ravel, else a strided
    view; either way the span from the lowest to the highest address, over the
    same memory, flagged writeable (a read-only input too: it takes the kernels compiled
    for writeable arrays, which never write their input), and the runners' reader gives
    the same."""
    from dmlnumba.cpu import views

    a = data.draw(laid_out(np.arange(int(np.prod(shape)), dtype=np.float32), shape, layout_name))
    low, span, base, es = layout.extent(a.shape, a.strides, a.itemsize)
    lo = byte_bounds(a)[0]
    v0, b, s = views.flat_view(a)
    assert b == base
    for v in [v0, views.reader(a)(a)]:
        assert v.dtype == np.uint32 and v.ndim == 1 and v.size == span
        assert v.flags.writeable
        assert v.__array_interface__["data"][0] == lo and np.shares_memory(v, a)
        for c in itertools.product(*(range(n) for n in a.shape)):
            assert v[b + sum(ci * si for ci, si in zip(c, s))] == a[c].view(np.uint32)


def _simulate_copy(geom, src_off, src, n_out):
    shape, sst, dst_strides = geom
    out = {}
    for c in itertools.product(*(range(n) for n in shape)):
        s = src_off + sum(ci * si for ci, si in zip(c, sst))
        d = sum(ci * di for ci, di in zip(c, dst_strides))
        out[d] = src[s]
    return [out[i] for i in range(n_out)]


@given(shape=shapes(max_dims=5, max_side=5, max_size=300), data=st.data())
def test_slice_geometry_is_the_same_copy(shape, data):
    # A source in C order; a window of it; a C-order destination.
    starts, steps, outs = [], [], []
    for n in shape:
        t = data.draw(st.integers(1, 3)) * data.draw(st.sampled_from([1, -1]))
        m = data.draw(st.integers(1, max(1, n // abs(t))))
        a = (
            data.draw(st.integers(0, n - 1 - (m - 1) * abs(t)))
            if t > 0
            else data.draw(st.integers((m - 1) * abs(t), n - 1))
        )
        starts.append(a)
        steps.append(t)
        outs.append(m)
    src = np.arange(int(np.prod(shape))).reshape(shape)
    want = src[np.ix_(*[a + t * np.arange(m) for a, t, m in zip(starts, steps, outs)])]
    geom, off = layout.slice_geometry(
        outs, starts, steps, layout.c_strides(tuple(shape)), layout.c_strides(tuple(outs))
    )
    assert geom.shape[0] == 3 and 1 <= geom.shape[1] <= len(shape)
    got = _simulate_copy(geom, off, src.reshape(-1), want.size)
    assert got == want.reshape(-1).tolist()


def test_slice_geometry_merges_contiguous_dimensions():
    geom, off = layout.slice_geometry((2, 3, 4), (0, 0, 0), (1, 1, 1), (12, 4, 1), (12, 4, 1))
    assert geom.tolist() == [[24], [1], [1]] and off == 0
    geom, off = layout.slice_geometry((1, 1), (0, 2), (1, 1), (5, 1), (1, 1))
    assert geom.tolist() == [[1], [0], [0]] and off == 2


@given(
    st.integers(1, 1 << 64) | st.integers(1, 1 << 20),
    st.lists(st.integers(0, (1 << 64) - 1), min_size=1, max_size=20),
)
def test_divisor_divides_every_64_bit_integer(n, es):
    """The CUDA nonzero kernel's division by a dimension: a multiply and shifts with
    layout.divisor's constants equal floor division for any 64-bit dividend, the
    largest multiples of ``n`` and their neighbours included."""
    magic, shift = layout.divisor(n)
    assert -(1 << 63) <= magic < 1 << 63 and 0 <= shift <= 64
    top = (1 << 64) - 1
    last = top // n * n
    for e in es + [0, n - 1, n, n + 1, last - 1, last, top]:
        if 0 <= e <= top:
            assert layout.divide(e, magic, shift) == e // n


@given(
    st.integers(1, 1 << 31) | st.integers(1, 1 << 12),
    st.lists(st.integers(0, (1 << 31) - 1), min_size=1, max_size=20),
)
def test_divisor32_divides_every_31_bit_integer(n, es):
    """The 32-bit write pass's division: layout.divisor32's constants, every step in
    32 bits, equal floor division for any dividend below 2**31 (the kernel's narrow
    kernel runs where every element position is below 2**31)."""
    magic, shift = layout.divisor32(n)
    assert 0 <= magic < 1 << 32 and 0 <= shift <= 31
    top = (1 << 31) - 1
    last = top // n * n
    for e in es + [0, n - 1, n, n + 1, last - 1, last, top]:
        if 0 <= e <= top:
            assert 2 * e < 1 << 32
            assert layout.divide32(e, magic, shift) == e // n


def test_parameter_blocks_pack_every_field_at_its_slot():
    """Each declared block packs rows (padded to MAXD) and scalars at the slots the
    kernels read, a field named like an attribute of the block included
    (SLICE_CUDA has a scalar called ``rows``); a missing or unknown field is an error."""
    from dmlnumba.params import MAXD, NONZERO_CPU, NONZERO_CUDA, SLICE_CUDA, pack, size

    for decl in (SLICE_CUDA, NONZERO_CUDA, NONZERO_CPU):
        row_fields = type(decl)._row_fields
        values = {
            f: tuple(range(100 * i, 100 * i + 3)) if f in row_fields else 7 + i
            for i, f in enumerate(decl._fields)
        }
        p = pack(decl, **values)
        assert p.shape == (size(decl),)
        for f, v in values.items():
            slot = getattr(decl, f)
            if f in row_fields:
                assert list(p[slot : slot + MAXD]) == list(v) + [0] * (MAXD - len(v))
            else:
                assert p[slot] == v
        with pytest.raises(TypeError):
            pack(decl, **{f: v for f, v in values.items() if f != decl._fields[-1]})
        with pytest.raises(TypeError):
            pack(decl, bogus=1, **values)


def test_parameter_block_rows_copier_moves_every_row_slot():
    """params.rows_copier's function copies each slot of a block's rows, row by row,
    into the arrays it is given (the kernels' move of their by-value layout into
    shared memory)."""
    from dmlnumba.params import MAXD, NONZERO_CUDA, SLICE_CUDA, rows_copier, size

    for decl in (NONZERO_CUDA, SLICE_CUDA):
        src = tuple(range(7, 7 + size(decl)))
        rows = [np.zeros(MAXD, np.int64) for _ in decl._row_fields]
        rows_copier(decl)(src, *rows)
        for f, row in zip(decl._row_fields, rows):
            first = getattr(decl, f)
            assert row.tolist() == list(src[first : first + MAXD]), f
