"""The CUDA target, imported on first CUDA use only.

- :mod:`.target`: the target's interface (what :mod:`dmlnumba.target`'s protocol
  asks of it), over the rest;
- :mod:`.plans` and :mod:`.geometry`: a call shape's kernel variant, launch
  geometry and parameter block; :mod:`.launch`: compiling and launching the kernels;
- the kernels: :mod:`.nonzero_kernel` (its steps in :mod:`.nonzero_count`,
  :mod:`.tile_status` and :mod:`.nonzero_write`) and :mod:`.slice_kernel`, over the
  device functions of :mod:`.warp` and :mod:`.indexmath`, within :mod:`.policy`'s
  shared-memory sizes;
- the caller's arrays, streams and devices: :mod:`.views`, :mod:`.streams`,
  :mod:`.memory`, :mod:`.devices`; :mod:`.sim`: whether numba's simulator runs them.

Named ``gpu``, not ``cuda``: numba-cuda's import redirector (``_numba_cuda_redirector``)
recurses without end on any module name that contains ``numba.cuda``, which
``dmlnumba.cuda`` does."""
