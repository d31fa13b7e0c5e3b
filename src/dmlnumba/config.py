"""Tunable sizes, in one place so that tests can patch them small.

Each can also be set from the environment as ``DMLNUMBA_<NAME>`` (for tuning runs).

Tests set these (through ``monkeypatch``) so that tiny inputs cross many blocks,
which exercises the scan and the block seams on inputs that are cheap to check.

Every assignment to a setting (``config.X = v``, ``monkeypatch.setattr``) counts
in :data:`GENERATION`, which the caches of prepared calls (the API's runners, the
CUDA plans) take as part of their keys: a call made after a change never reuses
work prepared under the old values.
"""

import operator
import sys
import types


class _Settings(types.ModuleType):
    """This module's class: an assignment to an upper-case name counts a generation; a
    setting's value must be in its range (:data:`_RANGES`, as from the environment)."""

    def __setattr__(self, name, value):
        if name in self.__dict__["_RANGES"]:  # (outside it, wrong results or none)
            try:
                v = None if isinstance(value, bool) else operator.index(value)
            except TypeError:
                v = None
            if v is None or not _allowed(name, v):
                raise ValueError(f"dmlnumba.config.{name} = {value!r} is not valid: {_must(name)}")
            value = v
        super().__setattr__(name, value)
        if name.isupper() and name != "GENERATION":
            super().__setattr__("GENERATION", self.__dict__.get("GENERATION", 0) + 1)


#: Changes to the settings so far (see above).
GENERATION = 0

#: CPU nonzero: elements per block.  Each block is a contiguous range of the
#: element order; blocks are counted in parallel, scanned, then written in parallel.
CPU_NONZERO_BLOCK = 1 << 16

#: CPU slice1: output elements per parallel chunk.
CPU_SLICE_CHUNK = 1 << 15

#: CPU slice1: windows of at most this many elements are copied by NumPy's strided
#: view and copy (``numpy.copyto`` into an ``out=`` array), which costs less than a
#: kernel call's fixed overhead (see docs/PERFORMANCE.md for the measurement that
#: set it).
CPU_SLICE_NUMPY_MAX = 1 << 13

#: Below this many elements, CPU kernels run on one thread.  Below about 2**20 a
#: call into new outputs gains little from threads (page faults on the new output
#: dominate), and on a loaded machine a parallel region waits for a descheduled
#: worker (scripts/loaded_latency.py; the measurement: docs/PERFORMANCE.md, "Settings").
CPU_PARALLEL_MIN = 1 << 20

#: 1 (the default): a CPU call large enough for numba's threads (slice1's copy,
#: nonzero's passes) runs on as many of them as the machine's other runnable threads
#: leave a core each (Linux's count of them), on this thread where that is fewer than
#: two; 0: on all of them, however busy the machine is.  A parallel region waits for
#: its slowest thread, which another busy process may hold up (docs/PERFORMANCE.md,
#: "Settings").
CPU_LOAD_CHECK = 1

#: Dask nonzero: the most input bytes of one block where the input's chunking must
#: be rechunked into stripes (blocks that are contiguous in element order).
DASK_BLOCK_BYTES = 1 << 27

#: Dask nonzero of a 1-d input or of a 2-d one in row blocks, without max_count: 1
#: builds the rows and counts as blockwise layers, into which dask fuses the input's
#: blockwise tasks (a generator, a device move): a task a block fewer for the
#: scheduler, at a graph-optimization cost on the client (docs/PERFORMANCE.md,
#: "Settings"); 0 builds the materialized layer every layout takes.  Off: on GPUs
#: it measured slower on one and mixed on two (scripts/dask_two_gpus.py runs both).
DASK_BLOCKWISE = 0

#: CUDA: threads per block for both operators.
CUDA_THREADS = 256

#: CUDA nonzero: at most this many 32-element steps each warp takes per tile
#: (a tile is THREADS * ITEMS elements).
CUDA_NONZERO_ITEMS = 256

#: CUDA nonzero: at most this many steps a warp where the input is 1-d and
#: CUDA_NONZERO_ITEMS would cut it into more than CUDA_NONZERO_TILES tiles and at
#: most 8 times as many (docs/PERFORMANCE.md, "Settings").
CUDA_NONZERO_ITEMS_1D = 128

#: CUDA nonzero: at least this many (small inputs: 256 tiles at 2**20), except that an
#: input that fits one tile takes only the steps it fills (in multiples of 4).
CUDA_NONZERO_MIN_ITEMS = 16

#: CUDA nonzero: about how many tiles (blocks) to cut an input into, where the
#: items above allow: enough to give every SM several, few enough that looking
#: back stays short.
CUDA_NONZERO_TILES = 512

#: CUDA nonzero: inputs of fewer elements than this (and than 2**31: every position
#: below 2**31) take the kernel whose write pass divides in 32 bits; larger ones the
#: 64-bit one.  Tests set it to 0 to run the 64-bit write pass on small inputs.
CUDA_NONZERO_32BIT_BELOW = 1 << 31

#: CUDA nonzero: register cap per thread, every variant (0: the compiler's
#: choice, about 60).  At 40 the kernels spill (the count pass's loads in flight,
#: the staged write pass); 56 is the fastest cap that does not spill
#: (docs/PERFORMANCE.md, "Settings").
CUDA_NONZERO_MAX_REGISTERS = 56

