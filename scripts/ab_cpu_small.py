"""The bench's timing loop on the small nonzero inputs: an old source tree, this one and
numpy.argwhere, interleaved one call at a time (``dmlnumba.bench._interleaved``, 2000 calls,
medians), three rounds per input.

    git archive <commit> src/dmlnumba | tar -x -C /tmp/ab
    mv /tmp/ab/src/dmlnumba /tmp/ab/dmlnumba_old
    taskset -c 1 python scripts/ab_cpu_small.py /tmp/ab
"""

import importlib
import os
import sys

import numpy as np

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
new = importlib.import_module("dmlnumba")
old = importlib.import_module("dmlnumba_old")
from dmlnumba.bench import _interleaved  # noqa: E402

rng = np.random.default_rng(0)
for shape in [(1000,), (10, 10, 10)]:
    for d in [0.01, 0.5]:
        x = rng.standard_normal(shape).astype(np.float32)
        x[rng.random(shape) >= d] = 0
        for _ in range(3):
            med = _interleaved(
                {
                    "new": lambda: new.nonzero_coordinates(x),
                    "old": lambda: old.nonzero_coordinates(x),
                    "argwhere": lambda: np.argwhere(x),
                },
                2000,
            )
            print(
                shape,
                d,
                " ".join(f"{k} {v * 1e6:.2f}" for k, v in med.items()),
                f"argwhere/new {med['argwhere'] / med['new']:.2f}",
                f"argwhere/old {med['argwhere'] / med['old']:.2f}",
                flush=True,
            )
