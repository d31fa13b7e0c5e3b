"""Hypothesis strategies: arrays of every dtype, rank 1-8, in every memory layout,
with the special values that break sloppy implementations."""

import numpy as np
from hypothesis import strategies as st

DML_DTYPES = [
    "float64",
    "float32",
    "float16",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint64",
    "uint32",
    "uint16",
    "uint8",
]
NONZERO_DTYPES = DML_DTYPES + ["bool"]
LAYOUTS = ["C", "F", "reversed", "strided", "permuted", "broadcast"]

# Special float bit patterns: -0.0, NaNs with payloads (quiet and signalling,
# both signs), +-inf, the smallest subnormal.
SPECIAL_BITS = {
    2: [0x8000, 0x7E01, 0xFD55, 0x7C01, 0x7C00, 0xFC00, 0x0001],
    4: [0x80000000, 0x7FC00001, 0xFFC12345, 0x7F800001, 0x7F800000, 0xFF800000, 0x00000001],
    8: [
        0x8000000000000000,
        0x7FF8000000000001,
        0xFFF123456789ABCD,
        0x7FF0000000000001,
        0x7FF0000000000000,
        0xFFF0000000000000,
        0x0000000000000001,
    ],
}


def uint_of(dtype):
    return np.dtype(f"u{np.dtype(dtype).itemsize}")


def bits(a):
    """The raw bits of an array (bool as uint8), for bit-exact comparisons."""
    a = np.asarray(a)
    return a.view(uint_of(a.dtype))


def fill(rng, dtype, n, density):
    """``n`` random values of ``dtype``: a ``density`` fraction non-zero, with
    -0.0, NaN payloads and infinities mixed in for floats."""
    dtype = np.dtype(dtype)
    u = uint_of(dtype)
    if dtype.kind == "b":
        return rng.random(n) < density
    raw = rng.integers(0, np.iinfo(u).max, size=n, dtype=u, endpoint=True)
    if dtype.kind == "f":
        # Keep most values finite and tame, then plant the specials.
        vals = (rng.standard_normal(n) * 100).astype(dtype)
        raw = vals.view(u).copy()
        special = np.array(SPECIAL_BITS[dtype.itemsize], dtype=u)
        pick = rng.random(n) < 0.2
        raw[pick] = special[rng.integers(0, len(special), size=int(pick.sum()))]
    out = raw.view(dtype).copy()
    zero = rng.random(n) >= density
    if dtype.kind == "f":
        # Zeros of both signs.
        neg = rng.random(n) < 0.5
        out[zero & neg] = -0.0
        out[zero & ~neg] = 0.0
    else:
        out[zero] = 0
    return out


@st.composite
def shapes(draw, min_dims=1, max_dims=8, max_side=6, max_size=3000, allow_zero=False):
    ndim = draw(st.integers(min_dims, max_dims))
    lo = 0 if allow_zero else 1
    shape = []
    size = 1
    for _ in range(ndim):
        cap = max(1, min(max_side, max_size // max(size, 1)))
        n = draw(st.integers(lo, cap))
        shape.append(n)
        size *= max(n, 1)
    return tuple(shape)


@st.composite
def laid_out(draw, base_values, shape, layout):
    """An array of ``shape`` holding ``base_values`` (enough values for it) in a
    memory ``layout``, every choice drawn (so that a failure shrinks to it);
    returns a view whose strides show that layout."""
    dtype = base_values.dtype
    ndim = len(shape)
    size = int(np.prod(shape))

    def flags():
        return draw(st.lists(st.booleans(), min_size=ndim, max_size=ndim))

    if layout == "C":
        return base_values[:size].reshape(shape)
    if layout == "F":
        return np.asfortranarray(base_values[:size].reshape(shape))
    if layout == "reversed":
        a = base_values[:size].reshape(shape)
        return a[tuple(slice(None, None, -1) if f else slice(None) for f in flags())]
    if layout == "strided":
        steps = draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim))
        big = tuple(max(1, (n - 1) * s + 1) if n else 0 for n, s in zip(shape, steps))
        store = np.zeros(big, dtype)
        view = store[tuple(slice(None, None, s) for s in steps)]
        view[...] = base_values[:size].reshape(shape)
        return view
    if layout == "permuted":
        perm = draw(st.permutations(range(ndim)))
        inv = np.argsort(perm)
        a = base_values[:size].reshape(tuple(shape[p] for p in perm))
        return a.transpose(inv)
    if layout == "broadcast":
        # Broadcast some dimensions (stride 0) from size 1.
        small = tuple(1 if f else n for f, n in zip(flags(), shape))
        a = np.resize(base_values, int(np.prod(small))).reshape(small)
        return np.broadcast_to(a, shape)
    raise ValueError(layout)


