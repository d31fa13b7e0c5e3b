"""The whole argument surface, fuzzed: whatever a caller passes (subclasses, lists,
tuples, dicts, sets, generators, None, bools, NumPy scalars, huge ints, NaN,
strings, odd layouts and aliased outputs), a call returns the right result or
raises ValueError/TypeError, and every ``out`` array is unchanged after an error.

A result is checked against an independent oracle: the window computed with
NumPy fancy indexing from the parameters read as plain ints, or ``numpy.argwhere``.
CI runs this file under ``NUMBA_BOUNDSCHECK=1`` too, so a kernel handed an array
its checks never saw fails loudly there instead of writing out of bounds.
"""

import math
import operator

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from mutating import Index, Seq

import dmlnumba

from devices import CUDA
from strategies import NONZERO_DTYPES

pytestmark = pytest.mark.boundscheck  # CI runs these again with NUMBA_BOUNDSCHECK=1

# DirectML's dtypes and bool, byte-swapped ones, then dtypes both operators refuse.
DTYPES = NONZERO_DTYPES + [">f4", ">i8", ">f2", "complex64", "object", ">c8", "U2"]

ODD_VALUES = [
    None,
    True,
    False,
    np.bool_(True),
    1.0,
    math.nan,
    math.inf,
    "1",
    b"1",
    2**70,
    -(2**70),
    2**63,
    np.int8(1),
    np.uint64(2**63),
    np.float32(1.0),
    object(),
    [1],
    {},
    set(),
]


@st.composite
def arrays(draw, max_dims=4, max_side=4):
    """A small array of a drawn dtype in a drawn layout (possibly a subclass)."""
    ndim = draw(st.integers(0 if draw(st.booleans()) else 1, max_dims))
    shape = tuple(
        draw(st.integers(0 if draw(st.integers(0, 9)) == 0 else 1, max_side)) for _ in range(ndim)
    )
    dtype = draw(st.sampled_from(DTYPES))
    n = int(np.prod(shape))
    if dtype == "object":
        a = np.empty(shape, object)
    elif dtype == "U2":
        a = np.full(shape, "ab")
    else:
        vals = draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n))
        a = np.array(vals, np.int64).astype(dtype).reshape(shape)
    layout = draw(st.sampled_from(["C", "F", "reversed", "strided", "permuted", "broadcast"]))
    if layout == "F":
        a = np.asfortranarray(a)
    elif layout == "reversed" and ndim:
        a = np.ascontiguousarray(a[(slice(None, None, -1),) * ndim])[
            (slice(None, None, -1),) * ndim
        ]
    elif layout == "strided" and ndim:
        big = np.zeros(tuple(2 * s for s in shape), a.dtype)
        big[(slice(None, None, 2),) * ndim] = a
        a = big[(slice(None, None, 2),) * ndim]
    elif layout == "permuted" and ndim > 1:
        a = np.ascontiguousarray(a.transpose()).transpose()
    elif layout == "broadcast" and ndim:
        a = np.broadcast_to(a[(slice(0, 1),) + (slice(None),) * (ndim - 1)], shape)
    kind = draw(
        st.sampled_from(["ndarray"] * 6 + ["matrix", "masked", "recarray", "list", "scalar"])
    )
    if kind == "matrix" and ndim == 2:
        return a.view(np.matrix)
    if kind == "masked":
        return np.ma.masked_array(a, mask=np.zeros(shape, bool))
    if kind == "recarray":
        return a.view(np.recarray)
    if kind == "list":
        return a.tolist()
    if kind == "scalar":
        return a.dtype.type(0) if a.dtype.kind not in "OU" else None
    return a


