"""Arrays whose memory is gone. PyTorch tensors whose storage was freed in place
(``untyped_storage().resize_(0)``, as FSDP and activation offloading leave parameters),
or shrunk: their data pointer is null or too short. ``Tensor.numpy`` of a null one is
new memory, so a CPU call read garbage (a count of 524 for 1000 ones) and wrote results
nobody saw; on CUDA a call read address 0 (an illegal memory access, which ended the
process's CUDA context). Every operator refuses such a tensor, as input or output, with
a ValueError naming the function and the parameter, before anything is written: on the
checked path (a first call of its layout, which also sees a storage shrunk to fewer
bytes than its elements take) and where a runner of its layout is kept (which sees the
null pointer). Then the same calls on live tensors give the right answer. JAX arrays
that were deleted (donated to a jitted function, or ``delete()``d) raised JAX's own
RuntimeError from wherever a call first asked them something; they are a ValueError
naming the function and the parameter too."""

import numpy as np
import pytest

import dmlnumba

from devices import jax_gpu, needs_real_gpu, torch_devices

torch = pytest.importorskip("torch")

DEVICES = torch_devices(torch)

#: Each operator as a function of ``(x, out)`` (``out`` None: a new result), and the
#: name its ``out`` goes by.
CALLS = {
    "slice1": lambda x, out: dmlnumba.slice1(x, (1, 0), (3, 4), (1, -1), out=out),
    "slice_grad": lambda g, out: dmlnumba.slice_grad(g, (5, 6), (1, 0), (3, 4), (1, -1), out=out),
    "nonzero_coordinates": lambda x, out: dmlnumba.nonzero_coordinates(
        x, dtype=torch.int64, out_coordinates=out
    ),
    "argwhere": lambda x, out: dmlnumba.argwhere(x),
}
#: The input's name in each operator's messages, and its shape.
INPUTS = {
    "slice1": ("input", (5, 6)),
    "slice_grad": ("input_gradient", (3, 4)),
    "nonzero_coordinates": ("input", (5, 6)),
    "argwhere": ("input", (5, 6)),
}


def _input(f, device, dtype=torch.float32):
    shape = INPUTS[f][1]
    n = int(np.prod(shape))
    return (torch.arange(n, device=device) % 3).to(dtype).reshape(shape)


def _out(f, device):
    """A new output of ``f`` for the input of :func:`_input` (None: ``f`` takes none)."""
    if f == "argwhere":
        return None
    r = CALLS[f](_input(f, device), None)
    return torch.full_like(r[1] if f == "nonzero_coordinates" else r, 7)


def _resize(t, nbytes=0):
    """``t``, its storage resized in place to ``nbytes`` (0: freed, as FSDP frees
    parameters).  PyTorch raises "Trying to resize storage that is not resizable" for
    one that ``Tensor.numpy`` once viewed."""
    t.untyped_storage().resize_(nbytes)
    return t


