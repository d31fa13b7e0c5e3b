"""What a first call compiles (issue 35): the CPU kernels' specialisations, counted
(numba dispatchers' signatures, with an empty cache: a kernel loaded from the cache
brings its callees' code and leaves their dispatchers untouched), not timed, so that
a change that makes a first call compile more shows here on any machine.
``python scripts/first_call.py`` times them."""

import json
import os

import pytest
from interpreter import run_python

COUNTS = """
import json
import numpy as np
import dmlnumba
from dmlnumba.cpu import compiling

def counts():
    out = {}
    for d in compiling._dispatchers:
        if d.signatures:
            name = d.py_func.__name__ + (" parallel" if d.targetoptions.get("parallel") else "")
            out[name] = out.get(name, 0) + len(d.signatures)
    for name, _ in compiling.c_functions:
        out[name + " C"] = out.get(name + " C", 0) + 1
    return out

"""

SCRIPT = (
    COUNTS
    + """
steps = []
x = (np.arange(1000) % 3).astype(np.float32)
dmlnumba.nonzero_coordinates(x)
steps.append(counts())
dmlnumba.nonzero_coordinates(np.broadcast_to(x, (2, 1000)))  # read-only, strided, one block
steps.append(counts())
dmlnumba.nonzero_coordinates(np.stack([x, x]))  # the same, writeable, C-contiguous
dmlnumba.nonzero_coordinates(x.reshape(10, 100)[:, ::-1])  # another strided layout
steps.append(counts())
dmlnumba.nonzero_coordinates(x.astype(np.int16).reshape(10, 100))  # another bit width
steps.append(counts())
big = np.ones(1 << 21, np.float32)
dmlnumba.nonzero_coordinates(big)  # several blocks: the parallel driver
dmlnumba.nonzero_coordinates(np.broadcast_to(big, (1, big.size)))
steps.append(counts())
print(json.dumps(steps))
"""
)

#: Each step's specialisations so far, per kernel ("C": a pass compiled as a C function
#: that the drivers call by address; the count pass one for C-contiguous inputs and one
#: for the others, the write pass one for each layout kind (C-contiguous, rows of
#: consecutive elements, stepped rows), the dense write one of each width class:
#: docs/PERFORMANCE.md).
ONE_COLUMN = {"_positions_driver": 1, "_positions": 1}
ONE_BLOCK = {**ONE_COLUMN, "_single_driver": 1, "write_pass C": 1, "_write_dense C": 1}
CONTIGUOUS = {**ONE_BLOCK, "write_pass C": 3}
WIDTH_16 = {**CONTIGUOUS, "_single_driver": 2, "write_pass C": 4, "_write_dense C": 2}
PARALLEL = {**WIDTH_16, "blocks parallel": 1, "count_pass C": 1, "_write_dense C": 3}
EXPECTED = [ONE_COLUMN, ONE_BLOCK, CONTIGUOUS, WIDTH_16, PARALLEL]


@pytest.mark.skipif(
    os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="counts numba's compilations"
)
def test_first_calls_compile_only_their_own_kernels(tmp_path):
    """A 1-d input compiles the positions pass alone; one block of rows (a read-only
    broadcast: rows of consecutive elements) the single-block write, the write pass
    for such rows (not the count pass) and the dense write of its width; the same
    rows C-contiguous the write pass for those, and reversed rows the one for stepped
    rows; a new bit width its own kernels once; a large input the block driver on
    numba's threads (shared by every pass), the count pass and its width's dense
    write, reusing the write pass."""
    r = run_python(
        SCRIPT,
        env=dict(NUMBA_CACHE_DIR=str(tmp_path), DMLNUMBA_CPU_PARALLEL_MIN=str(1 << 20)),
        timeout=900,
    )
    assert r.returncode == 0, r.stderr
    steps = json.loads(r.stdout.strip().splitlines()[-1])
    for i, (got, want) in enumerate(zip(steps, EXPECTED)):
        assert got == want, f"step {i}: {got}"


SLICES = (
    COUNTS
    + """
steps = []
x = (np.arange(1 << 16) % 3).astype(np.float32).reshape(256, 256)
for idx in (np.s_[:, ::-1], np.s_[::-1, ::-1], np.s_[:, ::3], np.s_[1:, 2:]):
    dmlnumba.slice1(x, *dmlnumba.window(x.shape, idx))
    steps.append(counts().get("copy_chunk C", 0))
print(json.dumps(steps))
"""
)


@pytest.mark.skipif(
    os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="counts numba's compilations"
)
def test_first_slice_calls_compile_their_own_kind_of_rows(tmp_path):
    """A slice1 call compiles the chunk copy of its kind of rows alone
    (cpu.slice_kinds): reversed rows one, the same kind in another window none, a
    stepped window and then a plain one one more each."""
    r = run_python(SLICES, env=dict(NUMBA_CACHE_DIR=str(tmp_path)), timeout=900)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [1, 1, 2, 3]


SCRATCH = """
import json
import numpy as np
import dmlnumba
from numba.core import event

compiled = []

class Names(event.Listener):
    def on_start(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__qualname__)

    def on_end(self, ev):
        pass

event.register("numba:compile", Names())
x = (np.arange(1 << 22) % 3).astype(np.float32)  # every call on the block driver
for y in (x, x[::-2], x.reshape(512, -1)[:, 1::3]):
    dmlnumba.nonzero_coordinates(y)
    dmlnumba.slice1(y, *dmlnumba.window(y.shape, (slice(None, None, -1),) * y.ndim))
dmlnumba.nonzero_coordinates(x[:1000].reshape(10, 100))  # one block: the single driver
from dmlnumba.cpu import compiling
print(json.dumps([compiled, [name for name, _ in compiling.c_functions]]))
"""


