"""Whether the CUDA target runs under numba-cuda's simulator.

Under ``NUMBA_ENABLE_CUDASIM=1`` kernels run as Python threads over host memory, so
addresses are host pointers, and there is no driver (contexts, devices, events),
no disk cache and no warp instruction.  The modules that branch on it: the warp
primitives' stand-ins (:mod:`.warp`), the kernels' arguments as host views
(:mod:`.plans`, :mod:`.views`), and the driver calls they skip (:mod:`.devices`,
:mod:`.launch`, :mod:`.memory`, :mod:`.streams`, :mod:`.target`).
"""

from numba import config as _nbconfig

#: True under numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``), read once at import.
SIM = bool(getattr(_nbconfig, "ENABLE_CUDASIM", False))