def _expected(f, x):
    r = CALLS[f](x, None)
    return r[1][: int(r[0][0])] if f == "nonzero_coordinates" else r


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("f", list(CALLS))
@pytest.mark.parametrize("warm", [False, True], ids=["checked", "runner"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kind", ["tensor", "parameter"])
def test_a_freed_input_is_refused(device, f, warm, dtype, kind):
    """``parameter``: an ``nn.Parameter`` (a subclass, read through its own methods
    every call; FSDP frees parameters' storages), under ``torch.no_grad()``."""

    def x():
        t = _input(f, device, dtype)
        return torch.nn.Parameter(t) if kind == "parameter" else t

    dmlnumba.keys.runners.clear()
    with torch.no_grad():
        if warm:  # a runner of the layout kept (two calls: the second takes it)
            for _ in range(2):
                CALLS[f](x(), None)
        with pytest.raises(ValueError, match=rf"{f}\(\): {INPUTS[f][0]}'s storage holds 0 bytes"):
            CALLS[f](_resize(x()), None)
        live = x()
        assert torch.equal(_expected(f, live).cpu(), _expected(f, live.detach().cpu()))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("f", ["slice1", "nonzero_coordinates"])
def test_a_shrunk_input_is_refused_where_its_call_is_checked(device, f):
    """Shrunk to 8 of its 120 bytes: not null, but too short (the checked path
    compares the storage's bytes with the elements' span, the view's offset
    included)."""
    dmlnumba.keys.runners.clear()
    x = _resize(_input(f, device), 8)
    with pytest.raises(ValueError, match=rf"{f}\(\): input's storage holds 8 bytes, .* need 120"):
        CALLS[f](x, None)

    def view():  # the last 28 of 30 elements, at an offset of 8 bytes: 120 bytes
        base = _input(f, device).reshape(-1)
        return base, base[2:].reshape(4, 7)

    base, whole = view()
    # Its span ends at the storage's end: read.
    assert torch.equal(_expected(f, whole).cpu(), _expected(f, whole.cpu()))
    dmlnumba.keys.runners.clear()  # (a runner reads it as it is: only the null pointer)
    base, short = view()
    _resize(base, 116)
    with pytest.raises(ValueError, match=r"storage holds 116 bytes, and its elements need 120"):
        CALLS[f](short, None)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("f", ["slice1", "slice_grad", "nonzero_coordinates"])
@pytest.mark.parametrize("warm", [False, True], ids=["checked", "runner"])
def test_a_freed_output_is_refused_and_nothing_is_written(device, f, warm):
    dmlnumba.keys.runners.clear()
    name = "out_coordinates" if f == "nonzero_coordinates" else "out"
    if warm:
        for _ in range(2):
            CALLS[f](_input(f, device), _out(f, device))
    x = _input(f, device)
    before = x.clone()
    out = _resize(_out(f, device))
    with pytest.raises(ValueError, match=rf"{f}\(\): {name}'s storage holds 0 bytes"):
        CALLS[f](x, out)
    assert torch.equal(x, before)
    live = _out(f, device)
    r = CALLS[f](x, live)
    if f == "nonzero_coordinates":
        assert r[1] is live and torch.equal(live[: int(r[0][0])].cpu(), _expected(f, x.cpu()))
    else:
        assert r is live and torch.equal(live.cpu(), _expected(f, x.cpu()))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("warm", [False, True], ids=["checked", "runner"])
def test_a_freed_count_output_is_refused_and_the_coordinates_are_not_written(device, warm):
    dmlnumba.keys.runners.clear()
    x = _input("nonzero_coordinates", device)
    count = torch.zeros(1, dtype=torch.int64, device=device)

    def call(cnt, coords):
        return dmlnumba.nonzero_coordinates(
            x, dtype=torch.int64, out_count=cnt, out_coordinates=coords
        )

    if warm:
        for _ in range(2):
            call(count.clone(), _out("nonzero_coordinates", device))
    coords = _out("nonzero_coordinates", device)
    with pytest.raises(ValueError, match=r"nonzero_coordinates\(\): out_count's storage holds 0"):
        call(_resize(count.clone()), coords)
    assert bool((coords == 7).all())


@pytest.mark.parametrize("where", ["cpu", pytest.param("gpu", marks=needs_real_gpu)])
@pytest.mark.parametrize("f", list(CALLS))
@pytest.mark.parametrize("warm", [False, True], ids=["checked", "runner"])
def test_a_deleted_jax_array_is_refused(where, f, warm):
    jax = pytest.importorskip("jax")
    dev = jax.devices("cpu")[0] if where == "cpu" else jax_gpu()
    dmlnumba.keys.runners.clear()

    def x():
        return jax.device_put(_input(f, "cpu").numpy(), dev)

    if warm:
        for _ in range(2):
            CALLS[f](x(), None)
    a = x()
    a.delete()
    with pytest.raises(ValueError, match=rf"{f}\(\): {INPUTS[f][0]} is a deleted JAX array"):
        CALLS[f](a, None)
    assert np.array_equal(np.asarray(_expected(f, x())), _expected(f, _input(f, "cpu")).numpy())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("f", list(CALLS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tensors_a_call_reads_or_writes_stay_resizable(device, f, dtype):
    """Every tensor a call reads or writes, on the checked path (the first call) and
    through a runner (the repeats, which keep a small tensor's view), can still be
    resized in place and freed: a later call on it reads its new memory."""
    dmlnumba.keys.runners.clear()
    x = _input(f, device, dtype)
    r = CALLS[f](x, None)
    out = None if f == "argwhere" else torch.full_like(r[1] if isinstance(r, tuple) else r, 7)
    for _ in range(3):
        CALLS[f](x, out)
        CALLS[f](x, None)
    written = [t for t in (x, out) if t is not None]
    sizes = [t.untyped_storage().nbytes() for t in written]
    for t, n in zip(written, sizes):
        _resize(t, 2 * n)  # (new memory: the values are copied)
    assert torch.equal(_expected(f, x).cpu(), _expected(f, x.cpu()))
    for t, n in zip(written, sizes):
        _resize(t, 0)
        _resize(t, n)
    x.copy_(_input(f, device, dtype).flip(0))  # other values, in the memory given back
    assert torch.equal(_expected(f, x).cpu(), _expected(f, x.cpu()))
    if out is not None:
        got = CALLS[f](x, out)
        assert (got[1] if isinstance(got, tuple) else got) is out


@pytest.mark.parametrize("f", ["slice1", "nonzero_coordinates"])
def test_a_runner_reads_a_kept_tensor_freed_and_given_memory_again(f):
    """A runner keeps the last small CPU tensor's NumPy view by its data pointer. A
    repeat on that tensor once its storage is freed in place is refused (its pointer
    is null); once the storage has memory again, the call reads the values there."""
    dmlnumba.keys.runners.clear()
    first = _input(f, "cpu")
    for _ in range(2):
        CALLS[f](first, None)  # the second call keeps first's view
    n = first.untyped_storage().nbytes()
    _resize(first)
    with pytest.raises(ValueError, match=rf"{f}\(\): input's storage holds 0 bytes"):
        CALLS[f](first, None)
    _resize(first, n)
    first.copy_(_input(f, "cpu").flip(1))
    assert torch.equal(_expected(f, first), _expected(f, first.clone()))


def test_onnx_slice_parameters_stay_resizable():
    """ONNX Slice reads its parameters' values on the host: a copy, not a view."""
    import dmlnumba.onnx

    a = torch.arange(12.0).reshape(3, 4)
    starts, ends, steps = torch.tensor([0, 1]), torch.tensor([2, 4]), torch.tensor([1, 2])
    assert torch.equal(dmlnumba.onnx.slice(a, starts, ends, steps=steps), a[0:2, 1:4:2])
    for t in (starts, ends, steps):
        _resize(t, 64)
