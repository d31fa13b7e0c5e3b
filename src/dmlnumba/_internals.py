"""Every use of another package's private internals, in one place, each with the
versions it is tested against (``tests/test_import.py`` checks the installed ones).

- numba-cuda (``>=0.30.4,<0.31``, pinned in ``pyproject.toml``):
  - :func:`function_handle`: a compiled kernel's CUDA function handle, which no
    public API gives (``kernel.library.get_cufunc().kernel.handle``, a ``CUkernel``,
    whose function in the current context the driver gives);
  - :func:`array_arg`: the launch arguments of a 1-d array parameter (numba's
    array ABI);
  - :func:`numba_pointer`: a numba device array's address as an int
    (``gpu_data.device_pointer``; ``device_ctypes_pointer.value`` is slower);
  - :func:`numba_device_array`, :func:`numba_array_maker`: a numba
    ``DeviceNDArray`` over memory that an owner object keeps alive
    (``driver.MemoryPointer`` and the array's constructor, which
    ``cuda.from_cuda_array_interface`` calls after checks that cost more than a
    small call's launch;
    the maker copies the attributes of one array made by the constructor).
- numba (``>=0.60``): none beyond the public API.
- PyTorch: ``torch._C._cuda_getCurrentRawStream`` (the current stream's raw
  handle, as Triton's launcher reads it; the public query is the fallback, see
  :func:`dmlnumba.gpu.views.torch_current_stream`); ``torch._C._increment_version``
  (what ``torch.autograd.graph.increment_version`` calls, without its list, see
  :func:`dmlnumba.interop.torch_written`); ``torch._is_functional_tensor``,
  ``torch._C._are_functorch_transforms_active`` and
  ``torch._C._functorch.is_functorch_wrapped_tensor`` (which tensors hold no data
  of their own, see :func:`dmlnumba.traced.traced` and
  :func:`dmlnumba.torch_ops._func_wrapped`).
- torch.compile: ``_dynamo_marked_constant`` on :func:`dmlnumba.prepare.torch_ops_ready`
  (what ``torch.compiler.assume_constant_result`` sets, set without importing
  torch; see :mod:`dmlnumba.torch_ops`).
"""

import numpy as np

from .layout import c_strides


def function_handle(kernel):
    """The ``CUfunction`` of a compiled numba-cuda kernel (one overload) in the current
    context.  numba-cuda's handle is a ``CUkernel``, which ``cuLaunchKernel`` takes too
    but resolves to the context's function on every launch, a part of a small call's
    host time (docs/PERFORMANCE.md)."""
    from cuda.bindings import driver

    err, f = driver.cuKernelGetFunction(
        driver.CUkernel(int(kernel.library.get_cufunc().kernel.handle))
    )
    if err:
        raise RuntimeError(f"dmlnumba: cuKernelGetFunction failed: {err!r}")
    return f


def array_arg(ptr, n, itemsize):
    """The launch arguments of a 1-d C-contiguous array parameter (numba's ABI:
    meminfo, parent, size, itemsize, data, shape, strides)."""
    return (0, 0, n, itemsize, ptr, n, itemsize)


def numba_pointer(a):
    """The device address of a numba device array's first element (not empty)."""
    return int(a.gpu_data.device_pointer)


_numba: dict = {}  # numba-cuda's classes, imported on first use


def _numba_classes():
    if not _numba:
        from numba.cuda.cudadrv import devicearray, driver

        _numba.update(
            array=devicearray.DeviceNDArray,
            pointer=driver.MemoryPointer,
            address=driver.binding.CUdeviceptr,
        )
    return _numba


def numba_device_array(ctx, ptr, shape, dtype, owner):
    """A C-contiguous numba device array of ``shape`` and ``dtype`` at device address
    ``ptr`` in numba context ``ctx``, holding ``owner`` (which keeps the memory)."""
    nb = _numba_classes()
    dtype = np.dtype(dtype)
    n = dtype.itemsize
    for d in shape:
        n *= d
    mem = nb["pointer"](ctx, nb["address"](ptr), size=n, owner=owner)
    strides = tuple(s * dtype.itemsize for s in c_strides(shape))
    return nb["array"](shape, strides, dtype, gpu_data=mem)


def numba_array_maker(ctx, shape, dtype):
    """A function ``make(ptr, owner)`` giving what :func:`numba_device_array` gives,
    for repeated calls: each array a copy of one made once (its layout, which
    numba's constructor works out slowly, is the same), with its own memory pointer."""
    nb = _numba_classes()
    template = numba_device_array(ctx, 0, shape, dtype, None).__dict__
    size = template["gpu_data"].size
    cls, pointer, address, new = nb["array"], nb["pointer"], nb["address"], object.__new__

    def make(ptr, owner):
        a = new(cls)
        d = a.__dict__
        d.update(template)
        d["gpu_data"] = pointer(ctx, address(ptr), size, owner)
        return a

    return make