def _int_params(draw, shape, name):
    """A valid or nearly valid parameter tuple, in a drawn container."""
    ndim = len(shape)
    base = []
    for n in shape:
        if name == "offsets":
            base.append(draw(st.integers(0, max(0, n - 1))))
        elif name == "sizes":
            base.append(draw(st.integers(1, max(1, n))))
        elif name == "strides":
            base.append(draw(st.sampled_from([1, 2, 3, -1, -2, 5])))
        else:
            base.append(draw(st.integers(1, 3)))
    mutation = draw(st.sampled_from(["none"] * 8 + ["value", "length", "container"]))
    if mutation == "value" and base:
        base[draw(st.integers(0, ndim - 1))] = draw(st.sampled_from(ODD_VALUES + [0, -1]))
    elif mutation == "length":
        base = base[:-1] if base and draw(st.booleans()) else base + [0]
    container = draw(
        st.sampled_from(
            ["tuple"] * 4
            + ["list", "ndarray", "range-like", "dict", "set", "generator", "None", "int"]
        )
    )
    if mutation != "container" and container in ("dict", "set", "generator", "None", "int"):
        container = "tuple"
    if container == "list":
        return list(base)
    if container == "ndarray":
        try:
            return np.array(base)
        except (ValueError, TypeError, OverflowError):
            return tuple(base)
    if container == "dict":
        return {i: v for i, v in enumerate(base)}
    if container == "set":
        return (
            set(base)
            if all(isinstance(v, (int, float, str, bytes, type(None))) for v in base)
            else frozenset()
        )
    if container == "generator":
        return (v for v in base)
    if container == "None":
        return None
    if container == "int":
        return 1
    return tuple(base)


def _as_ints(p):
    """The oracle's reading of a parameter: plain ints, or None where it is no int
    sequence at all (then the call must not have succeeded)."""
    if isinstance(p, np.ndarray):
        if p.ndim != 1 or p.dtype.kind not in "iu":
            return None
        return [int(v) for v in p.tolist()]
    if not isinstance(p, (tuple, list, range)):
        return None
    out = []
    for v in p:
        if isinstance(v, (bool, np.bool_)):
            return None
        try:
            out.append(operator.index(v))
        except TypeError:
            return None
    return out


def _bits(a):
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind in "fiub" else a


def _snapshot(o):
    return None if not isinstance(o, np.ndarray) else np.array(o, copy=True)


def _unchanged(o, snap):
    if snap is None:
        return True
    now = np.asarray(o)
    return _bits(now).tobytes() == _bits(snap).tobytes()


DEVICES = st.sampled_from(
    [None] * 8 + ["cpu", "CPU", "cuda", "cuda:0", "cuda:99", "cuda:٣", "tpu", 0, b"cpu"]
)


def _expected_window(x, off, siz, stp, outs):
    idx = []
    for d in range(x.ndim):
        start = off[d] if stp[d] > 0 else off[d] + siz[d] - 1
        m = outs[d] if outs is not None else 1 + (siz[d] - 1) // abs(stp[d])
        idx.append(start + stp[d] * np.arange(m))
    return x[np.ix_(*idx)]


