"""What a target is, and the steps every array target shares.

A call is prepared once (:mod:`dmlnumba.prepare`, :mod:`dmlnumba.dispatch`) into a
:class:`Call`, whose ``target`` then runs it: ``target.slice1_call(call)``,
``target.nonzero_call(call)`` or ``target.argwhere_call(call)`` (:class:`Runs`).  The
array targets, the CPU (:mod:`dmlnumba.cpu.target`) and CUDA
(:mod:`dmlnumba.gpu.target`), are modules of :class:`Target`; dask arrays run on
:mod:`dmlnumba.chunked` and traced PyTorch calls on :mod:`dmlnumba.torch_ops`, both
modules of :class:`Runs`.  mypy checks each module against its protocol
(:func:`dmlnumba.dispatch.resolve` and :func:`dmlnumba.prepare.adapter`).

Arrays here are a target's own description of a caller's array (a NumPy array on the
CPU; a :class:`~dmlnumba.gpu.views.DeviceView` on CUDA); streams are raw handles (0
and None where a target has none).

The shared steps below (:func:`slice1_into`, :func:`nonzero_into`,
:func:`counted_rows`, :func:`check_out`) take the target module as ``t`` and call
only its interface, so that each target runs them as its own.
"""

from typing import Any, Protocol

from . import validation as v
from .interop import torch_out, torch_written


class Call:
    """One call, resolved once: what every later step reads instead of asking again.

    ``f`` the function's name; ``input`` the caller's input, as given (a new runner
    runs on it first, as on a repeat's); ``lib`` its library; ``target``
    the module that runs it; ``x`` the target's description of the input; ``stream``
    the call's stream handle; ``key`` where a runner made by the call is kept (None:
    none is kept), ``keep`` the function that keeps it and returns the runner kept
    (a bfloat16 input's reads such tensors: call that one).  slice1: ``starts``,
    ``steps``, ``shape`` (the output's), ``out`` (as written; ``given_out`` as
    returned: a bfloat16 tensor's float16 view is written, where ``bf16``); nonzero:
    ``width``, ``dtype``, ``rows``, ``max_count``, ``out_count``, ``out_coordinates``;
    argwhere: ``zero_d`` (a 0-d input read as shape (1,), whose rows keep no column),
    ``transposed`` (ONNX's NonZero: the rows transposed, a new C-contiguous ``(ndim,
    count)`` array).  ``args``: the caller's arguments, for targets that take them as
    given (traced calls) or
    validated only (dask: ``device`` and the parameters read once)."""

    __slots__ = (
        "f",
        "input",
        "lib",
        "target",
        "x",
        "stream",
        "device",
        "key",
        "keep",
        "bf16",
        "zero_d",
        "transposed",
        "starts",
        "steps",
        "shape",
        "out",
        "given_out",
        "width",
        "dtype",
        "rows",
        "max_count",
        "out_count",
        "out_coordinates",
        "args",
    )

    f: Any
    input: Any
    lib: Any
    target: Any
    x: Any
    stream: Any
    device: Any
    key: Any
    keep: Any
    bf16: Any
    zero_d: Any
    transposed: Any
    starts: Any
    steps: Any
    shape: Any
    out: Any
    given_out: Any
    width: Any
    dtype: Any
    rows: Any
    max_count: Any
    out_count: Any
    out_coordinates: Any
    args: Any

    def __init__(self, f: str, input: Any, lib: Any, target: Any, **fields: Any) -> None:
        self.f, self.input, self.lib, self.target = f, input, lib, target
        self.x = self.stream = self.device = self.key = self.keep = self.args = None
        self.zero_d = self.transposed = False
        self.bf16 = None
        self.starts = self.steps = self.shape = self.out = self.given_out = None
        self.width = self.dtype = self.rows = self.max_count = None
        self.out_count = self.out_coordinates = None
        for k, val in fields.items():
            setattr(self, k, val)

    def keep_and_run(self, run: Any) -> Any:
        """``run`` (a new runner, or None) kept and run on the input: None where there is
        none or it declines the input, as a repeat's may (the caller runs the call)."""
        return None if run is None else self.keep(run)(self.input)


