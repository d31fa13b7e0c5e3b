"""Names vulture reports as unused that are used where it cannot see: by numba, by
PyTorch, by ONNX, or only to keep an object alive.  Read (never run) by vulture,
with ``src/dmlnumba`` (``[tool.vulture]`` in pyproject.toml); vulture matches by
name, so an attribute read below marks every definition of that name as used.
"""

# ruff: noqa: B018  (the attribute reads, expressions of no use, are the whitelist)


class _Used:
    """Any attribute of it: a name read, for vulture (nothing here runs)."""

    def __getattr__(self, _name):
        return self


used = _Used()

# cpu/llvm.py, gpu/warp.py: numba calls an @intrinsic with its typing context first.
used.typingctx
# gpu/launch.py: _Launch keeps its array of argument pointers alive (cuLaunchKernel reads
# it through _addr, its address).
used._ptrs
# gpu/views.py (Flat, host_view), onnx.py: the exporter keeps the array it describes alive;
# cpu/views.py (_TensorMemory): the tensor whose memory it describes.
used._owner
# gpu/tile_status.py: the status kind of a zeroed word, which the docstrings name (the
# kernels test for the other two kinds).
used.NOT_READY
# interop.py: read by torch._dynamo (torch_ops_ready is a constant under torch.compile).
used._dynamo_marked_constant
# onnx.py: read and called by onnx.reference's ReferenceEvaluator (an OpRun subclass's
# domain, and the method its run() calls).
used.op_domain
used._run
# torch_ops.py: the @<op>.register_fake functions, named _, registered by the decorator.
used._
# config.py: the module's class, set to _Settings so that assignments count generations.
used.__class__
# torch_grad.py: an autograd.Function's members, read and called by PyTorch (apply, torch.func).
used.generate_vmap_rule
used.forward
used.setup_context
used.backward
used.jvp
