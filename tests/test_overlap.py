"""Outputs that overlap the input, against NumPy: slice1's ``out=`` and
nonzero_coordinates' ``out_count=`` / ``out_coordinates=`` as views of the input's
own buffer (forward and reversed strides, steps, offsets, permuted dimensions, 1 to
3 dimensions, several dtypes).  Each call must give NumPy's answer computed from a
copy of the input made before the call, and leave every byte of the buffer outside
the outputs as it was (the README: "an output overlapping the input works as if
the input were read first").

Each path a call can take is driven with a seeded generator, ``CALLS`` overlapping
calls each (the count is asserted, so a generator that stops drawing overlaps
fails): slice1's cached runner (a repeat with the same parameter tuples), its
general path (list parameters), its NumPy small-window copy, the parallel kernels
(``tiny_blocks``) and the CUDA target; nonzero_coordinates' serial drivers, its
parallel kernels, its runners (whose kernels test the overlap) and the CUDA target.
"""

import contextlib
import os
import time
from typing import NamedTuple

import numpy as np
import pytest
from conftest import tiny_blocks
from numpy.lib.stride_tricks import as_strided

import dmlnumba
from dmlnumba import config, keys
from dmlnumba.cpu import compiling

from devices import CUDA, SIM, ForeignCudaArray, device_pointer, to_host

#: Overlapping calls per path on the CPU (and on a real GPU).
CALLS = 2000
#: Under numba's CUDA simulator (every GPU thread a Python thread, a call 0.05-0.5 s):
#: as many calls as fit in about this many seconds for the four CUDA tests together,
#: and at least ``SIM_MIN_CALLS[op]`` per test.
SIM_SECONDS = float(os.environ.get("DMLNUMBA_TEST_SIM_SECONDS", "60"))
SIM_MIN_CALLS = {"slice1": 60, "nonzero": 30}
#: The simulator's seconds per test: slice1's calls are about a tenth of nonzero's.
SIM_SHARE = {"slice1": 1 / 6, "nonzero": 1 / 3}

SLICE_DTYPES = [np.uint8, np.int16, np.float16, np.int32, np.float32, np.int64, np.float64]
NONZERO_DTYPES = SLICE_DTYPES
COORD_DTYPES = [np.uint32, np.uint64, np.int64]


class Lay(NamedTuple):
    """A strided view of a byte buffer: byte offset of element 0, shape, element
    strides, dtype."""

    off: int
    shape: tuple
    strides: tuple
    dtype: np.dtype


def view(buf, lay):
    """The view ``lay`` of the byte buffer ``buf`` (host, or the simulator's memory)."""
    isz = lay.dtype.itemsize
    first = buf[lay.off : lay.off + isz].view(lay.dtype)
    return as_strided(first, lay.shape, tuple(s * isz for s in lay.strides))


def _strides(rng, shape, zero_ok=False):
    """Element strides for ``shape``: dimensions laid out in a random order, each
    step 1 to 3 times what the smaller ones span plus a gap, signs at random (no two
    elements share memory); with ``zero_ok``, some dimensions broadcast (stride 0)."""
    ndim = len(shape)
    strides = [0] * ndim
    reach = 1
    for d in rng.permutation(ndim):
        if zero_ok and shape[d] > 1 and rng.random() < 0.15:
            continue
        step = reach * int(rng.integers(1, 4)) + int(rng.integers(0, 2))
        strides[d] = step * (1 if rng.random() < 0.5 else -1)
        reach = abs(strides[d]) * (shape[d] - 1) + reach
    return tuple(strides)


def _bounds(shape, strides):
    """The lowest and highest element offsets from element 0."""
    lo = sum(min(0, s * (n - 1)) for n, s in zip(shape, strides))
    hi = sum(max(0, s * (n - 1)) for n, s in zip(shape, strides))
    return lo, hi


