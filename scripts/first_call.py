"""The first call's compile time, one fresh process (and an empty numba cache) a case.

``python scripts/first_call.py [--repeat N] [--detail] [--old REF] [CASE ...]``: for each
case (default: all below), a fresh interpreter with ``NUMBA_CACHE_DIR`` a new empty
directory imports dmlnumba (``--old``: an older tree, a commit or a directory, by
:func:`harness.old_tree`), builds the input, and times the first call; it prints the
seconds (median and range over ``--repeat`` processes; wall, and the process's CPU time:
a compile runs on one thread, so the CPU time varies less on a busy machine), the
specialisations compiled, and with ``--detail`` per kernel (numba dispatcher) the
specialisations and numba's compile time (CPU seconds; ``numba:compile`` events, each
kernel's own: nested compiles excluded).  The passes compiled as C functions
(``numba.cfunc``) are counted apart: numba's events leave them out, so their compile
time is the rest of the call's.

A case is ``OP:DTYPE:SIZE[:ro|:step]``: OP nonzero, slice1 (a reversed window into a new
output), slice1step (a window stepping by 2 in its last dimension) or argwhere; SIZE
small (1000 elements) or large (2**22), 1-d, or small3d or large3d: shaped (10, 10,
-1); ro: a read-only input (a broadcast, one dimension more); step: every other
element of twice the elements, from the last (a strided input).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import harness

SCRIPTS = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import importlib, json, sys, time
import numpy as np
op, dtype, size, ro, old, scripts = sys.argv[1:7]
n = 1000 if size.startswith("small") else 1 << 22
if old:  # an older tree, as dmlnumba_old
    sys.path.insert(0, scripts)
    import harness
    dmlnumba = harness.old_tree(old)
else:
    import dmlnumba
from numba.core import event
compiling = importlib.import_module(dmlnumba.__name__ + ".cpu.compiling")
class Rec(event.Listener):  # numba's RecordingListener, with CPU time
    def __init__(self):
        self.buffer = []
    def on_start(self, ev):
        self.buffer.append((time.process_time(), ev))
    def on_end(self, ev):
        self.buffer.append((time.process_time(), ev))
rec = Rec()
event.register("numba:compile", rec)
x = (np.arange(2 * n if ro == "step" else n) % 3).astype(dtype)
if ro == "step":  # every other element, from the last
    x = x[::-2]
if size.endswith("3d"):
    x = x.reshape(10, 10, -1)
if ro == "ro":
    x = np.broadcast_to(x, (1,) + x.shape)
t1 = time.perf_counter()
c1 = time.process_time()
if op == "nonzero":
    dmlnumba.nonzero_coordinates(x)
elif op == "argwhere":
    dmlnumba.argwhere(x)
else:  # slice1: a reversed window, or (slice1step) a stepped one
    last = slice(None, None, 2 if op == "slice1step" else -1)
    idx = (slice(None),) * (x.ndim - 1) + (last,)
    dmlnumba.slice1(x, *dmlnumba.window(x.shape, idx))
t2 = time.perf_counter()
c2 = time.process_time()
compiled = {}
stack = []  # [name, start, time in nested compiles]
for ts, ev in rec.buffer:
    if ev.is_start:
        stack.append([ev.data["dispatcher"].py_func.__name__, ts, 0.0])
    else:
        name, start, nested = stack.pop()
        c = compiled.setdefault(name, [0, 0.0])
        c[0] += 1
        c[1] += ts - start - nested
        if stack:
            stack[-1][2] += ts - start
c_functions = [name for name, _ in compiling.c_functions]
print(json.dumps({"call": t2 - t1, "cpu": c2 - c1, "compiled": compiled, "c": c_functions}))
"""

CASES = [
    f"{op}:{t}:{s}{ro}"
    for op in ("nonzero", "slice1")
    for t in ("float32", "int16", "float64", "uint8")
    for s in ("small", "small3d", "large")
    for ro in ("", ":ro")
]


def one(case, old=""):
    parts = case.split(":") + [""]
    op, dtype, size, ro = parts[:4]
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        out = subprocess.run(
            [sys.executable, "-c", CHILD, op, dtype, size, ro, old, SCRIPTS],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="*", default=CASES)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--detail", action="store_true", help="the kernels compiled per case")
    ap.add_argument("--old", default="", help="an older tree's first calls: a commit or a dir")
    args = ap.parse_args()
    for case in args.cases:
        runs = [one(case, args.old) for _ in range(args.repeat)]
        wall = harness.Stats([r["call"] for r in runs]).fmt("s")
        cpu = harness.Stats([r["cpu"] for r in runs]).fmt("s")
        k = sum(n for n, _ in runs[0]["compiled"].values())
        print(
            f"{case:26s} wall {wall}, cpu {cpu}, {len(runs)} runs, "
            f"{k} specialisations, {len(runs[0]['c'])} C functions",
            flush=True,
        )
        if args.detail:
            for name, (k, s) in sorted(runs[0]["compiled"].items(), key=lambda kv: -kv[1][1]):
                print(
                    f"    {name:24s} {k:3d} specialisations {s:6.2f} s CPU (nested ones excluded)"
                )


if __name__ == "__main__":
    main()
