"""The CUDA target: numba-cuda kernels (:mod:`.nonzero_kernel`, :mod:`.slice_kernel`),
their launches (:mod:`.launch`), plans (:mod:`.target`) and the caller's arrays and
streams (:mod:`.views`).  Imported on first CUDA use only.

Named ``gpu``, not ``cuda``: numba-cuda's import redirector (``_numba_cuda_redirector``)
recurses without end on any module name that contains ``numba.cuda``, which
``dmlnumba.cuda`` does."""
