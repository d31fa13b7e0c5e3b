"""dmlnumba: DirectML's SLICE1, SLICE_GRAD and NONZERO_COORDINATES, exact, on CPU and NVIDIA GPUs.

Importing the package compiles nothing and imports neither numba's compiler
nor ``numba.cuda``: the kernels of a target compile (and load from the on-disk
cache) on that target's first call.
"""

from .api import argwhere, nonzero_coordinates, slice1, slice_grad, window
from .dispatch import DeviceUnavailableError

__version__ = "0.3.0"
__all__ = [
    "slice1",
    "slice_grad",
    "nonzero_coordinates",
    "argwhere",
    "window",
    "DeviceUnavailableError",
    "__version__",
]
