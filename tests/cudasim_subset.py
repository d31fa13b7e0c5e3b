"""The CUDA simulator's test subset: the ``-k cuda`` cases that launch every kernel
variant the whole set launches, so that CI's simulator step stays short.

A kernel variant is a key of ``dmlnumba.gpu.launch._kernels``: ``(name, src_bits,
out_bits, regs, variant)``.  tests/kernel_variants.py logs the keys each test asks for
(``DMLNUMBA_KERNEL_LOG``).  The files beside this one:

- ``cudasim_subset.txt``: the node ids the simulator runs by default (conftest.py
  deselects the other ``cuda`` tests unless ``DMLNUMBA_CUDASIM_FULL=1``);
- ``cudasim_kernels.txt``: the keys the whole set's fixed tests launch: a Hypothesis
  test's examples (and a ``varying_cases`` test's), and so its variants, vary from run
  to run; the subset keeps the tests that reached those in the whole set's run,
  unchecked.

Commands (run from the checkout; the logs from a simulator run with the log on)::

    python tests/cudasim_subset.py choose FULL_LOG  # rewrite both files
    python tests/cudasim_subset.py compare FULL_LOG SUBSET_LOG
    python tests/cudasim_subset.py check LOG   # CI: every key of cudasim_kernels.txt

After a change to the kernels' keys (``check`` says so), regenerate both files:
``NUMBA_ENABLE_CUDASIM=1 DMLNUMBA_CUDASIM_FULL=1 HYPOTHESIS_PROFILE=cudasim
DMLNUMBA_KERNEL_LOG=full.jsonl pytest -n auto -k cuda``, then ``choose full.jsonl``."""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUBSET = HERE / "cudasim_subset.txt"
KERNELS = HERE / "cudasim_kernels.txt"


def read_log(path):
    """``{node id: set of keys}`` of a kernel log (a test logged twice: the union)."""
    out = {}
    for line in Path(path).read_text().splitlines():
        rec = json.loads(line)
        out.setdefault(rec["test"], set()).update(rec["used"], rec["compiled"])
    return out


def random_tests(path):
    """The node ids of a kernel log's tests whose cases, and so variants, vary by run."""
    out = set()
    for line in Path(path).read_text().splitlines():
        rec = json.loads(line)
        if rec.get("random"):
            out.add(rec["test"])
    return out


def read_seconds(path):
    """``{node id: seconds}`` of a kernel log."""
    out = {}
    for line in Path(path).read_text().splitlines():
        rec = json.loads(line)
        out[rec["test"]] = max(out.get(rec["test"], 0.0), rec.get("seconds", 60.0))
    return out


def choose(log, seconds):
    """A small, quick set of tests whose keys cover every key of ``log`` (greedily the
    test with the most new keys per second), and every test that launches no kernel:
    those check the CUDA target's own logic (arguments, plans, errors), which kernel
    variants cannot see, and cost little."""
    need = set().union(*log.values())
    chosen = [t for t in log if not log[t]]
    while need:
        best = max(log, key=lambda t: (len(log[t] & need) / (seconds.get(t, 60.0) + 0.05), t))
        chosen.append(best)
        need -= log[best]
    return sorted(chosen)


def main(argv):
    cmd = argv[0]
    if cmd == "choose":
        log, seconds = read_log(argv[1]), read_seconds(argv[1])
        chosen = choose(log, seconds)
        fixed = [v for t, v in log.items() if t not in random_tests(argv[1])]
        keys = sorted(set().union(*fixed))
        SUBSET.write_text("".join(t + "\n" for t in chosen))
        KERNELS.write_text("".join(k + "\n" for k in keys))
        total = sum(seconds.get(t, 0.0) for t in chosen)
        print(f"{len(chosen)} of {len(log)} tests, {total:.0f} s of {sum(seconds.values()):.0f} s")
        print(f"{len(keys)} kernel variants")
        return 0
    if cmd == "compare":
        full = set().union(*read_log(argv[1]).values())
        sub = set().union(*read_log(argv[2]).values())
        print(f"whole set: {len(full)} kernel variants; subset: {len(sub)}")
        for k in sorted(full - sub):
            print("  only in the whole set:", k)
        for k in sorted(sub - full):
            print("  only in the subset:", k)
        return 0 if full <= sub else 1
    if cmd == "check":
        want = set(KERNELS.read_text().split("\n")) - {""}
        log = read_log(argv[1])
        got = set().union(*log.values())
        fixed = set().union(*[v for t, v in log.items() if t not in random_tests(argv[1])])
        missing = sorted(want - got)
        print(f"{len(got & want)} of {len(want)} kernel variants launched")
        for k in missing:
            print("  not launched:", k)
        for k in sorted(fixed - want):
            print("  launched, not in cudasim_kernels.txt (regenerate it):", k)
        for k in sorted(got - fixed - want):
            print("  launched by a Hypothesis example only (not checked):", k)
        return 1 if missing or fixed - want else 0
    raise SystemExit(f"unknown command {cmd!r}: choose, compare or check")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