class Runs(Protocol):
    """What runs a prepared call: every target, and the adapters (dask, traced)."""

    def slice1_call(self, c: Call) -> Any:
        """The window: a new array of the input's library, or ``call.out`` written."""

    def slice_grad_call(self, c: Call) -> Any:
        """SLICE_GRAD: a new zero-filled array of the input's library holding the
        gradient at the window's positions, or ``call.out`` zeroed and written."""

    def nonzero_call(self, c: Call) -> tuple[Any, Any]:
        """``(count, coordinates)``: new arrays, or the caller's outputs written."""

    def argwhere_call(self, c: Call) -> Any:
        """The compact ``(count, ndim)`` int64 rows (``c.transposed``: ``(ndim,
        count)``)."""


class Target(Runs, Protocol):
    #: "cpu" or "cuda", for messages.
    name: str
    #: The largest nonzero input the target counts (None: the coordinate type's limit).
    MAX_ELEMENTS: int | None
    #: Whether a new zero-filled array costs no more than an empty one.
    ZEROS_FREE: bool
    #: The window bytes a box of its complement must save to be zeroed on its own.
    ZERO_BOX_BYTES: int

    def empty_result(self, c: Call, shape: Any, dtype: Any) -> Any:
        """A new empty result of ``shape`` and ``dtype`` of the array type the call's
        results have (``c``: :func:`dmlnumba.prepare.view`'s), where they would be
        allocated; no kernel runs."""

    def describe(self, a: Any, name: str, func: str) -> Any:
        """A caller's output array as this target's array, or a TypeError naming
        ``func`` and ``name``."""

    def check_out(self, out: Any, dtype: Any, shape: Any, name: str, func: str, x: Any) -> Any:
        """A caller's output, described and checked (:func:`check_out`)."""

    def as_library(self, lib: Any, a: Any, bf16: Any = ...) -> Any:
        """A new result as an array of the input's library ``lib`` (``bf16``: float16
        bits, as that bfloat16 dtype)."""

    def empty(
        self, shape: Any, dtype: Any, stream: Any, like: Any, lib: Any = ..., func: Any = ...
    ) -> Any:
        """A new C-contiguous array of library ``lib`` beside ``like``, for ``stream``."""

    def call_stream(self, lib: Any, stream: Any, x: Any, func: str | None = None) -> Any:
        """The stream a call of ``func`` reading ``x`` runs on (``stream=``, else the
        library's); the legacy stream is refused inside a capture (CUDA's)."""

    def check_stream(self, stream: Any, func: str) -> None:
        """A ValueError or TypeError naming ``func`` for a ``stream=`` this target
        cannot take."""

    def slice1(
        self, x: Any, starts: Any, steps: Any, out: Any, stream: Any, fresh: bool = ...
    ) -> None:
        """Copy the window into ``out`` (which may overlap ``x`` unless ``fresh``)."""

    def zeros(
        self, shape: Any, dtype: Any, stream: Any, like: Any, lib: Any = ..., func: Any = ...
    ) -> Any:
        """A new zero-filled C-contiguous array, as :meth:`empty` allocates one."""

    def slice_grad(
        self, g: Any, starts: Any, steps: Any, out: Any, stream: Any, zeroed: bool
    ) -> None:
        """Write every element of ``out``: the gradient at the window's elements, zero
        elsewhere (``zeroed``: ``out`` holds zeros already)."""

    def zero_views(self, views: Any, stream: Any) -> None:
        """Set every element of each array of ``views`` to zero bits, on ``stream``."""

    def strided_view(self, a: Any, lows: Any, spacing: Any, shape: Any) -> Any:
        """The view of ``a`` of ``shape`` from index ``lows``, ``spacing`` elements
        apart in each dimension (positive)."""

    def nonzero(
        self,
        x: Any,
        width: int,
        count: Any,
        coords: Any,
        stream: Any,
        limit: Any = ...,
        func: Any = ...,
    ) -> None:
        """Write the count and at most ``limit`` coordinate rows."""

    def nonzero_runner(
        self,
        x: Any,
        width: int,
        dtype: Any,
        rows: int,
        lib: Any,
        oc: Any = ...,
        ox: Any = ...,
        stream: Any = ...,
    ) -> Any:
        """A function of inputs (and outputs) laid out like ``x`` (and the checked
        ``oc``, ``ox``) giving ``(count, coordinates)``, new where not given; None where
        an output may overlap the input or the other.  None: no runner for the call.
        ``stream``: the call's ``stream=`` (None: the library's current stream; the
        CPU's calls have none)."""

    def slice1_runner(
        self,
        x: Any,
        starts: Any,
        steps: Any,
        out_shape: Any,
        lib: Any,
        out: Any = ...,
        stream: Any = ...,
    ) -> Any:
        """Likewise for slice1: the window in a new array, or in ``out`` (a checked
        output's layout), the function then of ``(input, out)``."""

    def overlaps(self, a: Any, b: Any) -> bool:
        """Whether ``a`` and ``b`` may share memory (a cheap range test)."""

    def shares_memory(self, a: Any, b: Any) -> bool:
        """Whether ``a`` and ``b`` share memory (exact)."""

    def copy_into(self, src: Any, dst: Any, stream: Any) -> None:
        """``dst[...] = src`` (``src`` C-contiguous, as the call's own new arrays are)."""

    def leading_rows(self, coords: Any, n: int) -> Any:
        """The first ``n`` rows of a coordinates matrix."""

    def is_writeable(self, a: Any) -> bool:
        """Whether a caller's output may be written."""

    def read_count(self, count: Any, stream: Any, func: Any = ...) -> int:
        """The value of a 1-element count (on CUDA: read back, a wait)."""


