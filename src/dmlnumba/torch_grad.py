"""Gradients through dmlnumba's PyTorch operators (see :mod:`dmlnumba.torch_ops`).

slice1's backward is slice_grad over the window slice1 read (tightened to its output
sizes), and slice_grad's is slice1 over the same window: both operators are linear,
each the other's adjoint.  Registered with ``torch.library.register_autograd`` (eager
autograd, torch.compile and torch.export hold them as they are), with vmap rules
(``register_vmap``: a batch dimension is one more window dimension that keeps it
whole), and as ``autograd.Function`` classes for torch.func's ``grad``, ``jacrev``
and ``jvp``, which take a custom operator's gradient only through such a class, and
for forward-mode AD (``torch.autograd.forward_ad``: the classes' ``jvp``).
"""

import torch

from .traced import dual_level


def _tight_window(offsets, sizes, strides, out_shape):
    """The window SLICE1 reads an output of ``out_shape`` through, tightened so that its
    output sizes are exactly ``out_shape`` (an ``output_sizes`` below the window's
    reads the same elements as this smaller window): slice1's backward is SLICE_GRAD
    over it."""
    offs, szs = [], []
    for o, s, t, m in zip(offsets, sizes, strides, out_shape):
        tight = (m - 1) * abs(t) + 1
        offs.append(o if t > 0 else o + s - tight)
        szs.append(tight)
    return offs, szs


def _slice1_setup(ctx, inputs, output):
    input, offsets, sizes, strides, output_sizes = inputs
    ctx.input_shape = list(input.shape)
    ctx.offsets, ctx.sizes = _tight_window(offsets, sizes, strides, output.shape)
    ctx.strides = list(strides)


def _slice1_backward(ctx, grad):
    g = slice_grad_op(grad, ctx.input_shape, ctx.offsets, ctx.sizes, ctx.strides)
    return g, None, None, None, None


def _slice_grad_setup(ctx, inputs, output):
    _, input_shape, offsets, sizes, strides = inputs
    ctx.input_shape = list(input_shape)
    ctx.window = (list(offsets), list(sizes), list(strides))


def _slice_grad_backward(ctx, grad):
    offsets, sizes, strides = ctx.window
    return slice1_op(grad, offsets, sizes, strides, None), None, None, None, None


def _batch_first(x, bdim, window):
    """A vmap rule's batched input with its batch dimension first, and the window
    with a first dimension that keeps it whole (offset 0, its size, stride 1)."""
    x = x.movedim(bdim, 0)
    n = x.shape[0]
    return x, n, [None if p is None else [e, *p] for p, e in zip(window, (0, n, 1, n))]


def _slice1_vmap(_info, in_dims, input, offsets, sizes, strides, output_sizes=None):
    op = torch.ops.dmlnumba.slice1
    if in_dims[0] is None:
        return op(input, offsets, sizes, strides, output_sizes), None
    x, _, window = _batch_first(input, in_dims[0], (offsets, sizes, strides, output_sizes))
    return op(x, *window), 0


def _slice_grad_vmap(_info, in_dims, grad, input_shape, offsets, sizes, strides):
    op = torch.ops.dmlnumba.slice_grad
    if in_dims[0] is None:
        return op(grad, input_shape, offsets, sizes, strides), None
    g, n, window = _batch_first(grad, in_dims[0], (offsets, sizes, strides))
    return op(g, [n, *input_shape], *window), 0


class _Window:
    """A window's parameters as one argument of the ``autograd.Function`` classes: one
    leaf of torch.func's pytrees (a list is a node of its elements, which a backward's
    one None per argument then fails to match: ``hessian`` raised PyTorch's
    ``treespec.unflatten`` error)."""

    __slots__ = ("params",)

    def __init__(self, *params):
        self.params = params


class _Slice1(torch.autograd.Function):
    """slice1 under a torch.func transform (``grad``, ``vmap``, ``jacrev``) or
    forward-mode AD, which take an operator's registered autograd only through an
    ``autograd.Function`` with its own ``setup_context``: the same operator, the same
    backward; ``window``: offsets, sizes, strides and output_sizes (:class:`_Window`)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(input, window):
        with torch._C._AutoDispatchBelowAutograd():  # this Function is the autograd
            return torch.ops.dmlnumba.slice1(input, *window.params)

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, window = inputs
        _slice1_setup(ctx, (input, *window.params), output)

    @staticmethod
    def backward(ctx, grad):
        return _slice1_backward(ctx, grad)[0], None

    @staticmethod
    def jvp(ctx, tangent, _):  # linear: the tangent's slice
        return slice1_op(tangent, ctx.offsets, ctx.sizes, ctx.strides, None)


class _SliceGrad(torch.autograd.Function):
    """slice_grad under a torch.func transform (see :class:`_Slice1`; ``window``:
    input_shape, offsets, sizes and strides)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(grad, window):
        with torch._C._AutoDispatchBelowAutograd():  # this Function is the autograd
            return torch.ops.dmlnumba.slice_grad(grad, *window.params)

    @staticmethod
    def setup_context(ctx, inputs, output):
        grad, window = inputs
        _slice_grad_setup(ctx, (grad, *window.params), output)

    @staticmethod
    def backward(ctx, grad):
        return _slice_grad_backward(ctx, grad)[0], None

    @staticmethod
    def jvp(ctx, tangent, _):  # linear: the tangent's slice_grad
        return slice_grad_op(tangent, ctx.input_shape, *ctx.window)


def _transforms_active():
    """Whether a torch.func transform other than ``functionalize`` (which runs the
    operators as they are) wraps the call, or forward-mode AD is on (a
    ``forward_ad.dual_level()``: the registered autograd has no ``jvp``)."""
    if torch.compiler.is_compiling():
        return False
    if dual_level():
        return True
    if not torch._C._are_functorch_transforms_active():
        return False
    top = torch._C._functorch.peek_interpreter_stack()
    return top is None or top.key() != torch._C._functorch.TransformType.Functionalize


def slice1_op(input, offsets, sizes, strides, output_sizes):
    """``torch.ops.dmlnumba.slice1``, through :class:`_Slice1` under a torch.func
    transform."""
    if _transforms_active():
        return _Slice1.apply(input, _Window(offsets, sizes, strides, output_sizes))
    return torch.ops.dmlnumba.slice1(input, offsets, sizes, strides, output_sizes)


def slice_grad_op(grad, input_shape, offsets, sizes, strides):
    """``torch.ops.dmlnumba.slice_grad``, through :class:`_SliceGrad` under a torch.func
    transform."""
    if _transforms_active():
        return _SliceGrad.apply(grad, _Window(input_shape, offsets, sizes, strides))
    return torch.ops.dmlnumba.slice_grad(grad, input_shape, offsets, sizes, strides)


def register(slice1, slice_grad):
    """Register the gradients and vmap rules of the operators ``slice1`` and
    ``slice_grad`` (their ``custom_op`` objects), once, when they are defined."""
    slice1.register_autograd(_slice1_backward, setup_context=_slice1_setup)
    slice_grad.register_autograd(_slice_grad_backward, setup_context=_slice_grad_setup)
    torch.library.register_vmap("dmlnumba::slice1", _slice1_vmap)
    torch.library.register_vmap("dmlnumba::slice_grad", _slice_grad_vmap)
