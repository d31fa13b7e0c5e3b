"""Which devices the operator tests run on, and moving test arrays there and back.

The CPU always.  CUDA where numba sees a GPU, or under the simulator
(``NUMBA_ENABLE_CUDASIM=1``, set before numba is imported), unless
``DMLNUMBA_TEST_CUDA=0``.  On CUDA, test arrays keep their exact memory layout
(negative, zero and permuted strides): the bytes the host array spans are
copied to the device and a ``__cuda_array_interface__`` view with the same
strides is handed to dmlnumba, as a foreign (CuPy- or PyTorch-like) array would be.
"""

import os

import numpy as np
import pytest

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def _cuda_available():
    if os.environ.get("DMLNUMBA_TEST_CUDA") == "0":
        return False
    import importlib.util

    if importlib.util.find_spec("numba_cuda") is None:
        # numba's own (deprecated) numba.cuda, simulator included, lacks what the CUDA
        # target uses; dmlnumba refuses device="cuda" there, so the CUDA tests skip.
        return False
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:
        return False


CUDA = _cuda_available()
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])

skip_on_cudasim = pytest.mark.skipif(SIM, reason="not under the CUDA simulator")
needs_real_gpu = pytest.mark.skipif(not CUDA or SIM, reason="needs a real CUDA GPU")


class ForeignCudaArray:
    """A bare ``__cuda_array_interface__`` exporter over device memory (keeps the owner alive)."""

    def __init__(self, owner, ptr, shape, strides, dtype, readonly=False):
        self._owner = owner
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.__cuda_array_interface__ = {
            "shape": self.shape,
            "strides": tuple(strides),
            "typestr": self.dtype.str,
            "data": (ptr, readonly),
            "version": 3,
            "stream": None,
        }


def to_device(a, device, readonly=False):
    """``a`` on ``device``, same values and same strides."""
    if device == "cpu":
        return a
    from numba import cuda

    from dmlnumba.layout import extent

    if a.size == 0:
        d = cuda.device_array(1, a.dtype)
        return ForeignCudaArray(d, device_pointer(d), a.shape, a.strides, a.dtype, readonly)
    low, span, base, _ = extent(a.shape, a.strides, a.itemsize)
    flat = np.lib.stride_tricks.as_strided(
        a.reshape(-1)[:1]
        if a.flags.c_contiguous
        else a[tuple(slice(None, None, -1) if s < 0 else slice(None) for s in a.strides)],
        shape=(span,),
        strides=(a.itemsize,),
    )
    d = cuda.to_device(np.ascontiguousarray(flat))
    ptr = device_pointer(d) + base * a.itemsize
    return ForeignCudaArray(d, ptr, a.shape, a.strides, a.dtype, readonly)


def device_pointer(d):
    """The device address of a numba device array (a host address under the simulator)."""
    if SIM:
        return d._ary.__array_interface__["data"][0]
    return d.__cuda_array_interface__["data"][0]


def to_host(a):
    """A result as a NumPy array."""
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "copy_to_host"):
        if SIM:
            return a.copy_to_host()
        from numba import cuda

        from dmlnumba.gpu.devices import pointer_device

        # With its own device current: a result in another device's stream-ordered
        # pool is readable from this device's context only where it has peer access.
        with cuda.gpus[pointer_device(device_pointer(a))]:
            return a.copy_to_host()
    from dmlnumba.arrays import is_cuda_array

    if isinstance(a, ForeignCudaArray) or is_cuda_array(a):  # CuPy, PyTorch
        from dmlnumba.gpu import target as target_cuda

        return np.ascontiguousarray(target_cuda.to_host(a))
    return np.asarray(a)


def device_view(dbuf, view_of, buf):
    """The device counterpart of ``view_of(buf)`` over ``dbuf`` (``to_device(buf)``
    of a C-contiguous ``buf``): a CAI view with the same offset and strides."""
    v = view_of(buf)
    ptr0 = dbuf.__cuda_array_interface__["data"][0]
    delta = v.__array_interface__["data"][0] - buf.__array_interface__["data"][0]
    return ForeignCudaArray(dbuf, ptr0 + delta, v.shape, v.strides, v.dtype)


def record_paths(monkeypatch, device):
    """A list that every kernel call of the test appends to: on the CPU
    ``("cpu", key)`` with the kernel's key (ending in ``"parallel"`` where it ran
    on numba's threads); on CUDA ``(name, source bits, launch arguments)``."""
    seen = []
    if device == "cpu":
        from dmlnumba.cpu import compiling

        real_run = compiling.run

        def run(kernel, key, *args):
            seen.append(("cpu", key))
            return real_run(kernel, key, *args)

        monkeypatch.setattr(compiling, "run", run)
        return seen
    from dmlnumba.caches import Bounded
    from dmlnumba.gpu import launch, plans

    monkeypatch.setattr(plans, "_plans", Bounded())  # plans keep their launchers
    names = {}
    real_kernel, real_launcher = launch.kernel, launch.launcher

    def kernel(name, src_bits, out_bits=0, variant=(False, 0)):
        k = real_kernel(name, src_bits, out_bits, variant)
        names[id(k)] = (name, src_bits)
        return k

    def launcher(k, grid, block, stream, ctx=0, params=()):
        go = real_launcher(k, grid, block, stream, ctx, params)

        def launch_(*args):
            seen.append(names[id(k)] + (tuple(args),))
            return go(*args)

        return launch_

    monkeypatch.setattr(launch, "kernel", kernel)
    monkeypatch.setattr(launch, "launcher", launcher)
    return seen


def jax_gpu():
    """JAX's first GPU device; the test skips where JAX (or its GPU backend) is missing."""
    jax = pytest.importorskip("jax")
    try:
        return jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("needs a JAX with a GPU backend")


def torch_devices(torch):
    """The devices of PyTorch tests: the CPU, and CUDA where a real GPU is and PyTorch
    sees it."""
    no_gpu = not torch.cuda.is_available()
    cuda_marks = [needs_real_gpu, pytest.mark.skipif(no_gpu, reason="PyTorch sees no GPU")]
    return ["cpu", pytest.param("cuda", marks=cuda_marks)]
