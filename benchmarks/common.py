"""Shared helpers of the asv benchmarks."""

import numpy as np


def gpu_or_skip():
    """CuPy on a real GPU, or NotImplementedError (asv's way to skip a benchmark)."""
    try:
        import cupy as cp

        if cp.cuda.runtime.getDeviceCount() < 1:
            raise NotImplementedError("no CUDA GPU")
        return cp
    except NotImplementedError:
        raise
    except Exception as e:  # no cupy, no driver, no device
        raise NotImplementedError(f"no CUDA GPU: {e}") from None


def with_density(shape, density, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    x[rng.random(shape) >= density] = 0
    return x
