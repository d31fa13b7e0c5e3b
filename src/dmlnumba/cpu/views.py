"""The CPU kernels' views of arrays: a flat unsigned view spanning an array's
elements, with the index of element 0 in it and element strides (see
:mod:`dmlnumba.layout`), and readers that make such views of repeated inputs the
quick way."""

import functools
import operator
import sys
from typing import Any

import numpy as np

from ..dtypes import FLOAT16, is_bfloat16
from ..interop import float16_view
from ..layout import c_strides, extent, uint_of_size


def flat_view(a):
    """``(view, base, strides)``: a flat unsigned view spanning all elements of the
    non-empty array ``a``, the index of element 0 in it, and element strides.  The
    view of a read-only array (a broadcast, a read-only memory map) is flagged
    writeable (:func:`as_writeable`), so that it takes the kernels compiled for
    writeable arrays instead of compiling its own; the kernels never write their
    input."""
    u = uint_of_size(a.itemsize)
    if a.flags.c_contiguous:
        v = a.reshape(-1)
        base, es = 0, c_strides(a.shape)
    else:
        _, span, base, es = extent(a.shape, a.strides, a.itemsize)
        flip = _flip(a.strides)
        if flip is not None:
            a = a[flip]
        v = memory_order(a) if span == a.size else None
        if v is None:
            v = np.lib.stride_tricks.as_strided(a, shape=(span,), strides=(a.itemsize,))
    if v.dtype != u:
        v = v.view(u)
    if not v.flags.writeable:
        v = as_writeable(v)
    return v, base, es


def element_layout(shape, strides, itemsize, c_contiguous):
    """``(base, strides)`` of :func:`flat_view`'s view of an array of this layout,
    from the layout alone (a runner's key holds it)."""
    if c_contiguous:
        return 0, c_strides(shape)
    return extent(shape, strides, itemsize)[2:]


class _Memory:
    """The NumPy array interface of a view (its memory, flagged writeable), and the
    view itself, kept alive as long as the array made from this."""

    __slots__ = ("__array_interface__", "view")

    def __init__(self, view):
        ai = dict(view.__array_interface__)
        ai["data"] = (ai["data"][0], False)  # (address, read-only?)
        self.__array_interface__ = ai
        self.view = view


def as_writeable(v):
    """The memory of the read-only view ``v`` as an array flagged writeable, without a
    copy.  For kernel inputs only, which the kernels read and never write: numba
    types a read-only array apart from a writeable one, and would compile every
    kernel a second time for it (docs/PERFORMANCE.md)."""
    return np.asarray(_Memory(v))


def _flip(strides):
    """The index that reverses every dimension of negative stride; None where none is."""
    if all(s >= 0 for s in strides):
        return None
    return tuple(slice(None, None, -1) if s < 0 else slice(None) for s in strides)


def memory_order(a):
    """``a`` (no negative strides, its elements dense in memory: a permutation of a
    contiguous block, such as a transpose) as a 1-d view in memory order, which is
    :func:`flat_view`'s view; None where NumPy would copy.  NumPy's ``ravel("K")``
    makes it several times faster than ``as_strided`` (docs/PERFORMANCE.md)."""
    v = a.ravel("K")
    return None if v.base is None else v


def reader(x):
    """A function that gives the flat view (:func:`flat_view`) of an input laid out
    like ``x``: for C order and for dense layouts (transposes, reversals), the quick
    way.  Where ``x`` is read-only the view is flagged writeable
    (:func:`as_writeable`); a writeable ``x`` gives a function that does not look at
    the flag (it is on the path of every repeated call), so a read-only input of a
    layout first seen writeable, in a repeated call, compiles kernels of its own
    once."""
    if not x.flags.writeable:
        return lambda x: flat_view(x)[0]
    u = np.dtype(uint_of_size(x.itemsize))
    if x.dtype == u and x.flags.c_contiguous:  # unsigned already (an output): no view
        return (lambda x: x) if x.ndim == 1 else (lambda x: x.ravel())
    if x.flags.c_contiguous and x.ndim == 1:
        return lambda x: x.view(u)  # no ravel: a measurable share of a small call
    if x.flags.c_contiguous:
        return lambda x: x.ravel().view(u)
    flip = _flip(x.strides)
    y = x if flip is None else x[flip]
    if extent(x.shape, x.strides, x.itemsize)[1] == x.size and memory_order(y) is not None:
        if flip is None:
            return lambda x: x.ravel("K").view(u)
        return lambda x: x[flip].ravel("K").view(u)
    return lambda x: flat_view(x)[0]


