"""Which GPU a call runs on, whatever the calling thread's current device.

Launches, memsets, stream-ordered allocations and the legacy default stream
(handle 0) act in the calling thread's *current context*; the arrays' libraries
keep their own device per array.  A call runs on the device its input lives on
(or the one ``device="cuda:N"`` names): the guards here make that device's
primary context current around whatever the call queues, and cost one
comparison where it is current already (the query, ``current_context``, is the
one a launch makes anyway, see :func:`current`).

- :func:`pointer_device`: the ordinal of the device an address is on (the driver's
  answer; :func:`dmlnumba.gpu.views.device_of` asks it for arrays of no library).
- :func:`on`: a context manager with a device's primary context current (a
  shared null context where it is already).
- :func:`peer_copy`: bytes copied from one device to another, ordered after the
  source's stream and before the call's (events, no host wait).
"""

import contextlib
import ctypes
import sys
from typing import Any

from numba import cuda

from .memory import _device_ids, check, current_context, device_id
from .sim import SIM

_handles: dict[int, int] = {}  # device ordinal -> its primary context's handle
_NULL = contextlib.nullcontext()  # reusable: one for every call


def context_handle(dev):
    """The handle (an int) of device ``dev``'s primary context, the one PyTorch,
    CuPy and numba all use (looked up once per device)."""
    h = _handles.get(dev)
    if h is None:
        h = _handles[dev] = 1 if SIM else int(cuda.gpus[dev].get_primary_context().handle)
    return h


def current():
    """The current context's handle, making the default device's primary context
    current first where the thread has none (a new thread: a dask worker's), as
    numba (and the CUDA runtime) do on a thread's first call."""
    ctx = current_context()
    if not ctx:
        cuda.current_context()
        ctx = current_context()
    return ctx


def current_device():
    """The ordinal of the current context's device (of the default device where the
    thread has no current context yet)."""
    if SIM:
        return 0
    dev = _device_ids.get(current())  # one query where the context's device is known
    return device_id(None) if dev is None else dev


def on(dev):
    """A context manager inside which device ``dev``'s primary context is current
    (numba's ``cuda.gpus[dev]``: pushed on entry, popped on exit); the shared null
    context where it is current already (a query and a comparison), or where ``dev`` is
    None (a layout without an array: the current device)."""
    if SIM or dev is None or current() == context_handle(dev):
        return _NULL
    return cuda.gpus[dev]


def pointer_device(ptr):
    """The ordinal of the device that holds address ``ptr`` (the driver's
    ``CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL``); the current device for a null
    pointer (an empty array) or memory the driver does not know."""
    if SIM:
        return 0
    if ptr:
        query = _pointer_attribute()
        if query:
            out = ctypes.c_int(-1)
            if query(ctypes.byref(out), _DEVICE_ORDINAL, ptr) == 0 and out.value >= 0:
                return out.value
    return current_device()


#: ``CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL`` (cuda.h).
_DEVICE_ORDINAL = 9
_query: Any = None  # the function, False, or None until first asked


def _pointer_attribute():
    """The driver's ``cuPointerGetAttribute``, called through ctypes (False where the
    driver library cannot be opened).  Not cuda.bindings': its binding writes the
    ordinal into one field of its result and reads another, so it answers 0 for
    memory on every device (NVIDIA/cuda-python#2928: every array on device 1 would be
    taken for device 0's and launched there)."""
    global _query
    if _query is None:
        name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
        try:
            f = ctypes.CDLL(name).cuPointerGetAttribute
        except (OSError, AttributeError):
            _query = False
        else:
            f.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64)
            f.restype = ctypes.c_int
            _query = f
    return _query


def _event():
    from cuda.bindings import driver

    err, ev = driver.cuEventCreate(int(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING))
    check(err, "cuEventCreate")
    return ev


def peer_copy(dst, dst_dev, src, src_dev, nbytes, src_stream, dst_stream):
    """Copy ``nbytes`` from address ``src`` on device ``src_dev`` to ``dst`` on
    ``dst_dev``, with ``dst_dev``'s context current.  The copy runs on the
    source's stream ``src_stream`` (the input library's current stream there), so
    that memory the source's allocator hands out again after the input is freed
    is reused only after the copy; it waits for the allocation of ``dst`` on
    ``dst_stream``, and ``dst_stream`` waits for it: nothing waits on the host."""
    from cuda.bindings import driver

    ready = _event()  # in dst_dev's context, recorded on its stream
    check(driver.cuEventRecord(ready, dst_stream)[0], "cuEventRecord")
    with on(src_dev):
        check(driver.cuStreamWaitEvent(src_stream, ready, 0)[0], "cuStreamWaitEvent")
        (err,) = driver.cuMemcpyPeerAsync(
            dst,
            driver.CUcontext(context_handle(dst_dev)),
            src,
            driver.CUcontext(context_handle(src_dev)),
            nbytes,
            src_stream,
        )
        check(err, "cuMemcpyPeerAsync")
        done = _event()
        check(driver.cuEventRecord(done, src_stream)[0], "cuEventRecord")
    check(driver.cuStreamWaitEvent(dst_stream, done, 0)[0], "cuStreamWaitEvent")
    # Destroyed while pending: the driver releases them once they complete.
    driver.cuEventDestroy(ready)
    driver.cuEventDestroy(done)
