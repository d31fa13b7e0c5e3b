"""What a target is: the interface that :mod:`dmlnumba.api` calls, which the CPU target
(:mod:`dmlnumba.cpu.target`) and the CUDA target (:mod:`dmlnumba.gpu.target`) are
modules of, and which :func:`dmlnumba.dispatch.resolve` hands back (mypy checks each
module against it there).  Dask arrays do not reach a target: :mod:`dmlnumba.chunked`
maps their blocks through the API, so each block meets one of these.

Arrays here are a target's own description of a caller's array (a NumPy array on the
CPU; a :class:`~dmlnumba.gpu.views.DeviceView` on CUDA); streams are raw handles (0
and None where a target has none).
"""

from typing import Any, Protocol


class Target(Protocol):
    #: "cpu" or "cuda", for messages.
    name: str
    #: The largest nonzero input the target counts (None: the coordinate type's limit).
    MAX_ELEMENTS: int | None

    def describe(self, a: Any, name: str, func: str) -> Any:
        """A caller's output array as this target's array, or a TypeError naming
        ``func`` and ``name``."""

    def empty(
        self, shape: Any, dtype: Any, stream: Any, like: Any, lib: Any = ..., func: Any = ...
    ) -> Any:
        """A new C-contiguous array of library ``lib`` beside ``like``, for ``stream``."""

    def call_stream(self, lib: Any, stream: Any, x: Any) -> Any:
        """The stream a call reading ``x`` runs on (``stream=``, else the library's)."""

    def check_stream(self, stream: Any, func: str) -> None:
        """A TypeError naming ``func`` for a ``stream=`` this target cannot take."""

    def slice1(
        self, x: Any, starts: Any, steps: Any, out: Any, stream: Any, fresh: bool = ...
    ) -> None:
        """Copy the window into ``out`` (which may overlap ``x`` unless ``fresh``)."""

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

    def nonzero_runner(self, x: Any, width: int, dtype: Any, rows: int, lib: Any) -> Any:
        """A function of an input laid out like ``x`` giving ``(count, coordinates)``
        in new arrays, or None where this target keeps none for the call."""

    def slice1_runner(self, x: Any, starts: Any, steps: Any, out_shape: Any, lib: Any) -> Any:
        """A function of an input laid out like ``x`` giving the window in a new
        array, or None."""

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