#: CUDA slice1: about how many elements of a row each thread copies (its share
#: of a tile's segment).
CUDA_SLICE_ITEMS = 8

#: CUDA slice1: consecutive rows each tile walks (amortizes the divisions that
#: locate a tile's first row).  Short tiles also keep the last wave of tiles short
#: (docs/PERFORMANCE.md, "Settings").
CUDA_SLICE_ROWS = 8

#: CUDA slice1: fewer rows a tile where CUDA_SLICE_ROWS would leave fewer tiles
#: than this.
CUDA_SLICE_TILES = 4096

#: CUDA slice1: copies of items up to 4 bytes whose every position (of the input's
#: and the output's span, in the copy's items) and tile count are below this take
#: the kernel that keeps positions in 32 bits, capped at CUDA_SLICE_32BIT_REGISTERS;
#: larger ones, and 8-byte items, the 64-bit one.  Tests set it to 0 to run the
#: 64-bit kernel on small copies.
CUDA_SLICE_32BIT_BELOW = 1 << 30

#: CUDA slice1: register cap per thread of the 32-bit kernel (0: the compiler's
#: choice, 90 on sm_90).  80 leaves three blocks of 256 threads an SM, where the
#: 64-bit kernel (118 registers) fits two (docs/PERFORMANCE.md).
CUDA_SLICE_32BIT_REGISTERS = 80

#: CUDA slice1: 1 copies windows of 4- and 8-byte items, and windows whose rows are
#: read with a step, by the gather kernel (one output element a thread, its source
#: found by a division per dimension) where every position is below
#: CUDA_SLICE_32BIT_BELOW and the rows are not copied as 8-byte words; 0 keeps
#: them on the tiled kernel.  Tests set it to 0 to run the tiled kernel on every
#: window (docs/PERFORMANCE.md).
CUDA_SLICE_GATHER = 1

#: The measurements behind the CUDA settings are in docs/PERFORMANCE.md ("Settings").


#: Each setting's allowed values from the environment: (least, most, multiple of).
_RANGES = {
    "CPU_NONZERO_BLOCK": (1, 1 << 40, 1),
    "CPU_SLICE_CHUNK": (1, 1 << 40, 1),
    "CPU_PARALLEL_MIN": (0, 1 << 62, 1),
    "CPU_SLICE_NUMPY_MAX": (0, 1 << 40, 1),
    "CPU_LOAD_CHECK": (0, 1, 1),
    "DASK_BLOCK_BYTES": (1, 1 << 50, 1),
    "DASK_BLOCKWISE": (0, 1, 1),
    "CUDA_THREADS": (32, 1024, 32),
    "CUDA_NONZERO_ITEMS": (2, 1024, 1),  # (2: the tests' smallest tiles)
    "CUDA_NONZERO_ITEMS_1D": (4, 1024, 1),
    "CUDA_NONZERO_MIN_ITEMS": (1, 1024, 1),
    "CUDA_NONZERO_TILES": (1, 1 << 24, 1),
    "CUDA_NONZERO_MAX_REGISTERS": (0, 255, 1),
    "CUDA_NONZERO_32BIT_BELOW": (0, 1 << 32, 1),
    "CUDA_SLICE_ITEMS": (1, 64, 1),
    "CUDA_SLICE_ROWS": (1, 1 << 16, 1),
    "CUDA_SLICE_TILES": (1, 1 << 24, 1),
    "CUDA_SLICE_32BIT_BELOW": (0, 1 << 31, 1),
    "CUDA_SLICE_32BIT_REGISTERS": (0, 255, 1),
    "CUDA_SLICE_GATHER": (0, 1, 1),
}

#: What was wrong with the environment's settings (None: nothing); every call
#: raises it as a ValueError (:func:`check_env`), so that ``import dmlnumba`` itself
#: never fails.
ENV_ERROR = None


def check_env(func):
    """Raise the environment's error (:data:`ENV_ERROR`), if any, as a ValueError of ``func``."""
    if ENV_ERROR:
        raise ValueError(f"{func}(): {ENV_ERROR}")


def _allowed(name, value):
    """Whether the int ``value`` is in the setting ``name``'s range (:data:`_RANGES`)."""
    lo, hi, mult = _RANGES[name]
    return lo <= value <= hi and value % mult == 0


def _must(name):
    """What the setting ``name``'s value must be, for a message."""
    lo, hi, mult = _RANGES[name]
    every = f", a multiple of {mult}" if mult > 1 else ""
    return f"it must be an integer from {lo} to {hi}{every}"


def _from_env():
    import os
    import re

    global ENV_ERROR
    g = globals()
    for k in _RANGES:
        var = f"DMLNUMBA_{k}"
        raw = os.environ.get(var)
        if raw is None:
            continue
        t = raw.strip()
        value = int(t) if re.fullmatch(r"-?[0-9]+", t) else None
        if value is None or not _allowed(k, value):
            ENV_ERROR = f"environment variable {var}={raw!r} is not valid: {_must(k)} (or unset)"
            continue
        g[k] = value


_from_env()

sys.modules[__name__].__class__ = _Settings
