"""Compiling and launching the CUDA kernels.

Kernels compile lazily, once per bit width, and are cached on disk.  On a GPU
each is compiled for raw device pointers (``CPointer`` arguments), so that a
launch passes plain integers: ``cuLaunchKernel`` with the function handle, geometry,
stream and parameter block bound (:func:`launcher`), and no per-call argument typing.
Under the simulator, the same Python function is an ordinary kernel over arrays.

Two numba-cuda details are not documented API, so numba-cuda's version is pinned
to the tested range (``pyproject.toml``; ``tests/test_import.py`` checks the
installed one): the compiled kernel's function handle (``kernel.library.get_cufunc()``,
attributes without an underscore), and the launch arguments of an array
parameter (numba's array ABI, :func:`array_arg`).  Nothing else of numba-cuda's is
used beyond its public ``cuda.jit``, ``cuda.to_device`` and array interfaces.
"""

import copy
import ctypes
import functools
import threading

from numba import cuda, types

from .. import config
from .._internals import function_handle
from ..caches import Bounded
from ..cpu.cachefile import checked
from ..params import NONZERO_CUDA, SLICE_CUDA, SLICE_GATHER_CUDA, SLICE_GRAD_CUDA, size
from .grad_kernel import make_grad, pairs_of
from .memory import check
from .nonzero_kernel import make_nonzero
from .sim import SIM
from .slice_kernel import gather_loads, make_gather, make_slice

_UINT = {8: types.uint8, 16: types.uint16, 32: types.uint32, 64: types.uint64}
_kernels = Bounded()
_functions = Bounded()
_resident = Bounded()
#: Held while a kernel compiles or its module loads, the first time: numba-cuda's
#: module loading is not thread-safe.  Two threads launching a kernel for the first
#: time at once (a threaded dask graph of CuPy chunks) raised "key already in
#: dictionary: <CUlibrary ...>" in ``get_cufunc`` under ``CUDA_LAUNCH_BLOCKING=1``,
#: and without it an illegal address or wrong coordinates (docs/GPU.md).
_first_use = threading.Lock()