@given(st.data())
def test_slice1_argument_surface(data):
    draw = data.draw
    x = draw(arrays())
    shape = np.shape(x) if isinstance(x, np.ndarray) else (2, 2)
    off = _int_params(draw, shape, "offsets")
    siz = _int_params(draw, shape, "sizes")
    stp = _int_params(draw, shape, "strides")
    outs = draw(st.one_of(st.none(), st.just("param")))
    if outs == "param":
        outs = _int_params(draw, shape, "output_sizes")
    device = draw(DEVICES)
    out_kind = draw(
        st.sampled_from(
            ["none"] * 3
            + [
                "right",
                "matrix",
                "wrong-dtype",
                "readonly",
                "aliased",
                "broadcast",
                "list",
                "masked",
            ]
        )
    )
    out = None
    xi = np.asarray(x) if isinstance(x, np.ndarray) else None
    oi, si, ti = _as_ints(off), _as_ints(siz), _as_ints(stp)
    ui = None if outs is None else _as_ints(outs)
    want = None
    if xi is not None and None not in (oi, si, ti) and (outs is None or ui is not None):
        try:
            want = _expected_window(xi, oi, si, ti, ui)
        except (IndexError, ValueError, ZeroDivisionError, TypeError, OverflowError):
            want = None
    if out_kind != "none" and want is not None:
        wshape = want.shape
        if out_kind == "right":
            out = np.full(wshape, 3, want.dtype)
        elif out_kind == "matrix" and len(wshape) == 2:
            out = np.full(wshape, 3, want.dtype).view(np.matrix)
        elif out_kind == "wrong-dtype":
            out = np.full(wshape, 3, np.float64 if want.dtype != np.float64 else np.float32)
        elif out_kind == "readonly":
            out = np.full(wshape, 3, want.dtype)
            out.flags.writeable = False
        elif (
            out_kind == "aliased"
            and xi.flags.writeable
            and xi.size >= want.size
            and xi.dtype == want.dtype
            and xi.flags.c_contiguous
        ):
            out = xi.reshape(-1)[: want.size].reshape(wshape)
        elif out_kind == "broadcast" and want.size > 1:
            out = np.lib.stride_tricks.as_strided(
                np.full(1, 3, want.dtype), wshape, (0,) * len(wshape)
            )
        elif out_kind == "list":
            out = np.full(wshape, 3, want.dtype).tolist()
        elif out_kind == "masked":
            out = np.ma.masked_array(np.full(wshape, 3, want.dtype))
    snap = _snapshot(out)
    aliased = (
        out is not None
        and xi is not None
        and isinstance(out, np.ndarray)
        and np.shares_memory(out, xi)
    )
    want_bits = None if want is None else np.array(_bits(want), copy=True)
    try:
        r = dmlnumba.slice1(x, off, siz, stp, outs, out=out, device=device)
    except (ValueError, TypeError) as e:
        event(f"slice1 raised {type(e).__name__}")
        assert aliased or _unchanged(out, snap)
        return
    event("slice1 returned")
    # Success: only possible for an array input and int parameters, and exactly right.
    assert want_bits is not None, (off, siz, stp, outs)
    if device is not None and not isinstance(r, np.ndarray):
        r = r.copy_to_host()
    assert np.asarray(r).shape == want_bits.shape
    np.testing.assert_array_equal(_bits(r), want_bits)
    if out is not None:
        assert r is out


