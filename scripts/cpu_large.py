"""Large CPU calls beside their peers, idle or with busy processes: slice1 of a 16M
float32 ``[::-1]`` against NumPy's slice and copy, and nonzero_coordinates of a
64x1024x1024 float32 input at each density against ``torch.nonzero`` (PyTorch on as
many threads as numba), ``numpy.argwhere`` and ONNX Runtime's NonZero (where
installed).  ``--busy N`` starts N processes that spin (``while True: pass``) for
the timed rounds.  Contenders of an operator run interleaved (:func:`harness.compare`);
each line prints median (min-max) and each peer's time over dmlnumba's, and how many
calls the load check sent to numba's threads (``threads_free`` answers).
``--back-to-back``: nonzero at 1% of 2**22, 2**24 and 2**26 elements, 30 calls back to
back a round, with the load check on against off (its cost on an idle machine);
``--old REF`` adds an older tree's calls with its check on (:func:`harness.old_tree`).

    python3 scripts/cpu_large.py [--busy N] [--only slice|nonzero] [--density 0.01 ...]
    python3 scripts/cpu_large.py --back-to-back [--busy N] [--old REF]
"""

import argparse
import collections
import subprocess
import sys
import time

import harness
import numpy as np

import dmlnumba
from dmlnumba.cpu import threads

ap = argparse.ArgumentParser()
ap.add_argument("--busy", type=int, default=0)
ap.add_argument("--only", choices=["slice", "nonzero"])
ap.add_argument("--density", type=float, nargs="*", default=[0.01, 0.5, 0.99])
ap.add_argument("--rounds", type=int, default=15)
ap.add_argument("--back-to-back", action="store_true")
ap.add_argument("--old")
a = ap.parse_args()

answers: collections.Counter = collections.Counter()
_free = threads.threads_free


def counted(n):
    r = _free(n)
    answers[r] += 1
    return r


threads.threads_free = counted


def peers_of_nonzero(x):
    import numba
    import torch

    torch.set_num_threads(numba.get_num_threads())
    t = torch.from_numpy(x)
    peers = {"torch.nonzero": lambda: torch.nonzero(t), "numpy.argwhere": lambda: np.argwhere(x)}
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper

        node = helper.make_node("NonZero", ["x"], ["y"])
        g = helper.make_graph(
            [node],
            "nz",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
            [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
        )
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
        s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        peers["onnxruntime"] = lambda: s.run(None, {"x": x})
    except ImportError:
        pass
    return peers


def slice_case():
    v = np.random.default_rng(0).random(1 << 24).astype(np.float32)
    w = dmlnumba.window(v.shape, np.s_[::-1])
    return {"dmlnumba": lambda: dmlnumba.slice1(v, *w), "numpy": lambda: v[::-1].copy()}


def nonzero_case(d):
    x = np.zeros((64, 1024, 1024), np.float32)
    x[np.random.default_rng(0).random(x.shape, dtype=np.float32) < d] = 1.0
    return {"dmlnumba": lambda: dmlnumba.nonzero_coordinates(x), **peers_of_nonzero(x)}


def back_to_back_case(n):
    """nonzero of ``n`` float32 at 1%, 30 calls back to back a round, with the load
    check on and off (set before each loop: the harness's ``setup``)."""
    from dmlnumba import config

    x = (np.random.default_rng(0).random(n, dtype=np.float32) < 0.01).astype(np.float32)
    trees = [("", dmlnumba, config)]
    if a.old:
        old = harness.old_tree(a.old)
        trees.append(("old ", old, old.config))
    fns = {}
    for tag, m, cfg in trees:
        for name, on in (("check on", 1), ("check off", 0)) if not tag else (("check on", 1),):

            def call(x=x, m=m):
                m.nonzero_coordinates(x)

            call.setup = lambda on=on, cfg=cfg: setattr(cfg, "CPU_LOAD_CHECK", on)
            call.call = call
            fns[tag + name] = call
    return fns


# Each case made just before it runs: another case's peers (ONNX Runtime's and
# PyTorch's thread pools) start no threads before it.
cases = []
if a.back_to_back:
    for k in (22, 24, 26):
        cases.append(
            (f"nonzero 2**{k} float32 at 0.01, back to back", lambda k=k: back_to_back_case(1 << k))
        )
else:
    if a.only != "nonzero":
        cases.append(("slice1 16M float32 [::-1]", slice_case))
    if a.only != "slice":
        for d in a.density:
            cases.append((f"nonzero 64x1024x1024 float32 at {d:g}", lambda d=d: nonzero_case(d)))
base = "check on" if a.back_to_back else "dmlnumba"  # (the contender the others are over)

procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.busy)]
try:
    time.sleep(1 if a.busy else 0)
    print(f"{a.busy} busy processes, {a.rounds} interleaved rounds")
    for name, make in cases:
        fns = make()
        answers.clear()
        st = harness.compare(fns, a.rounds, calls=30 if a.back_to_back else None)
        ours = st[base].median
        print(name)
        for k, s in st.items():
            ratio = "" if k == base else f"  {s.median / ours:.2f}x {base}'s time"
            print(f"  {k:16s} {s.fmt()}{ratio}")
        print(f"  threads_free answers: {dict(answers)}")
finally:
    for p in procs:
        p.kill()