@pytest.mark.skipif(
    os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="counts numba's compilations"
)
def test_passes_take_their_scratch_from_the_stack(tmp_path):
    """The CPU passes (nonzero's count and write, slice1's chunk copy) and the
    single-block nonzero driver keep their scratch arrays on the stack
    (cpu.llvm.stack_array): those first calls compile no ``np.empty`` implementation,
    which cost each first call 0.2-0.4 s (docs/PERFORMANCE.md, "Startup and compile
    time")."""
    env = dict(NUMBA_CACHE_DIR=str(tmp_path), DMLNUMBA_CPU_PARALLEL_MIN=str(1 << 20))
    r = run_python(SCRATCH, env=env, timeout=900)
    assert r.returncode == 0, r.stderr
    names, c_functions = json.loads(r.stdout.strip().splitlines()[-1])
    assert {"count_pass", "write_pass", "copy_chunk"} <= set(c_functions)
    assert not [n for n in names if "empty" in n], names


@pytest.mark.boundscheck
def test_slow_first_call_says_it_is_compiling(caplog, monkeypatch):
    import logging
    import time

    from dmlnumba.cpu import compiling

    monkeypatch.setattr(compiling, "NOTICE_AFTER", 0.05)
    calls = []

    def slow(*a):
        time.sleep(0.3)
        calls.append(a)
        return 7

    with caplog.at_level(logging.WARNING, logger="dmlnumba"):
        assert compiling.run(slow, ("test-kernel", 1), 1, 2) == 7
        assert compiling.run(slow, ("test-kernel", 1), 3, 4) == 7
    notes = [r for r in caplog.records if "test-kernel/1" in r.getMessage()]
    assert len(notes) == 1 and "python -m dmlnumba compile" in notes[0].getMessage()
    assert calls == [(1, 2), (3, 4)]


#: Calls of every kind the compile command's float32 groups cover (slice1; nonzero into
#: 32-bit coordinates): layouts, row widths, cut-short outputs, parallel sizes.
COVERED = """
import contextlib, sys
import numpy as np
import dmlnumba
from dmlnumba import config
from dmlnumba.cpu import threads

big = max(config.CPU_PARALLEL_MIN, 2 * config.CPU_NONZERO_BLOCK, 2 * config.CPU_SLICE_CHUNK)
way = threads.one_thread() if sys.argv[1] == "one_thread" else contextlib.nullcontext()
way.__enter__()
for n in (4096, big):
    x = (np.arange(n) % 3).astype(np.float32)
    r = x.reshape(-1, 4)
    for y in (x, x[::-1], x[::3], r, r[::-1], r[:, ::2], x.reshape(16, -1).T,
              x.reshape(-1, 2, 2), x.reshape(-1, 8, 2)[:, 1:], x.reshape(2, 2, 2, -1),
              x.reshape(-1, 1, 2, 2, 2)):
        dmlnumba.nonzero_coordinates(y)
        dmlnumba.nonzero_coordinates(y, max_count=3)
    for idx in (np.s_[::-1], np.s_[::2], np.s_[5:-3]):
        w = dmlnumba.window(x.shape, (idx,))
        dmlnumba.slice1(x, *w)
    m = x.reshape(-1, 16)
    for y, idx in ((m, np.s_[::-1, 3:]), (m, np.s_[:, ::-2]), (m, np.s_[1::2, ::5]),
                   (m.T, np.s_[:, 1:])):  # the last: tiles (a transposed input)
        w = dmlnumba.window(y.shape, idx)
        dmlnumba.slice1(y, *w)
        h, k = y[idx].shape
        dmlnumba.slice1(y, *w, out=np.empty((k, h), np.float32).T)
        dmlnumba.slice1(y, *w, out=np.empty((h, 2 * k), np.float32)[:, ::2])
print("done")
"""


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="counts numba's cache files")
def test_the_compile_command_covers_every_kernel_a_call_takes(tmp_path):
    """After the compile command's slice1 and nonzero float32 groups (README: "compile
    every CPU kernel ahead of time"), calls of every layout kind, row width and size
    write nothing to numba's cache: nothing of theirs compiles.  In each way a large
    call may run: on numba's threads (the load check off), on the calling thread where
    numba may take one thread, or where the process takes none (a dask task's)."""
    env = dict(NUMBA_CACHE_DIR=str(tmp_path))
    groups = "[('slice1', 'float32', None), ('nonzero', 'float32', 'uint32')]"
    r = run_python(
        f"from dmlnumba import precompile\nfor g in {groups}: precompile.compile_group(*g)",
        env=env,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr
    before = {str(p) for p in tmp_path.rglob("*")}
    ways = [
        ({"DMLNUMBA_CPU_LOAD_CHECK": "0"}, "threads"),
        ({"NUMBA_NUM_THREADS": "1"}, "this thread"),
        ({}, "one_thread"),
    ]
    for extra, way in ways:
        r = run_python(COVERED, env={**env, **extra}, args=(way,), timeout=900)
        assert r.returncode == 0 and "done" in r.stdout, r.stderr
        assert "compiling" not in r.stderr, (way, r.stderr)
        assert {str(p) for p in tmp_path.rglob("*")} == before, way
