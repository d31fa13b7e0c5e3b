"""Compiling and launching the CUDA kernels.

Kernels compile lazily, once per bit width, and are cached on disk.  On a GPU
each is compiled for raw device pointers (``CPointer`` arguments), so that a
launch passes plain integers: it goes through ``cuda.core.launch`` with a cached
launch configuration and function handle bound (:func:`launcher`), and no per-call
argument typing.
Under the simulator, the same Python function is an ordinary kernel over arrays.

Two numba-cuda details are not documented API, so numba-cuda's version is pinned
to the tested range (``pyproject.toml``; ``tests/test_import.py`` checks the
installed one): the compiled kernel's function handle (``kernel.library.get_cufunc()``,
attributes without an underscore), and the launch arguments of an array
parameter (numba's array ABI, :func:`array_arg`).  Nothing else of numba-cuda's is
used beyond its public ``cuda.jit``, ``cuda.to_device`` and array interfaces.
"""

import functools
import threading

from numba import cuda, types

from . import config
from ._internals import function_handle
from .caches import Bounded
from .device_arrays import core_stream
from .nonzero_kernel import make_nonzero
from .params import NONZERO_CUDA, SLICE_CUDA, size
from .slice_kernel import make_slice
from .warp import SIM

_UINT = {8: types.uint8, 16: types.uint16, 32: types.uint32, 64: types.uint64}
_kernels = Bounded()
_configs = Bounded()
_functions = Bounded()
#: Held while a kernel compiles or its module loads, the first time: numba-cuda's
#: module loading is not thread-safe.  Two threads launching a kernel for the first
#: time at once (a threaded dask graph of CuPy chunks) raised "key already in
#: dictionary: <CUlibrary ...>" in ``get_cufunc`` under ``CUDA_LAUNCH_BLOCKING=1``,
#: and without it an illegal address or wrong coordinates (docs/GPU.md).
_first_use = threading.Lock()


def python_kernel(name, src_bits, variant=(False, 0)):
    """The kernel's Python function for ``src_bits``-bit elements (``variant``: the
    nonzero kernel's ``(narrow, staged)``, ``staged`` 0 or a width, see
    :func:`make_nonzero`; the slice kernel's ``(narrow, 0)``, see :func:`make_slice`)."""
    if name == "slice":
        return make_slice(_UINT[src_bits], variant[0])
    return make_nonzero(128 // src_bits, _UINT[src_bits], *variant)


def signature(name, src_bits, out_bits=0):
    """The kernel's signature: its parameter block by value first (a tuple of
    int64, which the launch passes as that many kernel parameters), then the
    arrays as raw pointers (the look-back buffer as a 1-d array, for atomics)."""
    u = _UINT[src_bits]
    p = types.CPointer
    if name == "slice":
        args = (types.UniTuple(types.int64, size(SLICE_CUDA)), p(u), p(u))
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
    else:
        regs = config.CUDA_SLICE_32BIT_REGISTERS if variant[0] else 0
    key = (name, src_bits, out_bits, regs, variant)
    k = _kernels.get(key)
    if k is None:
        with _first_use:
            k = _kernels.get(key)
            if k is None:
                k = _kernels.put(key, _compile(name, src_bits, out_bits, regs, variant))
    return k


def _compile(name, src_bits, out_bits, regs, variant):
    fn = python_kernel(name, src_bits, variant)
    if SIM:
        return cuda.jit(fn)
    sig = signature(name, src_bits, out_bits)
    opts = {"max_registers": regs} if regs else {}
    return cuda.jit(sig, cache=True, **opts)(fn).overloads[sig.args]


def launcher(k, grid, block, stream, ctx=0, params=()):
    """A function that launches ``k`` on stream handle ``stream``, ``grid``
    blocks of ``block`` threads, with the parameter block ``params`` (a tuple of
    ints) first, when called with the kernel's other arguments (on a GPU: flat,
    pointer-sized integers); ``ctx`` names the context the function handle
    belongs to.  On a GPU it is ``cuda.core.launch`` with the stream, launch
    configuration, function handle and parameters bound, so that a caller that
    keeps it (a plan's state for a stream) skips their lookups."""
    if SIM:
        return functools.partial(k[grid, block], params)
    if not isinstance(block, tuple):
        block = (block, 1, 1)
    elif len(block) == 2:
        block = block + (1,)

    cfg = _configs.get((grid, block))
    if cfg is None:
        from cuda.core import LaunchConfig

        cfg = LaunchConfig(grid=(grid, 1, 1), block=block, shmem_size=0)
        cfg = _configs.put((grid, block), cfg)
    return functools.partial(_core_launch(), core_stream(stream), cfg, function(k, ctx), *params)


@functools.cache
def _core_launch():
    """``cuda.core.launch``, imported on first use (an import statement in
    :func:`launcher` costs 0.7 us a call, and calls with caller-given outputs make
    a launcher every call)."""
    from cuda.core import launch

    return launch


def function(k, ctx):
    """The function handle of kernel ``k`` in context ``ctx``, its module loaded once
    (under ``_first_use``)."""
    f = _functions.get((id(k), ctx))
    if f is None:
        with _first_use:
            f = _functions.get((id(k), ctx))
            if f is None:
                f = _functions.put((id(k), ctx), function_handle(k))
    return f