class CudaTarget(Target, Protocol):
    """The CUDA target: a :class:`Target` that also reads callers' CUDA arrays."""

    def device_count(self) -> int:
        """The CUDA devices here."""

    def as_device_array(self, x: Any, device: Any, func: str, name: str, lib: Any = ...) -> Any:
        """The input (a CUDA array, or a NumPy array to upload) as a view."""

    def to_host(self, obj: Any) -> Any:
        """A CUDA array's bytes as a NumPy array of the same layout."""

    def current_device(self) -> int:
        """The ordinal of the calling thread's current device."""

    def synchronize(self, stream: Any, device: Any = ...) -> None:
        """Wait for the work queued on ``stream`` (of device ``device``)."""


# ------------------------------------------------------------------ shared steps


def check_out(
    t: Any, out: Any, dtype: Any, shape: Any, name: str, func: str, x: Any, torch: bool
) -> Any:
    """The target ``t``'s description of a caller's output array, checked (on a GPU:
    on the device the call reading ``x`` runs on), before anything is written.  A
    PyTorch tensor (``torch``, the target's answer) is checked and marked as
    PyTorch's own in-place ops do it (see :func:`~dmlnumba.interop.torch_out`)."""
    if torch:
        out = torch_out(out, dtype, name, func)
    o = t.describe(out, name, func)
    if t.name == "cuda" and o.device != x.device:
        raise ValueError(
            f"{func}(): {name} is on cuda:{o.device}, and the call runs on cuda:{x.device}; "
            f"pass an output on cuda:{x.device} (or device='cuda:{o.device}')"
        )
    v.check_out(o, dtype, shape, name, func)
    if not t.is_writeable(o):
        raise ValueError(f"{func}(): {name} is read-only")
    v.check_no_overlap(o, name, func)
    if torch:
        torch_written(out)
    return o


def slice1_call(t: Any, c: Call) -> Any:
    """slice1 on the array target ``t``: the runner the call keeps (``c.key``) where it
    writes a new array and ``t`` makes one, else :func:`slice1_into` (which keeps the
    runner of a call into ``out``)."""
    if c.key is not None and c.out is None:
        r = c.keep_and_run(t.slice1_runner(c.x, c.starts, c.steps, c.shape, c.lib, stream=c.stream))
        if r is not None:
            return r
    return slice1_into(t, c)


def slice1_into(t: Any, c: Call) -> Any:
    """slice1 on the target ``t`` (after its runner, where it keeps one): the window
    written into a new array or into the caller's ``out`` (which the target writes
    through a buffer where it overlaps the input; a checked one keeps a runner)."""
    x, f = c.x, c.f
    if c.out is None:
        ks = t.call_stream(c.lib, c.stream, x, f)
        new = t.empty(c.shape, x.dtype, ks, x, c.lib, f)
        t.slice1(x, c.starts, c.steps, t.describe(new, "out", f), ks, fresh=True)
        return t.as_library(c.lib, new, c.bf16)
    o = t.check_out(c.out, x.dtype, c.shape, "out", f, x)
    if c.key is not None:  # checked: later calls into outputs of its layout take a runner
        run = t.slice1_runner(x, c.starts, c.steps, c.shape, c.lib, o, c.stream)
        if run is not None:
            run = c.keep(run)  # a NumPy out on the CPU (no marks to repeat): written by it now
            if o is c.out and run(c.input, o) is not None:
                return c.given_out
    ks = t.call_stream(c.lib, c.stream, x, f)
    t.slice1(x, c.starts, c.steps, o, ks)
    return c.given_out


