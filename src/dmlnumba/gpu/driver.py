"""The two CUDA driver calls on every repeated call's path, made through ctypes:
``cuCtxGetCurrent`` (which context is current) and ``cuLaunchKernel``.  cuda.bindings
wraps each result in objects (a ``CUresult`` enum, a ``CUcontext``), a measurable
share of a small call's host time (docs/PERFORMANCE.md, "Small calls"); the library
is the one cuda.bindings and numba-cuda load (``dlopen`` gives the same handle)."""

import ctypes
import sys

_lib = None


def _driver():
    global _lib
    if _lib is None:
        name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
        lib = ctypes.CDLL(name)
        u, p = ctypes.c_uint, ctypes.c_void_p
        lib.cuLaunchKernel.argtypes = [p, u, u, u, u, u, u, u, p, p, p]
        lib.cuLaunchKernel.restype = ctypes.c_int
        lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(p)]
        lib.cuCtxGetCurrent.restype = ctypes.c_int
        _lib = lib
    return _lib


def launch_kernel():
    """``cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra)``
    taking ints (handles and addresses as ints, None for NULL), returning the error
    code (0: success)."""
    return _driver().cuLaunchKernel


def context_query():
    """A function giving the current context's handle as an int (0 where none is
    current)."""
    get = _driver().cuCtxGetCurrent
    c_void_p, byref = ctypes.c_void_p, ctypes.byref

    def current():
        out = c_void_p()  # one per call: callers on several threads at once
        get(byref(out))
        return out.value or 0

    return current