def library_io(lib):
    """``(ready, read, give)`` for one runner's CPU arrays of library ``lib``
    (``"torch"`` or ``"jax"``), as built-in callables where the library has them:
    ``ready`` waits for an input's asynchronous work (JAX computes on streams of its
    own; None: nothing to wait for), ``read`` gives its memory as a NumPy array, in
    place (a PyTorch tensor's through :func:`_torch_reader`, the runner's own; a JAX
    array's through :func:`jax_memory`), and ``give`` is :func:`library_give`'s."""
    if lib == "torch":
        return None, _torch_reader(sys.modules["torch"], inputs=True), library_give(lib)
    ready = operator.methodcaller("block_until_ready")  # (returns the array)
    return ready, jax_memory, library_give(lib)


def jax_memory(a):
    """A JAX CPU array's memory as a NumPy array, through ``numpy.asarray`` (which JAX
    keeps read-only; a quarter of ``numpy.from_dlpack``'s time), a bfloat16 one's as
    float16: how the runners and the full path (:func:`dmlnumba.dispatch.readable`)
    read it."""
    m = np.asarray(a)
    return float16_view(m) if is_bfloat16(m.dtype) else m


def library_give(lib):
    """The function giving a new NumPy result as an array of library ``lib``
    (``"torch"`` or ``"jax"``): a tensor over its memory; a JAX CPU array of its
    values (JAX copies: it has no arrays over another's memory), made by
    ``jax.numpy.array`` with the CPU as the default device (60% of
    ``jax.dlpack.from_dlpack``'s time, which makes it the same way, from any NumPy
    dtype JAX holds: ml_dtypes' bfloat16 too)."""
    if lib == "torch":
        return sys.modules["torch"].from_numpy
    import jax
    import jax.numpy as jnp

    cpu, on, array = jax.devices("cpu")[0], jax.default_device, jnp.array

    def give(a):
        with on(cpu):  # (JAX's own default may be a GPU)
            return array(a)

    return give


#: A PyTorch tensor (an input or a caller's output) of at most this many bytes keeps
#: its NumPy view (:func:`torch_array`, 0.9 us of a 6 us call) in its runner, for a
#: repeat on the same memory.  The view holds the tensor alive, so only small ones keep
#: one.
KEEP_VIEW_BYTES = 1 << 16


class _TensorMemory:
    """A PyTorch tensor's memory as the NumPy array interface, and the tensor itself,
    kept alive as long as the array made from this."""

    __slots__ = ("__array_interface__", "_owner")
    __array_interface__: dict
    _owner: Any  # (set by the caller: an __init__ costs a new view about 0.1 us more)


@functools.cache
def _numpy_dtype(dtype):
    """The NumPy dtype of the PyTorch ``dtype`` (a TypeError where NumPy has none)."""
    name = str(dtype).rpartition(".")[2]
    try:
        return np.dtype(name)
    except TypeError:
        raise TypeError(f"NumPy has no dtype {name}") from None


def torch_interface(t, force=False):
    """The NumPy array interface of the PyTorch tensor ``t``'s memory, writeable, which
    :func:`torch_array` makes a view of.  Refused as ``Tensor.numpy`` refuses
    (TypeError, RuntimeError): a tensor off the CPU, not strided, lazily conjugated or
    negated, of a dtype NumPy lacks, or (unless ``force``, for an input only read)
    that requires grad."""
    if t.device.type != "cpu" or t.layout is not sys.modules["torch"].strided:
        raise TypeError(f"a {t.device.type} tensor of layout {t.layout} has no NumPy view")
    if t.requires_grad and not force:
        raise RuntimeError("a tensor that requires grad is read detached, not written")
    if t.is_conj() or t.is_neg():
        raise RuntimeError("a lazily conjugated or negated tensor's memory is not its values")
    dt = _numpy_dtype(t.dtype)
    n = dt.itemsize
    strides = tuple(s * n for s in t.stride())
    return {"version": 3, "typestr": dt.str, "shape": tuple(t.shape), "strides": strides,
            "data": (t.data_ptr(), False)}  # fmt: skip