def _place(rng, layouts, slack=4):
    """``(nbytes, [Lay])``: the ``(shape, strides, dtype)`` layouts placed at random,
    element-aligned, in a buffer barely larger than the largest of them (so that
    they mostly overlap)."""
    spans = [(_bounds(sh, st), np.dtype(dt).itemsize) for sh, st, dt in layouts]
    nbytes = max((hi - lo + 1) * isz for (lo, hi), isz in spans) + 8 * int(rng.integers(0, slack))
    nbytes = -(-nbytes // 8) * 8
    out = []
    for (sh, st, dt), ((lo, hi), isz) in zip(layouts, spans):
        first = -lo
        last = nbytes // isz - 1 - hi
        out.append(Lay(int(rng.integers(first, last + 1)) * isz, sh, st, np.dtype(dt)))
    return nbytes, out


def _buffer(rng, nbytes):
    """Random bytes with half the 8-byte words zero (zeros and non-zeros for every
    dtype; NaNs and negative zeros among the floats)."""
    b = rng.integers(0, 256, nbytes, dtype=np.uint8)
    b.reshape(-1, 8)[rng.random(nbytes // 8) < 0.5] = 0
    return b


def _shares(buf, a, b):
    return bool(np.shares_memory(view(buf, a), view(buf, b)))


# ------------------------------------------------------------------------- cases


class SliceCase(NamedTuple):
    nbytes: int
    x: Lay
    out: Lay
    offsets: list
    sizes: list
    strides: list
    output_sizes: list | None


def _slice_case(rng, min_size=1):
    """A slice1 call whose ``out`` shares memory with its input (drawn until it does)."""
    while True:
        dtype = np.dtype(SLICE_DTYPES[rng.integers(len(SLICE_DTYPES))])
        ndim = int(rng.integers(1, 4))
        big = 24 if ndim == 1 else 5
        out_shape = tuple(int(n) for n in rng.integers(1, big + 1, ndim))
        if int(np.prod(out_shape)) < min_size:
            continue
        steps = [int(rng.integers(1, 4)) * (1 if rng.random() < 0.6 else -1) for _ in out_shape]
        explicit = rng.random() < 0.3
        sizes = []
        for m, t in zip(out_shape, steps):
            extra = int(rng.integers(0, 2 * abs(t) + 1)) if explicit else int(rng.integers(abs(t)))
            sizes.append((m - 1) * abs(t) + 1 + extra)
        offsets = [int(rng.integers(0, 3)) for _ in out_shape]
        in_shape = tuple(o + s + int(rng.integers(0, 3)) for o, s in zip(offsets, sizes))
        nbytes, (x, out) = _place(
            rng,
            [
                (in_shape, _strides(rng, in_shape, zero_ok=True), dtype),
                (out_shape, _strides(rng, out_shape), dtype),
            ],
        )
        case = SliceCase(
            nbytes, x, out, offsets, sizes, steps, list(out_shape) if explicit else None
        )
        if _shares(np.empty(nbytes, np.uint8), x, out):
            return case


def _slice_want(case, before):
    """The buffer NumPy says the call leaves: ``out``'s elements set from a copy of
    the input taken before the call, every other byte as it was."""
    xc = view(before, case.x).copy()
    idx = []
    for o, s, t, m in zip(case.offsets, case.sizes, case.strides, case.out.shape):
        start = o if t > 0 else o + s - 1
        idx.append(start + t * np.arange(m))
    want = before.copy()
    view(want, case.out)[...] = xc[np.ix_(*idx)]
    return want


class _Unkeyed(tuple):
    """Window parameters that no runner's key holds (a tuple subclass: its methods could
    give other values than the key read), so that every call takes the general path."""


def _params(case, kind):
    """The case's parameters as tuples (new objects), lists, or :class:`_Unkeyed`."""
    conv = {tuple: tuple, list: list, _Unkeyed: _Unkeyed}[kind]
    p = [case.offsets, case.sizes, case.strides, case.output_sizes]
    return [None if v is None else conv(v) for v in p]


class NonzeroCase(NamedTuple):
    nbytes: int
    x: Lay
    count: Lay | None
    coords: Lay | None
    width: int | None
    dtype: np.dtype
    max_count: int | None


def _nonzero_case(rng, min_size=1):
    """A nonzero_coordinates call with out_count= and/or out_coordinates= sharing
    memory with its input (and not with each other)."""
    while True:
        xdt = np.dtype(NONZERO_DTYPES[rng.integers(len(NONZERO_DTYPES))])
        cdt = np.dtype(COORD_DTYPES[rng.integers(len(COORD_DTYPES))])
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(n) for n in rng.integers(1, (20 if ndim == 1 else 5) + 1, ndim))
        size = int(np.prod(shape))
        if size < min_size:
            continue
        lead = next((d for d, n in enumerate(shape) if n > 1), ndim)
        width = int(rng.integers(ndim - lead, ndim + 1)) if rng.random() < 0.5 else None
        w = ndim if width is None else width
        max_count = int(rng.integers(0, size + 2)) if rng.random() < 0.3 else None
        rows = size if max_count is None else min(max_count, size)
        r = rows + int(rng.integers(0, 3))
        cshape = [(r, w), (1, 1, r, w), (1, 1, 1, r, w)][rng.integers(3)]
        which = rng.integers(3)  # 0: out_count only, 1: out_coordinates only, 2: both
        layouts = [(shape, _strides(rng, shape, zero_ok=True), xdt)]
        if which != 1:
            nshape = [(1,), (), (1, 1)][rng.integers(3)]
            layouts.append((nshape, (0,) * len(nshape), cdt))
        if which != 0:
            layouts.append((cshape, _strides(rng, cshape), cdt))
        nbytes, lays = _place(rng, layouts)
        x = lays[0]
        count = lays[1] if which != 1 else None
        coords = lays[-1] if which != 0 else None
        probe = np.empty(nbytes, np.uint8)
        outs = [o for o in (count, coords) if o is not None]
        if count is not None and coords is not None and _shares(probe, count, coords):
            continue  # refused (a ValueError): test_reliability covers it
        if any(_shares(probe, x, o) for o in outs):
            return NonzeroCase(nbytes, x, count, coords, width, cdt, max_count)


def _nonzero_want(case, before, after, count, coords):
    """The buffer NumPy says the call leaves (rows past the coordinates written are
    undefined: taken from ``after``), and checks of the returned arrays."""
    xc = view(before, case.x).copy()
    a = np.argwhere(xc)
    ndim = xc.ndim
    w = ndim if case.width is None else case.width
    rows = xc.size if case.max_count is None else min(case.max_count, xc.size)
    k = min(len(a), rows)
    want = before.copy()
    if case.coords is not None:
        wv, av = view(want, case.coords), view(after, case.coords)
        wv[..., k:, :] = av[..., k:, :]
        wv[..., :k, :] = a[:k, ndim - w :]
    else:
        np.testing.assert_array_equal(to_host(coords)[:k], a[:k, ndim - w :].astype(case.dtype))
    if case.count is not None:
        view(want, case.count)[...] = len(a)
    else:
        assert int(to_host(count).reshape(-1)[0]) == len(a)
    return want


# ------------------------------------------------------------------- the callers


def _call_slice(case, buf, params, make=view):
    x, out = make(buf, case.x), make(buf, case.out)
    r = dmlnumba.slice1(x, *params, out=out)
    assert r is out


def _call_nonzero(case, buf, make=view):
    oc = None if case.count is None else make(buf, case.count)
    ox = None if case.coords is None else make(buf, case.coords)
    count, coords = dmlnumba.nonzero_coordinates(
        make(buf, case.x),
        case.width,
        dtype=case.dtype,
        max_count=case.max_count,
        out_count=oc,
        out_coordinates=ox,
    )
    assert oc is None or count is oc
    assert ox is None or coords is ox
    return count, coords


def _check(got, want, case):
    if not np.array_equal(got, want):
        bad = np.flatnonzero(got != want)
        pytest.fail(f"{case}: bytes {bad[:8].tolist()}... differ from NumPy's answer")


def _slice_once(rng, case, params):
    buf = _buffer(rng, case.nbytes)
    before = buf.copy()
    _call_slice(case, buf, params)
    _check(buf, _slice_want(case, before), case)


@contextlib.contextmanager
def _kernel_calls():
    """A list of the keys of the CPU kernel calls made inside."""
    seen = []
    real = compiling.run

    def run(kernel, key, *args):
        seen.append(key)
        return real(kernel, key, *args)

    compiling.run = run
    try:
        yield seen
    finally:
        compiling.run = real


# -------------------------------------------------------------------- slice1, CPU


@pytest.mark.parametrize("kind", [tuple, list])
def test_slice1_small_window_into_a_later_output(kind):
    # Was, with tuples: [0, 6, 6, 9, 12] (NumPy's copyto does not buffer a 1-d
    # same-direction overlap of other strides).
    for _ in range(2):  # the first call, then the kept runner
        x = np.arange(24.0)
        r = dmlnumba.slice1(x, *map(kind, ((0,), (15,), (3,))), out=x[1:6])
        np.testing.assert_array_equal(r, [0, 3, 6, 9, 12])
        np.testing.assert_array_equal(x[6:], np.arange(6.0, 24.0))


def test_slice1_overlap_cached_runner(monkeypatch):
    """A repeat with the same parameter tuples and layouts takes the runner kept by
    the first call (its kernel branch: no NumPy small-window copy)."""
    monkeypatch.setattr(config, "CPU_SLICE_NUMPY_MAX", 0)
    rng = np.random.default_rng(4701)
    n = 0
    while n < CALLS:
        case = _slice_case(rng)
        params = _params(case, tuple)
        _slice_once(rng, case, params)
        buf = np.empty(case.nbytes, np.uint8)
        x, out = view(buf, case.x), view(buf, case.out)
        assert keys.window("slice1", x, *params, out, None, None)[1] is not None
        _slice_once(rng, case, params)
        n += 1
    assert n >= CALLS


def test_slice1_overlap_general_path():
    """Parameters no key holds: every call validated and copied by the general path."""
    rng = np.random.default_rng(4702)
    n = 0
    with _kernel_calls() as seen:
        while n < CALLS:
            case = _slice_case(rng)
            _slice_once(rng, case, _params(case, _Unkeyed))
            n += 1
    assert len(seen) >= CALLS  # each call ran a kernel (no NumPy copy)
    assert n >= CALLS


def test_slice1_overlap_numpy_small_window(monkeypatch):
    """Windows of at most CPU_SLICE_NUMPY_MAX elements with tuple parameters: the
    runner's NumPy copy, on the first call and on the repeat."""
    monkeypatch.setattr(config, "CPU_SLICE_NUMPY_MAX", 1 << 13)
    rng = np.random.default_rng(4703)
    n = 0
    with _kernel_calls() as seen:
        while n < CALLS:
            case = _slice_case(rng)
            params = _params(case, tuple)
            _slice_once(rng, case, params)
            _slice_once(rng, case, params)
            n += 2
    assert n >= CALLS
    assert not seen  # no kernel ran: every call was NumPy's copy


def test_slice1_overlap_parallel_kernels():
    """Tiny chunks: every window of more than one chunk runs on numba's threads."""
    rng = np.random.default_rng(4704)
    n = 0
    with tiny_blocks(), _kernel_calls() as seen:
        while n < CALLS:
            case = _slice_case(rng, min_size=config.CPU_SLICE_CHUNK + 1)
            kind = tuple if n % 2 else list
            _slice_once(rng, case, _params(case, kind))
            n += 1
    assert sum(1 for k in seen if k[-1] == "parallel") >= CALLS
    assert n >= CALLS


# ------------------------------------------------------------ nonzero_coordinates, CPU


def _nonzero_once(rng, case, call=_call_nonzero):
    buf = _buffer(rng, case.nbytes)
    before = buf.copy()
    count, coords = call(case, buf)
    _check(buf, _nonzero_want(case, before, buf, count, coords), case)


def test_nonzero_overlap_serial():
    rng = np.random.default_rng(4711)
    n = 0
    while n < CALLS:
        _nonzero_once(rng, _nonzero_case(rng))
        n += 1
    assert n >= CALLS


def test_nonzero_overlap_parallel_kernels():
    """Tiny blocks: every input of more than one block is counted and written on
    numba's threads."""
    rng = np.random.default_rng(4712)
    n = 0
    with tiny_blocks(), _kernel_calls() as seen:
        while n < CALLS:
            _nonzero_once(rng, _nonzero_case(rng, min_size=config.CPU_NONZERO_BLOCK + 1))
            n += 1
    assert sum(1 for k in seen if k[-1] == "parallel") >= CALLS
    assert n >= CALLS


def _nonzero_kept(case, buf):
    oc = None if case.count is None else view(buf, case.count)
    ox = None if case.coords is None else view(buf, case.coords)
    args = (view(buf, case.x), case.width, case.dtype, case.max_count, None, None, oc, ox)
    return keys.nonzero("nonzero_coordinates", *args)[1]


@pytest.mark.parametrize("parallel", [False, True], ids=["serial", "parallel"])
def test_nonzero_overlap_cached_runner(parallel):
    """A repeat of each call takes the runner its first call kept for these layouts,
    whose kernel finds the overlap and writes nothing (the full path then runs);
    ``parallel``: tiny blocks, every input of more than one block on numba's threads."""
    rng = np.random.default_rng(4713 + parallel)
    n = kept = 0
    with contextlib.ExitStack() as stack:
        if parallel:
            stack.enter_context(tiny_blocks())
        while n < CALLS:
            case = _nonzero_case(rng, min_size=config.CPU_NONZERO_BLOCK + 1 if parallel else 1)
            _nonzero_once(rng, case)
            kept += _nonzero_kept(case, np.empty(case.nbytes, np.uint8)) is not None
            _nonzero_once(rng, case)
            n += 2
    assert kept >= CALLS // 2 * 0.9  # (no runner for calls with no rows to write)
    assert n >= CALLS


def test_overlap_cases_cover_the_layouts():
    """The generators draw what the module says: reversed, permuted and broadcast
    inputs, reversed outputs, every dtype, explicit output sizes."""
    rng = np.random.default_rng(4799)
    cases = [_slice_case(rng) for _ in range(500)]
    assert any(min(c.x.strides) < 0 for c in cases)
    assert any(0 in c.x.strides and max(c.x.shape) > 1 for c in cases)
    assert any(min(c.out.strides) < 0 for c in cases)
    assert any(c.out.strides != tuple(sorted(c.out.strides, key=abs, reverse=True)) for c in cases)
    assert any(c.output_sizes is not None for c in cases)
    assert any(min(c.strides) < 0 for c in cases) and any(max(c.strides) > 1 for c in cases)
    assert {c.x.dtype for c in cases} == {np.dtype(d) for d in SLICE_DTYPES}
    nz = [_nonzero_case(rng) for _ in range(500)]
    for name in ("count", "coords"):
        lays = [(c, getattr(c, name)) for c in nz if getattr(c, name) is not None]
        assert any(_shares(np.empty(c.nbytes, np.uint8), c.x, o) for c, o in lays)


# ------------------------------------------------------------------------- CUDA


def test_gpu_overlap_test_finds_every_shared_byte():
    """The CUDA target's overlap test (address ranges) says yes for every drawn pair
    that shares a byte.  Under numba's simulator a kernel reads copies of its
    arguments, so a missing buffer would not show there: this checks the rule the
    GPU path takes, without a GPU."""
    from dmlnumba.gpu import target as gpu
    from dmlnumba.gpu.views import DeviceView

    def dv(buf, lay):
        v = view(buf, lay)
        return DeviceView(None, v.shape, v.strides, v.dtype, v.ctypes.data, False, 0)

    rng = np.random.default_rng(4741)
    n = 0
    while n < CALLS:
        s, z = _slice_case(rng), _nonzero_case(rng)
        sb, zb = np.empty(s.nbytes, np.uint8), np.empty(z.nbytes, np.uint8)
        assert gpu.overlaps(dv(sb, s.x), dv(sb, s.out))
        for o in (z.count, z.coords):
            if o is not None and _shares(zb, z.x, o):
                assert gpu.overlaps(dv(zb, z.x), dv(zb, o))
        n += 1


needs_cuda = pytest.mark.skipif(not CUDA, reason="needs CUDA (a GPU or the simulator)")


def _device(buf):
    """``buf`` on the device, and a maker of CAI views of it like :func:`view`'s."""
    from numba import cuda

    d = cuda.to_device(buf)
    ptr0 = device_pointer(d)

    def make(_, lay):
        isz = lay.dtype.itemsize
        strides = tuple(s * isz for s in lay.strides)
        return ForeignCudaArray(d, ptr0 + lay.off, lay.shape, strides, lay.dtype)

    return d, make


def _budget(op):
    """``(calls wanted, seconds)`` of one CUDA test of ``op``: CALLS on a GPU; under the
    simulator as many as fit in its share of SIM_SECONDS, at least SIM_MIN_CALLS."""
    return (SIM_MIN_CALLS[op], SIM_SECONDS * SIM_SHARE[op]) if SIM else (CALLS, 0.0)


@pytest.mark.varying_cases  # cases drawn until a time budget runs out
@needs_cuda
@pytest.mark.parametrize("small", [False, True])
def test_slice1_overlap_cuda(small):
    rng = np.random.default_rng(4721 + small)
    want_n, seconds = _budget("slice1")
    n = 0
    t0 = time.monotonic()
    with tiny_blocks() if small else contextlib.nullcontext():
        while n < want_n or time.monotonic() - t0 < seconds:
            case = _slice_case(rng)
            buf = _buffer(rng, case.nbytes)
            d, make = _device(buf)
            kind = tuple if n % 2 else list
            _call_slice(case, None, _params(case, kind), make)
            _check(d.copy_to_host(), _slice_want(case, buf), case)
            n += 1
    print(f"slice1 overlapping calls on CUDA ({'simulator' if SIM else 'GPU'}): {n}")
    assert n >= want_n


@pytest.mark.varying_cases  # cases drawn until a time budget runs out
@needs_cuda
@pytest.mark.parametrize("small", [False, True])
def test_nonzero_overlap_cuda(small):
    rng = np.random.default_rng(4731 + small)
    want_n, seconds = _budget("nonzero")
    n = 0
    t0 = time.monotonic()
    with tiny_blocks() if small else contextlib.nullcontext():
        while n < want_n or time.monotonic() - t0 < seconds:
            case = _nonzero_case(rng)
            buf = _buffer(rng, case.nbytes)
            d, make = _device(buf)
            count, coords = _call_nonzero(case, None, make)
            after = d.copy_to_host()
            _check(after, _nonzero_want(case, buf, after, count, coords), case)
            n += 1
    print(f"nonzero_coordinates overlapping calls on CUDA ({'simulator' if SIM else 'GPU'}): {n}")
    assert n >= want_n
