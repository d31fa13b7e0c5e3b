"""The timing and A/B harness the scripts share (``import harness`` from ``scripts/``).

- :func:`compare` times several contenders interleaved: after a warm-up, each round
  times every contender once, in an order shuffled each round (a fixed order gave the
  first contender a 10-25% edge on a 2-core VM), as a loop of ``calls`` back-to-back
  calls (by default as many as last about ``loop_s``) between two clock readings;
  ``sync`` (e.g. ``torch.cuda.synchronize``) runs before each loop and after it, so
  that a GPU contender's time includes its work.  It returns a :class:`Stats` of
  seconds a call per contender: median, min/max, p10/p90.
- :func:`cuda_events` is a clock of CUDA events (the GPU's time between the loop's
  first launch and its last) for contenders the GPU bounds; the default clock is
  ``perf_counter_ns``.
- :func:`line` formats a case's contenders (median and spread) and their ratios.
- :func:`old_tree` imports an older source tree (a commit, by ``git archive``, or a
  directory) under another module name, ``dmlnumba_old``, beside this one: an A/B in
  one process.
- :func:`trees_cli` reads ``--old`` and ``--rounds``; :func:`small_inputs` gives the
  small calls' inputs.
- :func:`with_settings` makes a contender of ``config`` settings (a tuning A/B), applied
  before its loop.
"""

import importlib.util
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class Stats:
    """Seconds a call, one sample a round."""

    def __init__(self, samples):
        self.samples = sorted(samples)
        self.median = statistics.median(self.samples)
        self.min, self.max = self.samples[0], self.samples[-1]
        if len(self.samples) > 1:
            q = statistics.quantiles(self.samples, n=10, method="inclusive")
            self.p10, self.p90 = q[0], q[-1]
        else:
            self.p10, self.p90 = self.min, self.max

    def fmt(self, unit=None, spread="minmax"):
        """``median (low-high) unit``; ``unit`` s, ms or us (None: by the median's size);
        ``spread`` "minmax" or "p10p90"."""
        if unit is None:
            unit = "s" if self.median >= 1 else "ms" if self.median >= 1e-3 else "us"
        k = {"s": 1, "ms": 1e3, "us": 1e6}[unit]
        lo, hi = (self.min, self.max) if spread == "minmax" else (self.p10, self.p90)
        digits = 3 if self.median * k < 10 else 1
        return f"{self.median * k:.{digits}f} ({lo * k:.{digits}f}-{hi * k:.{digits}f}) {unit}"


def _wall(sync):
    def start():
        if sync:
            sync()
        t0 = time.perf_counter_ns()

        def stop():
            if sync:
                sync()
            return (time.perf_counter_ns() - t0) * 1e-9

        return stop

    return start


def cuda_events(lib="torch"):
    """A clock for :func:`compare`: CUDA events of PyTorch or CuPy around the loop."""
    if lib == "torch":
        import torch

        def event():
            return torch.cuda.Event(enable_timing=True)

        def elapsed(a, b):
            return a.elapsed_time(b)
    else:
        import cupy

        event, elapsed = cupy.cuda.Event, cupy.cuda.get_elapsed_time

    def start():
        a, b = event(), event()
        a.record()

        def stop():
            b.record()
            b.synchronize()
            return elapsed(a, b) * 1e-3

        return stop

    return start


def compare(fns, rounds=9, *, sync=None, clock=None, calls=None, loop_s=0.004, warmup=2, seed=0):
    """``{name: Stats}`` of the contenders ``fns`` (name -> function of no arguments),
    interleaved in a shuffled order each round (see the module's docstring)."""
    clock = clock or _wall(sync)
    for _ in range(warmup):
        for f in fns.values():
            f()
    if sync:
        sync()
    n = {}
    for k, f in fns.items():  # calls a loop: fixed, or as many as last about loop_s
        if calls:
            n[k] = calls
        else:
            stop = clock()
            f()
            n[k] = max(1, min(10000, int(loop_s / max(stop(), 1e-7))))
    times = {k: [] for k in fns}
    order = list(fns)
    rnd = random.Random(seed)
    for _ in range(rounds):
        rnd.shuffle(order)
        for k in order:
            f, m = fns[k], n[k]
            if hasattr(f, "setup"):  # settings applied, plans rebuilt, before the clock
                f.setup()
                f = f.call
                f()
                if sync:
                    sync()
            stop = clock()
            for _ in range(m):
                f()
            times[k].append(stop() / m)
    return {k: Stats(v) for k, v in times.items()}