def nonzero_call(t: Any, c: Call) -> tuple[Any, Any]:
    """nonzero_coordinates on the array target ``t``: the runner the call keeps
    (``c.key``, new outputs), where ``t`` makes one, else :func:`nonzero_into`."""
    if c.key is not None and c.out_count is None and c.out_coordinates is None:
        r = c.keep_and_run(t.nonzero_runner(c.x, c.width, c.dtype, c.rows, c.lib, stream=c.stream))
        if r is not None:
            return r
    return nonzero_into(t, c)


def nonzero_into(t: Any, c: Call) -> tuple[Any, Any]:
    """nonzero_coordinates on the target ``t`` (after its runner, where it keeps
    one): the count and rows written into new arrays or the caller's outputs, whose
    checks keep the runner of later calls into outputs of their layouts.  Where
    an output overlaps the input the call writes new arrays and then copies them
    over, so that the whole input is read before anything of it is overwritten."""
    x, f, w, dt, rows, lib = c.x, c.f, c.width, c.dtype, c.rows, c.lib
    out_count, out_coordinates = c.out_count, c.out_coordinates
    oc = ox = None
    if out_count is not None:
        oc = t.check_out(out_count, dt, None, "out_count", f, x)
        if oc.size != 1:
            raise ValueError(
                f"{f}(): out_count has shape {tuple(oc.shape)}; it must hold exactly one element"
            )
    if out_coordinates is not None:
        ox = t.check_out(out_coordinates, dt, None, "out_coordinates", f, x)
        v.coordinates_matrix_shape(ox.shape, rows, w, f=f)
    if oc is not None and ox is not None and t.overlaps(oc, ox) and t.shares_memory(oc, ox):
        raise ValueError(
            f"{f}(): out_count and out_coordinates overlap in memory; the count "
            f"would overwrite a coordinate"
        )
    if c.key is not None and (oc is not None or ox is not None):  # checked: keep a runner
        run = t.nonzero_runner(x, w, dt, rows, lib, oc, ox, c.stream)
        if run is not None:
            c.keep(run)
    aliased = any(o is not None and t.overlaps(x, o) for o in (oc, ox))
    ks = t.call_stream(lib, c.stream, x, f)
    new_count = t.empty((1,), dt, ks, x, lib, f) if oc is None or aliased else None
    new_coords = t.empty((rows, w), dt, ks, x, lib, f) if ox is None or aliased else None
    wc = oc if new_count is None else t.describe(new_count, "out_count", f)
    wx = ox if new_coords is None else t.describe(new_coords, "out_coordinates", f)
    t.nonzero(x, w, wc, wx, ks, rows, func=f)
    if aliased:
        if oc is not None:
            t.copy_into(wc, oc, ks)
        if ox is not None and rows and w:
            t.copy_into(wx, t.leading_rows(ox, rows), ks)
    return (
        t.as_library(lib, new_count) if out_count is None else out_count,
        t.as_library(lib, new_coords) if out_coordinates is None else out_coordinates,
    )


def counted_rows(t: Any, x: Any, w: int, dt: Any, lib: Any, stream: Any, f: str) -> Any:
    """The compact ``(count, w)`` rows of ``x`` on the target ``t``: a counting
    launch, the count read back (a wait; refused inside a capture), then a launch
    that writes the rows into an array of exactly that many (no worst-case buffer)."""
    ks = t.call_stream(lib, stream, x, f)
    wc = t.describe(t.empty((1,), dt, ks, x, lib, f), "count", f)
    t.nonzero(x, 0, wc, wc, ks, 0, func=f)
    n = t.read_count(wc, ks, f)
    rows = t.empty((n, w), dt, ks, x, lib, f)
    if n and w:
        t.nonzero(x, w, wc, t.describe(rows, "coordinates", f), ks, n, func=f)
    return rows