@given(st.data())
def test_nonzero_argument_surface(data):
    draw = data.draw
    x = draw(arrays())
    width = draw(st.one_of(st.none(), st.integers(-1, 5), st.sampled_from(ODD_VALUES)))
    dtype = draw(
        st.sampled_from(
            [
                np.uint32,
                np.uint64,
                np.int64,
                "uint32",
                "int64",
                np.float32,
                np.int32,
                "nonsense",
                None,
                [],
                3,
            ]
        )
    )
    device = draw(DEVICES)
    # Lists are read as numpy.asarray reads them (as argwhere's inputs are).
    xi = np.asarray(x) if isinstance(x, (np.ndarray, list)) else None
    ok_width = None
    if xi is not None and 1 <= xi.ndim <= 8:
        ok_width = xi.ndim if width is None else width
    count_kind = draw(
        st.sampled_from(
            ["none"] * 3 + ["right", "2d", "wrong", "readonly", "inside-coords", "list"]
        )
    )
    coords_kind = draw(
        st.sampled_from(
            ["none"] * 3 + ["right", "padded", "short", "matrix", "aliased", "readonly"]
        )
    )
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = np.dtype(np.uint32)
    if dt not in (np.uint32, np.uint64, np.int64):
        dt = np.dtype(np.uint32)
    n = xi.size if xi is not None else 4
    w = (
        ok_width
        if isinstance(ok_width, int) and not isinstance(ok_width, bool) and 0 <= ok_width <= 8
        else 1
    )
    backing = np.full(n * w + 8, 77, dt)
    out_count = out_coordinates = None
    if count_kind == "right":
        out_count = np.full(1, 77, dt)
    elif count_kind == "2d":
        out_count = np.full((1, 1), 77, dt)
    elif count_kind == "wrong":
        out_count = np.full(2, 77, dt)
    elif count_kind == "readonly":
        out_count = np.full(1, 77, dt)
        out_count.flags.writeable = False
    elif count_kind == "inside-coords":
        out_count = backing[:1]
    elif count_kind == "list":
        out_count = [0]
    if coords_kind == "right":
        out_coordinates = backing[: n * w].reshape(n, w)
    elif coords_kind == "padded":
        out_coordinates = np.full((1, 1, n + 2, w), 77, dt)
    elif coords_kind == "short" and n:
        out_coordinates = np.full((n - 1, w), 77, dt)
    elif coords_kind == "matrix":
        out_coordinates = backing[: n * w].reshape(n, w).view(np.matrix)
    elif (
        coords_kind == "aliased"
        and xi is not None
        and xi.dtype == dt
        and xi.flags.c_contiguous
        and xi.flags.writeable
        and xi.size >= n * w
        and w
    ):
        out_coordinates = xi.reshape(-1)[: n * w].reshape(n, w)
    elif coords_kind == "readonly":
        out_coordinates = np.full((n, w), 77, dt)
        out_coordinates.flags.writeable = False
    snaps = [_snapshot(o) for o in (out_count, out_coordinates)]
    aliased = xi is not None and any(
        isinstance(o, np.ndarray) and np.shares_memory(o, xi) for o in (out_count, out_coordinates)
    )
    ref = None if xi is None or xi.dtype.kind not in "fiub" else np.argwhere(xi)
    try:
        count, coords = dmlnumba.nonzero_coordinates(
            x,
            width,
            dtype=dtype,
            out_count=out_count,
            out_coordinates=out_coordinates,
            device=device,
        )
    except (ValueError, TypeError) as e:
        event(f"nonzero raised {type(e).__name__}")
        if not aliased:
            assert _unchanged(out_count, snaps[0]) and _unchanged(out_coordinates, snaps[1])
        return
    event("nonzero returned")
    assert ref is not None and 1 <= xi.ndim <= 8
    if not isinstance(count, np.ndarray):
        count, coords = count.copy_to_host(), coords.copy_to_host()
    k = int(np.asarray(count).reshape(-1)[0])
    assert k == len(ref)
    c = np.asarray(coords)  # (R, N) or DirectML's padded (1, 1, R, N); N may be 0
    got = c.reshape(c.shape[-2], c.shape[-1])[:k]
    wid = got.shape[1]
    assert xi.ndim - wid >= 0
    np.testing.assert_array_equal(got, ref[:, xi.ndim - wid :])
    if out_count is not None:
        assert count is out_count
    if out_coordinates is not None:
        assert coords is out_coordinates


@given(x=arrays(), device=DEVICES)
def test_argwhere_argument_surface(x, device):
    try:
        r = dmlnumba.argwhere(x, device=device)
    except (ValueError, TypeError) as e:
        event(f"argwhere raised {type(e).__name__}")
        return
    event("argwhere returned")
    xi = np.asarray(x)
    if not isinstance(r, np.ndarray):
        r = r.copy_to_host()
    np.testing.assert_array_equal(r, np.argwhere(xi))
    assert r.dtype == np.int64


@pytest.mark.skipif(CUDA, reason="checks the error where CUDA is unavailable")
def test_fuzz_saw_cuda_refused():
    with pytest.raises(ValueError, match=r"^argwhere\(\)"):
        dmlnumba.argwhere(np.ones(2), device="cuda")


# ---------------------------------------------------------------- parameters that change the input


class _DType:
    """A dtype-like object whose ``dtype`` attribute first changes the input."""

    def __init__(self, act):
        self.act = act

    @property
    def dtype(self):
        self.act()
        return np.dtype(np.uint32)