def python_kernel(name, src_bits, variant=(False, 0), regs=0):
    """The kernel's Python function for ``src_bits``-bit elements (``variant``: the
    nonzero kernel's ``(narrow, staged[, transposed])``, see :func:`make_nonzero`; the
    slice kernel's ``(narrow, swap)``, see :func:`make_slice`), to be compiled with
    the register cap ``regs`` (0: none).  The cap is one of the function's closure
    cells: numba's disk cache keys an entry by the closure's contents but not by
    ``max_registers``, so without it a kernel cached under one cap was loaded under
    another (a changed ``CUDA_NONZERO_MAX_REGISTERS`` never reached a warm cache)."""
    if name == "slice":
        return make_slice(_UINT[src_bits], *variant, regs=regs)
    if name == "gather":
        return make_gather(_UINT[src_bits], gather_loads(src_bits))
    if name == "grad":
        return make_grad(_UINT[src_bits], pairs_of(variant[0]))
    return make_nonzero(128 // src_bits, _UINT[src_bits], *variant, regs=regs)


def signature(name, src_bits, out_bits=0):
    """The kernel's signature: its parameter block by value first (a tuple of
    int64, which the launch passes as that many kernel parameters), then the
    arrays as raw pointers (the look-back buffer as a 1-d array, for atomics)."""
    u = _UINT[src_bits]
    p = types.CPointer
    args: tuple[types.Type, ...]
    if name in ("slice", "gather", "grad"):
        block = {"slice": SLICE_CUDA, "gather": SLICE_GATHER_CUDA, "grad": SLICE_GRAD_CUDA}[name]
        args = (types.UniTuple(types.int64, size(block)), p(u), p(u))
    else:
        o = _UINT[out_bits]
        args = (types.UniTuple(types.int64, size(NONZERO_CUDA)), p(u), types.uint64)
        args += (types.uint64[::1], p(o), p(o), types.uint64)
    return types.void(*args)


def kernel(name, src_bits, out_bits=0, variant=(False, 0)):
    """The compiled kernel for these bit widths, built on first use (a launch's hot
    path: a cache lookup)."""
    if name == "nonzero":
        regs = config.CUDA_NONZERO_MAX_REGISTERS
    elif name == "slice":
        regs = config.CUDA_SLICE_32BIT_REGISTERS if variant[0] else 0
    else:
        regs = 0
    key = (name, src_bits, out_bits, regs, variant)
    k = _kernels.get(key)
    if k is None:
        with _first_use:
            k = _kernels.get(key)
            if k is None:
                k = _kernels.put(key, _compile(name, src_bits, out_bits, regs, variant))
    return k


def _compile(name, src_bits, out_bits, regs, variant):
    fn = python_kernel(name, src_bits, variant, regs)
    if SIM:
        return cuda.jit(fn)
    sig = signature(name, src_bits, out_bits)
    opts = {"max_registers": regs} if regs else {}
    # cuda.jit(sig, cache=True), with the cache's index written under a lock and each
    # entry checked against its key before it compiles (the CPU kernels' rule).
    d = cuda.jit(**opts)(fn)
    d.enable_caching()
    checked(d._cache)
    d.compile(sig.args)
    return d.overloads[sig.args]


def launcher(k, grid, block, stream, ctx=0, params=()):
    """A function that launches ``k`` on stream handle ``stream``, ``grid``
    blocks of ``block`` threads, with the parameter block ``params`` (a tuple of
    ints) first, when called with the kernel's other arguments (on a GPU: flat,
    pointer-sized integers); ``ctx`` names the context the function handle
    belongs to.  On a GPU it is a :class:`_Launch`: ``cuLaunchKernel`` with the
    function handle, geometry, stream and parameter block bound, so that a caller
    that keeps it (a plan's state for a stream) passes only the addresses."""
    if SIM:
        # The simulator's ``kernel[grid, block]`` configures the kernel object itself
        # and returns it: a launcher kept with one grid would launch with the last
        # grid any plan of that kernel asked for.  Each launcher configures a copy.
        return functools.partial(copy.copy(k)[grid, block], params)
    if isinstance(block, tuple):
        block = block + (1,) * (3 - len(block))
    else:
        block = (block, 1, 1)
    return _Launch(function(k, ctx), grid, block, stream, params)


class _Launch:
    """``cuLaunchKernel`` of one kernel, geometry and stream, with its parameter
    block bound: the kernel's arguments (every one 8 bytes: int64 parameters,
    pointers, numba's array ABI fields) live packed in one ctypes buffer, passed as
    the launch's ``extra`` argument buffer, whose first ``len(params)`` words are
    written once; a call writes the rest and launches.  Not ``cuda.core.launch``,
    which converts the 40-odd parameters anew every call, a large share of a small
    call's host time.  The driver copies the arguments before it returns, so a lock
    per launcher (per stream) keeps two threads from writing one buffer between the
    write and the launch."""

    __slots__ = (
        "_go",
        "_f",
        "_grid",
        "_bx",
        "_by",
        "_bz",
        "_stream",
        "_n",
        "_words",
        "_size",
        "_extra",
        "_addr",
        "_lock",
    )

    def __init__(self, func, grid, block, stream, params):
        from cuda.bindings import driver

        self._go = driver.cuLaunchKernel
        self._f = func
        self._stream = driver.CUstream(stream)
        self._grid = grid
        self._bx, self._by, self._bz = block
        self._n = len(params)
        self._words = params  # replaced by the buffer at the first call (its length)
        self._addr = 0
        self._lock = threading.Lock()

    def _buffer(self, nargs):
        n = self._n + nargs
        self._words = (ctypes.c_int64 * n)(*self._words)
        self._size = ctypes.c_size_t(8 * n)
        # CU_LAUNCH_PARAM_BUFFER_POINTER, the buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, its
        # size's address, CU_LAUNCH_PARAM_END
        self._extra = (ctypes.c_void_p * 5)(
            1, ctypes.addressof(self._words), 2, ctypes.addressof(self._size), 0
        )
        self._addr = ctypes.addressof(self._extra)

    def __call__(self, *args):
        with self._lock:
            if not self._addr:
                self._buffer(len(args))
            self._words[self._n :] = args
            (err,) = self._go(
                self._f,
                self._grid,
                1,
                1,
                self._bx,
                self._by,
                self._bz,
                0,
                self._stream,
                0,
                self._addr,
            )
        if err:
            raise RuntimeError(f"dmlnumba: cuLaunchKernel failed: {err!r}")


def resident_blocks(k, ctx, threads):
    """Blocks of ``threads`` threads of kernel ``k`` that the current device runs at
    once: as many an SM as its registers and shared memory allow, times its SMs
    (the driver's occupancy calculator; ``ctx``: the current context's handle)."""
    key = (id(k), ctx, threads)
    n = _resident.get(key)
    if n is None:
        from cuda.bindings import driver

        f = function(k, ctx)
        err, per_sm = driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(f, threads, 0)
        check(err, "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        err, dev = driver.cuCtxGetDevice()
        check(err, "cuCtxGetDevice")
        attr = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
        err, sms = driver.cuDeviceGetAttribute(attr, dev)
        check(err, "cuDeviceGetAttribute")
        n = _resident.put(key, max(1, per_sm) * sms)
    return n


def function(k, ctx):
    """The function handle of kernel ``k`` in context ``ctx`` (current), its module
    loaded once (under ``_first_use``)."""
    f = _functions.get((id(k), ctx))
    if f is None:
        with _first_use:
            f = _functions.get((id(k), ctx))
            if f is None:
                f = _functions.put((id(k), ctx), function_handle(k))
    return f
