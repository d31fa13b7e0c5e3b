"""What every dask graph of dmlnumba's reads: the kind of an array's chunks (NumPy or
CuPy), their moves to the device a call names, and the device guard of a CuPy chunk."""

import numpy as np

from .. import config
from ..dispatch import DeviceUnavailableError, parse_device


def _kind(meta, f, name="input"):
    if isinstance(meta, np.ma.MaskedArray):
        raise TypeError(
            f"{f}(): {name} is a dask array of numpy.ma.MaskedArray chunks, whose masks dmlnumba "
            f"would ignore; pass dask.array.ma.filled({name}, 0) instead"
        )
    mod = (type(meta).__module__ or "").split(".")[0]
    if mod not in ("numpy", "cupy"):
        raise TypeError(
            f"{f}(): {name} is a dask array of {type(meta).__name__} chunks; "
            f"dmlnumba takes NumPy or CuPy chunks"
        )
    return mod


def _xp(kind):
    if kind == "cupy":
        import cupy

        return cupy
    return np


def _to_numpy(block):
    import cupy

    return cupy.asnumpy(block)


def _to_cupy(block, dev=None):
    """A chunk as a CuPy array: on device ``dev`` (copied there where it is on
    another; None: on the task's current device, or where it is already)."""
    import cupy

    if dev is None:
        return cupy.asarray(block)
    with cupy.cuda.Device(dev):
        if isinstance(block, cupy.ndarray):
            # CuPy copies an array on another device to the current one.
            return block if block.device.id == dev else block.copy()
        return cupy.asarray(block)


def _on_device_of(block):
    """CuPy's device guard for a chunk (the device it is on): CuPy's kernels run on
    the current device, and refuse arrays of another."""
    import cupy

    return cupy.cuda.Device(block.device.id)


def check_chunks(x, f, name="input"):
    """The kind of the dask array ``x``'s chunks (``"numpy"`` or ``"cupy"``), which
    must have known sizes (ValueError) and be NumPy or CuPy arrays (TypeError)."""
    if any(np.isnan(c) for cs in x.chunks for c in cs):
        raise ValueError(
            f"{f}(): {name} has unknown chunk sizes; call {name}.compute_chunk_sizes() first"
        )
    return _kind(x._meta, f, name)


def _prepare(x, device, f, name="input"):
    """``(x, kind)``: the array with its chunks where ``device`` says, and their kind
    (``"cuda:N"``: every chunk on device N, copied there where it is elsewhere;
    ``name``: the array's name in the messages)."""
    from dask.array.utils import meta_from_array

    config.check_env(f)
    kind = check_chunks(x, f, name)
    dev = parse_device(device, f)
    if dev is None:
        return x, kind
    if dev[0] == "cpu" and kind == "cupy":
        return x.map_blocks(_to_numpy, meta=np.empty((0,) * x.ndim, x.dtype)), "numpy"
    if dev[0] == "cuda" and (kind == "numpy" or dev[1] is not None):
        from ..dispatch import _cuda_device

        _cuda_device(dev, f)
        try:
            import cupy
        except ImportError:
            raise DeviceUnavailableError(
                f"{f}(): device='cuda' moves a dask array's chunks to the GPU as CuPy arrays, and "
                f"CuPy is not installed"
            ) from None
        meta = meta_from_array(cupy.empty((0,) * x.ndim, x.dtype))
        return x.map_blocks(_to_cupy, dev[1], meta=meta), "cupy"
    return x, kind