@st.composite
def _changing_input(draw):
    """``(x, act)``: a C-contiguous array that owns its memory, and a function that
    changes it the same way however often it runs: a new shape of the same size, a
    resize (a new buffer, larger or smaller), or new values written into it."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    dtype = draw(st.sampled_from(["uint8", "int16", "float32", "float64"]))
    x = np.empty(shape, dtype)  # owns its memory (a resize may replace it)
    x[...] = (np.arange(x.size) % 3).reshape(shape)
    how = draw(st.sampled_from(["reshape", "resize", "write"]))
    if how == "reshape":
        new = draw(st.permutations(shape + (1,) * draw(st.integers(0, 2))))
        new = tuple(new)

        def act():
            x.shape = new

    elif how == "resize":
        new = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))

        def act():
            if x.shape != new:
                x.resize(new, refcheck=False)

    else:
        fill = draw(st.integers(0, 1))

        def act():
            x[...] = fill

    event(f"input changed by {how}")
    return x, act


def _wrap(draw, values, act):
    """``values`` (a tuple of ints) with ``act`` in one of its hooks, or as it is."""
    hook = draw(st.sampled_from(["__index__", "__len__", "__iter__", "none"]))
    if hook == "__index__" and values:
        i = draw(st.integers(0, len(values) - 1))
        return values[:i] + (Index(values[i], act),) + values[i + 1 :]
    if hook in ("__len__", "__iter__"):
        return Seq(values, act, hook[2:-2])
    return values


@given(st.data())
def test_parameters_that_change_the_input(data):
    """A parameter whose ``__index__``, ``__len__`` or ``__iter__`` (or a dtype whose
    ``dtype``) reshapes, resizes or writes the input: the call gives the result for
    the input as the kernel saw it (its layout after the call, checked against it) or
    raises ValueError/TypeError; never a read past a buffer (CI runs this under
    NUMBA_BOUNDSCHECK=1, which would raise IndexError)."""
    draw = data.draw
    x, act = draw(_changing_input())
    op = draw(st.sampled_from(["slice1", "nonzero"]))
    if op == "slice1":
        ndim = x.ndim
        off = tuple(draw(st.integers(0, 2)) for _ in range(ndim))
        siz = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
        stp = tuple(draw(st.sampled_from([1, 2, -1, -3])) for _ in range(ndim))
        params = [off, siz, stp]
        k = draw(st.integers(0, 2))
        params[k] = _wrap(draw, params[k], act)
        try:
            r = dmlnumba.slice1(x, *params)
        except (ValueError, TypeError) as e:
            event("slice1 raised")
            assert str(e).startswith("slice1(): ")
            # The parameters really are out of range for the input as it is now.
            if x.ndim == ndim:
                assert any(o + s > n for o, s, n in zip(off, siz, x.shape))
            return
        event("slice1 returned")
        assert x.ndim == ndim
        np.testing.assert_array_equal(r, _expected_window(x, off, siz, stp, None))
        return
    width = draw(st.one_of(st.none(), st.integers(0, 4)))
    hook = draw(st.sampled_from(["width", "max_count", "dtype"]))
    max_count = None
    dtype = np.uint32
    if hook == "width" and width is not None:
        width = Index(width, act)
    elif hook == "max_count":
        max_count = Index(draw(st.integers(0, 70)), act)
    else:
        dtype = _DType(act)
    try:
        count, coords = dmlnumba.nonzero_coordinates(x, width, dtype=dtype, max_count=max_count)
    except (ValueError, TypeError) as e:
        event("nonzero raised")
        assert str(e).startswith("nonzero_coordinates(): ")
        return
    event("nonzero returned")
    ref = np.argwhere(x)
    k = int(count[0])
    assert k == len(ref)
    m = k if max_count is None else min(k, max_count.value)
    w = coords.shape[1]
    assert coords.shape[0] >= m and w <= x.ndim
    np.testing.assert_array_equal(coords[:m], ref[:m, x.ndim - w :])
