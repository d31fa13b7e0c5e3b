"""CUDA arrays whose first element is not on a multiple of its item size: a view at a
byte offset into other memory (``raw[1:].view(float32)`` of a CuPy uint8 array, which
CuPy makes and ``torch.from_dlpack`` and numba take as they are).  The GPU faults on
their loads and stores (``misaligned address``), as in CuPy's own kernels, and every
later CUDA call of the process then failed: on an H200 each operator, as input or
output, cold or with a runner kept, broke the context.  Each is refused with a
ValueError naming the function and the parameter, before anything is launched or
written, and the next call works."""

import numpy as np
import pytest
from numba import cuda

import dmlnumba
from dmlnumba.layout import c_strides

from devices import CUDA, ForeignCudaArray, device_pointer, needs_real_gpu, to_device, to_host

pytestmark = pytest.mark.skipif(not CUDA, reason="needs CUDA (a GPU or the simulator)")

N = 1000
VALUES = (np.arange(N) % 3).astype(np.float32)

#: Each operator as a function of ``(x, out)`` (``out`` None: a new result), its output's
#: shape and dtype, and the name its output goes by.
CALLS = {
    "slice1": (lambda x, out: dmlnumba.slice1(x, (1,), (N - 2,), (-3,), out=out), (333,)),
    "slice_grad": (
        lambda x, out: dmlnumba.slice_grad(x, (N + 10,), (3,), (N,), (1,), out=out),
        (N + 10,),
    ),
    "nonzero_coordinates": (
        lambda x, out: dmlnumba.nonzero_coordinates(x, out_coordinates=out),
        (N, 1),
    ),
    "argwhere": (lambda x, out: dmlnumba.argwhere(x), None),
}


def _misaligned(shape, dtype, values=None):
    """A CUDA array of ``shape`` whose first element is 1 byte past an item boundary."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    buf = np.zeros(nbytes + 8, np.uint8)
    if values is not None:
        buf[1 : 1 + nbytes] = values.view(np.uint8)
    raw = cuda.to_device(buf)
    strides = tuple(s * dtype.itemsize for s in c_strides(shape))
    return ForeignCudaArray(raw, device_pointer(raw) + 1, shape, strides, dtype)


def _works_after():
    count, coords = dmlnumba.nonzero_coordinates(to_device(VALUES, "cuda"))
    assert int(to_host(count)[0]) == 666


@pytest.mark.parametrize("f", list(CALLS))
def test_a_misaligned_cuda_input_is_refused(f):
    call, _ = CALLS[f]
    name = "input_gradient" if f == "slice_grad" else "input"
    x = _misaligned((N,), np.float32, VALUES)
    with pytest.raises(
        ValueError, match=rf"{f}\(\): {name} starts at address 0x[0-9a-f]+, not a multiple of"
    ):
        call(x, None)
    _works_after()


@pytest.mark.parametrize("f", ["slice1", "slice_grad", "nonzero_coordinates"])
def test_a_misaligned_cuda_output_is_refused(f):
    call, shape = CALLS[f]
    name = "out_coordinates" if f == "nonzero_coordinates" else "out"
    dtype = np.uint32 if f == "nonzero_coordinates" else np.float32
    with pytest.raises(
        ValueError,
        match=rf"{f}\(\): {name} starts at address 0x[0-9a-f]+, not a multiple of its item size 4",
    ):
        call(to_device(VALUES, "cuda"), _misaligned(shape, dtype))
    _works_after()


def test_a_misaligned_cuda_count_is_refused_before_the_coordinates_are_written():
    coords = cuda.to_device(np.full((N, 1), 7, np.uint32))
    with pytest.raises(ValueError, match=r"out_count starts at address"):
        dmlnumba.nonzero_coordinates(
            to_device(VALUES, "cuda"),
            out_count=_misaligned((1,), np.uint32),
            out_coordinates=coords,
        )
    assert (coords.copy_to_host() == 7).all()


def _library_arrays(lib):
    """``(aligned(), misaligned(shape, dtype))`` makers of ``lib``'s CUDA arrays."""
    cp = pytest.importorskip("cupy")

    def bytes_view(shape, dtype, values=None):
        dtype = np.dtype(dtype)
        n = int(np.prod(shape))
        raw = cp.zeros(n * dtype.itemsize + 8, cp.uint8)
        a = raw[1 : 1 + n * dtype.itemsize].view(dtype).reshape(shape)
        if values is not None:
            raw[1 : 1 + n * dtype.itemsize] = cp.asarray(values.view(np.uint8))
        return a

    wrap = {"cupy": lambda a: a, "numba": cuda.as_cuda_array}
    if lib == "torch":
        torch = pytest.importorskip("torch")
        wrap["torch"] = torch.from_dlpack
    return (
        lambda shape, dtype, values=None: wrap[lib](
            cp.asarray(values if values is not None else np.zeros(shape, dtype))
        ),
        lambda shape, dtype, values=None: wrap[lib](bytes_view(shape, dtype, values)),
    )


@needs_real_gpu
@pytest.mark.parametrize("lib", ["cupy", "torch", "numba"])
@pytest.mark.parametrize("f", list(CALLS))
@pytest.mark.parametrize("where", ["input", "out"])
def test_misaligned_cuda_arrays_are_refused_where_a_runner_is_kept(lib, f, where):
    """Two calls on aligned arrays of the same layout keep a runner; the misaligned
    one then takes it, which reads its address per call."""
    call, shape = CALLS[f]
    if where == "out" and shape is None:
        pytest.skip("argwhere takes no output")
    aligned, misaligned = _library_arrays(lib)
    dtype = np.uint32 if f == "nonzero_coordinates" else np.float32
    for _ in range(2):
        call(aligned((N,), np.float32, VALUES), aligned(shape, dtype) if where == "out" else None)
    x = (
        misaligned((N,), np.float32, VALUES)
        if where == "input"
        else aligned((N,), np.float32, VALUES)
    )
    out = misaligned(shape, dtype) if where == "out" else None
    with pytest.raises(ValueError, match=rf"{f}\(\): \w+ starts at address 0x[0-9a-f]+, not a"):
        call(x, out)
    _works_after()
