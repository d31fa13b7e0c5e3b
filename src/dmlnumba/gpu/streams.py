"""Streams of the CUDA target: every stream a call may name (PyTorch's, CuPy's,
numba's, a raw handle) as its raw handle, each conversion to what numba, cuda.core
and the array libraries want made here once per handle; capture queries; the
current stream of each input library.

``stream=None`` means the input library's current stream:
``torch.cuda.current_stream(device)`` for PyTorch tensors, CuPy's current stream
for CuPy arrays, the legacy default stream (0) otherwise.
"""

import sys

from numba import cuda

from ..caches import Bounded
from ..validation import NONZERO_DTYPES
from .sim import SIM

torch_dtypes: dict = {}  # torch dtype -> NumPy dtype
torch_of: dict = {}  # NumPy dtype -> torch dtype


def torch_module():
    import torch

    if not torch_dtypes:
        for d in NONZERO_DTYPES:  # DirectML's dtypes and bool
            if hasattr(torch, d.name):
                torch_dtypes[getattr(torch, d.name)] = d
                torch_of[d] = getattr(torch, d.name)
    return torch


# ---------------------------------------------------------------------------- streams
#
# A call's stream is one value from the API's door down: its raw handle, an int
# (0: the legacy default stream).  The conversions to the objects that numba,
# cuda.core and the array libraries want are made here, each once per handle.

_numba_streams = Bounded()  # handle -> numba stream
_core_streams = Bounded()  # handle -> cuda.core stream


def _is_numba_stream(stream):
    return (
        hasattr(stream, "handle")
        and hasattr(stream, "synchronize")
        and hasattr(stream, "auto_synchronize")
    )


def _handle(stream, func="dmlnumba"):
    """The raw handle of a PyTorch (``cuda_stream``), CuPy (``ptr``) or numba stream,
    or of a raw integer handle; TypeError naming ``func`` for anything else."""
    handle = getattr(stream, "cuda_stream", None)
    if handle is None:
        handle = getattr(stream, "ptr", None)
    if handle is None and isinstance(stream, int) and not isinstance(stream, bool):
        handle = stream
    if handle is None and _is_numba_stream(stream):
        handle = 0 if SIM else int(stream)
    if not isinstance(handle, int) or isinstance(handle, bool):
        raise TypeError(
            f"{func}(): stream must be a numba, PyTorch or CuPy stream or a stream handle, "
            f"not {type(stream).__name__}"
        )
    return handle


def check_stream(stream, func):
    """TypeError naming ``func`` where ``stream=`` is no stream this target takes."""
    if stream is not None:
        _handle(stream, func)


def numba_stream(handle):
    """The numba stream of a raw handle (for numba's copies)."""
    s = _numba_streams.get(handle)
    if s is None:
        if SIM or not handle:
            s = cuda.legacy_default_stream()
        else:
            s = cuda.external_stream(handle)
        s = _numba_streams.put(handle, s)
    return s


def core_stream(handle):
    """The cuda.core stream of a raw handle (for pool allocations and releases)."""
    c = _core_streams.get(handle)
    if c is None:
        import cuda.core as cc

        if handle == 0:
            c = cc.LEGACY_DEFAULT_STREAM
        elif handle == 2:
            c = cc.PER_THREAD_DEFAULT_STREAM
        else:
            c = cc.Stream.from_handle(handle)
        c = _core_streams.put(handle, c)
    return c


def capturing(handle):
    """Whether work on the stream is being captured into a CUDA graph (also where
    the query itself fails, as it does on the legacy stream while another stream
    captures in the global mode: nothing unsafe then)."""
    if SIM:
        return False
    from cuda.bindings import driver

    err, status = driver.cuStreamIsCapturing(handle)
    return err != driver.CUresult.CUDA_SUCCESS or int(status) != 0


def _library_capturing():
    """Whether PyTorch's or CuPy's current stream is being captured (work on the
    legacy stream then breaks a global-mode capture on any other stream, so this is
    asked before the driver's query, which such a capture may refuse)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        if torch.cuda.is_current_stream_capturing():
            return True
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return False
    s = cupy.cuda.get_current_stream()
    return s.ptr != 0 and s.is_capturing()  # (nothing captures on the legacy stream)


def refuse_capture(handle, func, what):
    """ValueError naming ``func`` where a capture is under way (on the call's stream,
    or on PyTorch's or CuPy's current stream): ``what`` (for example "reads the
    count back") cannot be part of a CUDA graph."""
    if SIM:
        return
    if _library_capturing() or (handle and capturing(handle)):
        raise ValueError(
            f"{func}(): this call {what}, which a CUDA graph cannot capture; make it "
            f"outside the capture, or capture nonzero_coordinates / slice1 on device "
            f"arrays (PyTorch, CuPy) instead"
        )


def torch_device(v):
    """The PyTorch device index of the call reading ``v``."""
    if v.device is not None:
        return v.device
    if v.lib == "torch" and v.host is None:
        return v.obj.get_device()
    return torch_module().cuda.current_device()


def cupy_device(v):
    if v.device is not None:
        return v.device
    if v.lib == "cupy":
        return v.obj.device.id
    import cupy

    return cupy.cuda.runtime.getDevice()


def torch_current_stream(torch):
    """A function of a device index giving the raw handle of PyTorch's current
    stream there: ``torch._C._cuda_getCurrentRawStream`` where PyTorch has it (the
    query Triton's launcher makes; far cheaper than
    ``torch.cuda.current_stream(i).cuda_stream``, which builds a Stream object),
    else that public query (``tests/test_frameworks.py`` checks that both agree,
    inside ``torch.cuda.stream`` blocks too)."""
    raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    current = torch.cuda.current_stream
    return lambda i: current(i).cuda_stream


def call_stream(lib, stream, v, func=None):
    """The raw handle of the stream a call of library ``lib`` reading ``v`` runs
    on: the caller's ``stream=``, else that library's current stream on ``v``'s
    device (numba, JAX and NumPy: the legacy default stream, 0).  ``func``: the
    call's function, whose work on the legacy stream is refused while PyTorch's or
    CuPy's current stream captures (:func:`refuse_legacy`)."""
    if stream is not None:
        h = _handle(stream)
    elif lib == "torch":
        return torch_current_stream(torch_module())(torch_device(v))
    elif lib == "cupy":
        import cupy

        with cupy.cuda.Device(cupy_device(v)):
            return cupy.cuda.get_current_stream().ptr
    else:
        h = 0
    if h == 0 and func is not None:
        refuse_legacy(func)
    return h


def refuse_legacy(func):
    """ValueError naming ``func`` for work on the legacy default stream (a numba, JAX
    or NumPy input's call with no ``stream=``) while PyTorch's or CuPy's current
    stream captures: in a global-mode capture that work ends the capture with a
    driver error, in a relaxed one it runs at once and is missing from the graph
    that replays run."""
    refuse_capture(0, func, "runs on the legacy default stream (no stream= given)")


def torch_stream(torch, handle, device):
    return torch.cuda.ExternalStream(handle, device=device)