def values(dtype, n):
    """``n`` values of ``dtype``, drawn as raw bits: zeros of both signs, the special
    float patterns (NaN payloads, infinities, subnormals) and any other bits, with
    runs of one fill value (so that mostly-zero and all-non-zero arrays both come up)."""
    from hypothesis.extra import numpy as hnp

    dtype = np.dtype(dtype)
    u = uint_of(dtype)
    if dtype.kind == "b":
        bits_ = st.integers(0, 1)
        fills = st.sampled_from([0, 1])
    else:
        top = int(np.iinfo(u).max)
        zeros = [0, 1 << (8 * dtype.itemsize - 1)] if dtype.kind == "f" else [0]
        specials = SPECIAL_BITS.get(dtype.itemsize, []) if dtype.kind == "f" else [top, 1]
        bits_ = st.one_of(st.sampled_from(zeros), st.sampled_from(specials), st.integers(0, top))
        fills = st.sampled_from(zeros + [1])
    return hnp.arrays(u, n, elements=bits_, fill=fills).map(lambda a: a.view(dtype))


@st.composite
def arrays(draw, dtypes=DML_DTYPES, allow_zero=False, max_dims=8):
    """An array of a drawn dtype, shape, layout and values (all drawn directly)."""
    shape = draw(shapes(allow_zero=allow_zero, max_dims=max_dims))
    dtype = draw(st.sampled_from(dtypes))
    layout = draw(st.sampled_from(LAYOUTS))
    base = draw(values(dtype, max(int(np.prod(shape)), 1)))
    a = draw(laid_out(base, shape, layout))
    assert a.shape == shape
    return a


@st.composite
def windows(draw, shape):
    """Random SLICE1 parameters inside ``shape`` (no empty dimension): offsets,
    sizes, signed strides (also larger than the window), output sizes up to
    the maximum (or None)."""
    offsets, sizes, strides, outs = [], [], [], []
    for n in shape:
        o = draw(st.integers(0, n - 1))
        s = draw(st.integers(1, n - o))
        t = draw(st.integers(1, s + 2)) * draw(st.sampled_from([1, -1]))
        most = 1 + (s - 1) // abs(t)
        offsets.append(o)
        sizes.append(s)
        strides.append(t)
        outs.append(draw(st.integers(1, most)))
    use_outs = draw(st.booleans())
    return tuple(offsets), tuple(sizes), tuple(strides), (tuple(outs) if use_outs else None)


def slice1_reference(x, offsets, sizes, strides, output_sizes=None):
    """SLICE1 through NumPy indexing, straight from the spec's formula."""
    idx = []
    for d, (o, s, t) in enumerate(zip(offsets, sizes, strides)):
        most = 1 + (s - 1) // abs(t)
        m = most if output_sizes is None else output_sizes[d]
        start = o if t > 0 else o + s - 1
        idx.append(start + t * np.arange(m))
    return x[np.ix_(*idx)]


def slice_grad_reference(g, input_shape, offsets, sizes, strides):
    """SLICE_GRAD straight from the spec: zeros, then each gradient element at the
    position SLICE1 reads it from (NumPy's fancy-index assignment)."""
    out = np.zeros(input_shape, g.dtype)
    idx = []
    for o, s, t, m in zip(offsets, sizes, strides, g.shape):
        start = o if t > 0 else o + s - 1
        idx.append(start + t * np.arange(m))
    out[np.ix_(*idx)] = g
    return out


@st.composite
def odd_outs(draw, shape, dtype, kind):
    """A writeable output of ``shape`` with odd strides inside a larger poisoned
    buffer, every choice drawn.  Returns ``(buf, view_of)``: ``view_of(buf)`` is the
    output, and ``view_of`` applied to a copy of the buffer shows where the output
    lies, so that tests can check that nothing outside it was written."""
    dtype = np.dtype(dtype)
    u = uint_of(dtype)
    poison = draw(values(dtype, 1).filter(lambda a: a.view(u)[0] != 0))[0]
    shape = tuple(shape)
    if kind == "C":
        return np.full(shape, poison, dtype), lambda b: b
    if kind == "F":
        return np.full(shape, poison, dtype, order="F"), lambda b: b
    if kind == "permuted":
        perm = draw(st.permutations(range(len(shape))))
        inv = np.argsort(perm)
        buf = np.full(tuple(shape[p] for p in perm), poison, dtype)
        return buf, lambda b: b.transpose(inv)
    # "strided": gaps, some dimensions reversed, and a spare element at each end.
    steps = [draw(st.integers(1, 2)) * draw(st.sampled_from([1, 1, -1])) for _ in shape]
    big = tuple((n - 1) * abs(t) + 3 for n, t in zip(shape, steps))
    idx = tuple(
        slice(1, 1 + (n - 1) * t + 1, t) if t > 0 else slice(1 + (n - 1) * -t, 0, t)
        for n, t in zip(shape, steps)
    )
    return np.full(big, poison, dtype), lambda b: b[idx]


def check_written(buf_before, buf_after, view_of, expected):
    """The output view holds ``expected`` bit for bit and the rest of the buffer is
    unchanged."""
    want = buf_before.copy()
    view_of(want)[...] = expected
    np.testing.assert_array_equal(bits(buf_after), bits(want))