def torch_array(t, force=False):
    """The PyTorch CPU tensor ``t``'s memory as a NumPy array, in place, through its
    array interface (:func:`torch_interface`): ``Tensor.numpy`` would make the
    tensor's storage unresizable for good, and the caller's ``resize_`` (or an
    ``out=`` of PyTorch's that resizes it) fail."""
    return _view(t, torch_interface(t, force))


def _view(t, interface):
    """The NumPy array of the array interface ``interface`` of ``t``'s memory."""
    m = _TensorMemory()
    m.__array_interface__ = interface
    m._owner = t
    return np.asarray(m)


def _torch_reader(torch, inputs=False):
    """:func:`torch_array` for one runner's tensors (every one of the same type, dtype,
    shape and strides: the runner's key, so the first one's interface serves all), which
    keeps the last small plain tensor's view: a repeat whose data pointer is the kept
    one's reads the same bytes through it (a tensor that has that address now holds the
    bytes there, whether the kept one still does or not).  None for a tensor whose data
    pointer is null and that has elements (its storage freed in place: the full path
    refuses it; an empty tensor's pointer is null too, and NumPy views it).  ``inputs``:
    the tensors are read only, and where they require grad (the key holds
    ``requires_grad``) their memory is read as it is: the runner of such a call (outside
    grad mode, or nonzero's) is its plain twin's.  A caller's output that requires grad
    never reaches a runner (its key has none)."""
    data_ptr = torch.Tensor.data_ptr
    Tensor = torch.Tensor
    kept: tuple = (None, None)  # (data pointer, view): one tuple, read and set whole
    interface = None

    def read(x):
        nonlocal kept, interface
        p = data_ptr(x)
        at, view = kept
        if p == at and type(x) is Tensor:
            return view
        if not p and x.numel():  # no memory (a freed storage): the full path says so
            return None
        if type(x) is not Tensor:  # a subclass (a Parameter): its own methods, every time
            return torch_array(x, inputs)
        if interface is None:
            interface = torch_interface(x, inputs)
        ai = interface.copy()
        ai["data"] = (p, False)  # (address, read-only?)
        view = _view(x, ai)
        if view.nbytes <= KEEP_VIEW_BYTES:
            kept = (p, view)
        return view

    return read


def out_view():
    """For one runner's calls, the NumPy view of a caller's output (every one of the
    same type and layout: the runner's key): a NumPy array itself, a PyTorch CPU
    tensor's memory (:func:`_torch_reader`, the last small one's view kept; None
    where its storage was freed)."""
    read: Any = None

    def view(o):
        nonlocal read
        if type(o) is np.ndarray:
            return o
        if read is None:
            read = _torch_reader(sys.modules["torch"])
        return read(o)

    return view


def library_runner(run, lib):
    """A runner of NumPy arrays giving one array (slice1's, argwhere's) as one of the
    CPU arrays of ``lib`` (:func:`library_io`): each input read in place, a new result
    given back as the library's array, as the full path gives it; with the caller's
    ``out`` (which the runner writes through its memory), what the runner returns:
    ``out`` as it is, or None (the full path must run: also where a tensor's
    storage was freed, :func:`_torch_reader`)."""
    ready, read, give = library_io(lib)
    if lib == "jax":

        def go_jax(x, *out):
            r = run(read(ready(x)), *out)
            if out or r is None:
                return r
            if r.dtype == FLOAT16 and is_bfloat16(x.dtype):  # (read as float16: jax_memory)
                r = r.view(x.dtype)
            return give(r)

        return go_jax

    def go(x, *out):
        a = read(x)
        if a is None:  # (a freed tensor: the full path refuses it)
            return None
        r = run(a, *out)
        return r if out or r is None else give(r)

    return go
