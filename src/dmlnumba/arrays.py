"""Which array library a caller's array belongs to, read from its type.

Nothing here imports PyTorch, CuPy, dask or ``numba.cuda``: the answers come
from the classes' module names, learnt once per type.
"""

from typing import Any

#: ``type -> library`` ("torch", "cupy" or None), learnt as types arrive.
_libraries: dict = {}
#: Types whose instances always export ``__cuda_array_interface__`` (CuPy's and
#: numba's device arrays), learnt as they come: asking costs a dict build each time.
_cai_types: set = set()


def library(x: Any) -> str | None:
    """``"torch"`` for PyTorch tensors (subclasses too), ``"cupy"`` for CuPy
    arrays, ``"jax"`` for JAX arrays, ``"dask"`` for dask arrays, ``"numba"`` for
    numba (numba-cuda) device arrays, None for anything else (NumPy, ...).  The API
    asks once per call and hands the answer down (as ``lib``)."""
    tp = type(x)
    try:
        return _libraries[tp]
    except KeyError:
        pass
    lib = None
    for c in tp.__mro__:
        mod = (getattr(c, "__module__", "") or "").split(".")[0]
        if mod == "torch" and c.__name__ == "Tensor":
            lib = "torch"
            break
        if mod == "cupy" and c.__name__ == "ndarray":
            lib = "cupy"
            break
        if mod in ("jaxlib", "jax") and c.__name__ in ("ArrayImpl", "Array"):
            lib = "jax"
            break
        if mod == "dask" and c.__name__ == "Array" and c.__module__.startswith("dask.array"):
            lib = "dask"
            break
        if mod in ("numba", "numba_cuda") and c.__name__ == "DeviceNDArray":
            lib = "numba"
            break
    _libraries[tp] = lib
    return lib


_ASK = "?"  # is_cuda_array's lib where the caller has not asked library() yet


def is_cuda_array(x: Any, lib: str | None = _ASK) -> bool:
    """Whether ``x`` lives on a CUDA device (exports ``__cuda_array_interface__``);
    ``lib``: :func:`library`'s answer for ``x``, where the caller has it."""
    tp = type(x)
    if tp in _cai_types:
        return True
    if (library(x) if lib == _ASK else lib) == "torch":
        return bool(x.is_cuda)  # without evaluating PyTorch's (slow) interface property
    if hasattr(x, "__cuda_array_interface__"):
        mod = (getattr(tp, "__module__", "") or "").split(".")[0]
        if (mod, tp.__name__) in (
            ("cupy", "ndarray"),
            ("numba", "DeviceNDArray"),
            ("numba_cuda", "DeviceNDArray"),
        ):
            _cai_types.add(tp)
        return True
    # FakeCUDAArray: numba's CUDA simulator's device array (it exports no CAI).
    return tp.__name__ == "FakeCUDAArray"


def is_dask(x: Any) -> bool:
    """Whether ``x`` is a ``dask.array.Array``."""
    return library(x) == "dask"


def current_cupy_device() -> int:
    """CuPy's current device (CuPy is loaded already: the caller holds one of its
    arrays).  Its ``getDevice`` is looked up once, not through an import statement
    on every repeated call (1-4% of a small CuPy call's host time, docs/PERFORMANCE.md)."""
    global _cupy_get_device
    if _cupy_get_device is None:
        import cupy

        _cupy_get_device = cupy.cuda.runtime.getDevice
    return _cupy_get_device()


_cupy_get_device: Any = None


def jax_deleted(x: Any) -> bool:
    """Whether the JAX array ``x`` was deleted (donated to a jitted function, or
    ``delete()``d): its memory is gone, and JAX's own methods raise a RuntimeError.
    (A tracer has no ``is_deleted``: it is not deleted, and the call says what it is.)"""
    deleted = getattr(x, "is_deleted", None)
    return deleted is not None and deleted()


def refuse_deleted(x: Any, name: str, f: str) -> None:
    """ValueError naming ``f`` and ``name`` where the JAX array ``x`` was deleted
    (:func:`jax_deleted`)."""
    if jax_deleted(x):
        raise ValueError(
            f"{f}(): {name} is a deleted JAX array (donated to a jitted function, or "
            f"delete()d): its memory is gone"
        )
