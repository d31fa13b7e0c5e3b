"""The CPU target: numba ``@njit(parallel=True)`` kernels (:mod:`.kernels`) and the
calls that run them (:mod:`.target`)."""