def line(stats, base=None, unit=None, spread="minmax"):
    """Every contender's ``name median (spread)``, then each one's time over ``base``'s
    (below 1: faster than ``base``)."""
    text = "  ".join(f"{k} {s.fmt(unit, spread)}" for k, s in stats.items())
    if base is not None:
        b = stats[base].median
        text += "  " + " ".join(
            f"{k}/{base} {s.median / b:.3f}" for k, s in stats.items() if k != base
        )
    return text


def old_tree(ref, name="dmlnumba_old"):
    """The package of an older source tree, imported as ``name``.  ``ref``: a commit
    (anything ``git rev-parse`` knows; its ``src/dmlnumba`` is archived once into
    ``$TMPDIR/dmlnumba-trees/<sha>``, kept so that numba's disk cache there is reused)
    or a directory holding the package (as ``name``, ``dmlnumba``, ``src/dmlnumba``, or
    itself).  The package imports its own modules relatively, so it loads beside this
    tree's ``dmlnumba``; its kernels' names start with ``name``."""
    if name in sys.modules:
        return sys.modules[name]
    path = Path(ref)
    if path.is_dir():
        places = (path / name, path / "dmlnumba", path / "src" / "dmlnumba", path)
        pkg = next((p for p in places if (p / "__init__.py").is_file()), None)
        if pkg is None:
            raise ValueError(f"old_tree(): no dmlnumba package in the directory {ref}")
    else:
        git = ["git", "-C", str(REPO)]
        sha = subprocess.run(
            [*git, "rev-parse", "--verify", f"{ref}^{{commit}}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        root = Path(tempfile.gettempdir()) / "dmlnumba-trees" / sha
        pkg = root / "src" / "dmlnumba"
        if not (pkg / "__init__.py").is_file():
            root.parent.mkdir(parents=True, exist_ok=True)
            tmp = tempfile.mkdtemp(dir=root.parent)
            tar = subprocess.run(
                [*git, "archive", sha, "src/dmlnumba"], capture_output=True, check=True
            )
            subprocess.run(["tar", "-x", "-C", tmp], input=tar.stdout, check=True)
            try:
                os.replace(tmp, root)  # whole or not at all
            except OSError:  # another process put it there first
                shutil.rmtree(tmp)
    spec = importlib.util.spec_from_file_location(
        name, pkg / "__init__.py", submodule_search_locations=[str(pkg)]
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def trees_cli(rounds=15):
    """``(args, trees)`` of a script that times this tree beside an older one:
    ``args.old`` (``--old REF``, see :func:`old_tree`) and ``args.rounds``
    (``--rounds``); ``trees`` maps a contender's prefix to its package (``""``: this
    tree's ``dmlnumba``, ``"old "``: the older one, where given)."""
    import argparse

    import dmlnumba

    ap = argparse.ArgumentParser()
    ap.add_argument("--old")
    ap.add_argument("--rounds", type=int, default=rounds)
    args = ap.parse_args()
    trees = {"": dmlnumba}
    if args.old:
        trees["old "] = old_tree(args.old)
    return args, trees


def small_inputs():
    """The small calls' inputs (NumPy float32): 1000 elements, half of them zero (a
    nonzero's), and a (20, 20, 20) cube (a slice1 window's source), the same each run."""
    import numpy as np

    rng = np.random.default_rng(0)
    h = rng.random(1000).astype(np.float32)
    h[h < 0.5] = 0
    return h, rng.random((20, 20, 20)).astype(np.float32)


def settings(spec):
    """``{NAME: value}`` of a ``--set`` argument ``NAME=V[,NAME=V]`` (int, or float
    where V has a point)."""
    out = {}
    for kv in filter(None, spec.split(",")):
        k, v = kv.split("=")
        out[k.strip()] = float(v) if "." in v else int(v)
    return out


def with_settings(config, settings, f):
    """``f`` with ``config``'s attributes set to ``settings`` first (the contenders
    interleave, so each sets its own: give the baseline the defaults).  A changed setting
    invalidates dmlnumba's plans, so :func:`compare` applies them (``setup``) and makes
    one untimed call before the contender's loop, whose calls are ``f``'s alone."""

    def setup():
        for k, v in settings.items():
            if getattr(config, k) != v:
                setattr(config, k, v)

    def run():
        setup()
        return f()

    run.setup, run.call = setup, f
    return run
