"""Pick the target that runs a call, from the ``device`` argument and the input.

``device=None`` runs where the input lives: on the CPU for NumPy arrays (and
for CPU tensors that export DLPack, such as PyTorch's), on the GPU for objects
that export ``__cuda_array_interface__`` (CuPy, PyTorch, Numba device arrays).
``"cpu"``, ``"cuda"`` and ``"cuda:N"`` name a target; data that lives elsewhere
is copied there first.  Target modules are imported on first use, so that
``import dmlnumba`` imports neither numba's CPU compiler nor ``numba.cuda``.
"""

import numpy as np

from . import target_cpu

_cuda = None


def cuda_target():
    global _cuda
    if _cuda is None:
        from . import target_cuda
        _cuda = target_cuda
    return _cuda


#: Types whose instances always export ``__cuda_array_interface__`` (CuPy's and
#: numba's device arrays), learnt as they come: asking costs a dict build each time.
_cai_types = set()


def _is_cuda_array(x):
    tp = type(x)
    if tp in _cai_types:
        return True
    mod = (getattr(tp, "__module__", "") or "").split(".")[0]
    if mod == "torch" and tp.__name__ == "Tensor":
        return x.is_cuda  # without evaluating PyTorch's (slow) interface property
    if hasattr(x, "__cuda_array_interface__"):
        if (mod, tp.__name__) in (("cupy", "ndarray"), ("numba", "DeviceNDArray"),
                                  ("numba_cuda", "DeviceNDArray")):
            _cai_types.add(tp)
        return True
    # FakeCUDAArray: numba's CUDA simulator's device array (it exports no CAI).
    return tp.__name__ == "FakeCUDAArray"


def _to_numpy(x, func, name):
    """A host input as a NumPy array, without a copy where possible."""
    if isinstance(x, np.ndarray):
        return x
    if _is_cuda_array(x):
        return cuda_target().to_host(x)
    if hasattr(x, "__dlpack__") and not isinstance(x, type):
        try:
            return np.from_dlpack(x)
        except (BufferError, TypeError, RuntimeError, ValueError) as e:
            raise TypeError(f"{func}(): {name} could not be read as a host array: {e}") from None
    raise TypeError(
        f"{func}(): {name} must be a NumPy array or a CUDA array (CuPy, PyTorch, Numba), "
        f"not {type(x).__name__}")


def parse_device(device, func):
    """``None``, ``("cpu", None)`` or ``("cuda", N or None)``."""
    if device is None:
        return None
    if not isinstance(device, str):
        raise TypeError(f"{func}(): device must be a string such as 'cpu' or 'cuda:0', "
                        f"or None, not {type(device).__name__}")
    d = device.strip().lower()
    if d == "cpu":
        return ("cpu", None)
    if d == "cuda":
        return ("cuda", None)
    if d.startswith("cuda:") and d[5:].isdigit():
        return ("cuda", int(d[5:]))
    raise ValueError(f"{func}(): unknown device {device!r}; expected 'cpu', 'cuda', 'cuda:N' or None")


def resolve(x, device, func, name="input"):
    """``(target, array)``: the target module and the input as that target's array."""
    dev = parse_device(device, func)
    if dev is None:
        if _is_cuda_array(x) and not isinstance(x, np.ndarray):
            t = cuda_target()
            return t, t.as_device_array(x, None, func, name)
        return target_cpu, _to_numpy(x, func, name)
    if dev[0] == "cpu":
        return target_cpu, _to_numpy(x, func, name)
    t = cuda_target()
    if not _is_cuda_array(x):
        x = _to_numpy(x, func, name)
    return t, t.as_device_array(x, dev[1], func, name)
