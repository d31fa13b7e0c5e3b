"""``python -m dmlnumba [--device DEV]``: the worked examples of the contract (docs/SPEC.md),
then a short timing.
``python -m dmlnumba compile [--device DEV]``: compile every kernel ahead of time."""

import argparse
import os
import sys
import time

import numpy as np

import dmlnumba

from . import precompile


def _host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else a  # a numba device array


def _best(fn, repeat=20):
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def compile_all(device=None, stream=sys.stderr, workers=None):
    """Compile (or load from numba's cache) every kernel a call on ``device`` can use:
    each bit width of both operators, for small inputs (one thread) and large ones
    (all threads), and nonzero's coordinates of each dtype in rows of one column
    (CUDA: the width-1 kernel) and of two (CUDA: the unstaged kernel; 32-bit rows
    take the staged write pass, a kernel for each of 2 to 8 columns), and (CPU)
    argwhere's count and write passes.  On the CPU each group of :data:`dmlnumba.precompile.CASES`
    compiles in a process of its own, ``workers`` (default: every core) at a time;
    a line says how long that should take before it starts.  The groups share
    numba's cache files (one index a Python function, every specialisation in it):
    the processes add their entries under a lock (:mod:`dmlnumba.cpu.cachefile`).
    Returns the seconds taken."""
    import logging

    from . import config

    log = logging.getLogger("dmlnumba")
    level = log.level
    log.setLevel(logging.ERROR)  # the bar says what is compiling
    try:
        if device in (None, "cpu"):
            return precompile.compile_cpu(stream, workers or os.cpu_count() or 1)
        return _compile_steps(device, stream, config)
    finally:
        log.setLevel(level)


def _compile_steps(device, stream, config):
    """CUDA: every kernel, one after another, in this process."""
    big = max(config.CPU_PARALLEL_MIN, 2 * config.CPU_NONZERO_BLOCK, 2 * config.CPU_SLICE_CHUNK)
    steps = [(op, t, c, n) for op, t, c in precompile.CASES for n in (2, big)]
    t0 = time.perf_counter()
    for i, (op, t, c, n) in enumerate(steps):
        precompile.bar(i, len(steps), f"{op} {t}{' -> ' + c if c else ''}, {n} elements", stream)
        x = np.ones(n, t)
        if op == "slice1":
            # A reversal (the tiles, or 8-byte words where aligned; the gather for 4-
            # and 8-byte items) and a step (the gather).
            dmlnumba.slice1(x, (0,), (n,), (-1,), device=device)
            dmlnumba.slice1(x, (0,), (n,), (2,), device=device)
            continue
        dmlnumba.nonzero_coordinates(x, dtype=c, device=device)
        # Rows of several columns: a staged kernel a width (positions in 32 bits, either
        # coordinate width).
        for w in range(2, 9):
            y = x.reshape((1,) * (w - 2) + (-1, 2))
            dmlnumba.nonzero_coordinates(y, dtype=c, device=device)
    took = time.perf_counter() - t0
    precompile.bar(len(steps), len(steps), f"done in {took:.1f} s", stream)
    if stream.isatty():
        stream.write("\n")
    return took


def _check_device(device):
    """Raise before anything is printed where ``device`` cannot be used here (or a
    DMLNUMBA_* setting is bad)."""
    from . import config
    from .dispatch import _cuda_device, parse_device

    config.check_env("dmlnumba")
    dev = parse_device(device, "dmlnumba")
    if dev is None or dev[0] == "cpu":
        from .cpu import process

        process.check_env("dmlnumba")
    if dev is not None and dev[0] == "cuda":
        _cuda_device(dev, "dmlnumba")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["compile"]:
        p = argparse.ArgumentParser(
            prog="python -m dmlnumba compile",
            description="Compile every kernel for this machine ahead of time (into numba's "
            "cache), so that no later call waits for the compiler.",
        )
        p.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
        p.add_argument(
            "--workers",
            type=int,
            default=None,
            help="CPU: processes compiling at once (default: one a core, at most one a group)",
        )
        args = p.parse_args(argv[1:])
        if args.workers is not None and args.workers < 1:
            p.error(f"--workers = {args.workers}: it must be at least 1")
        _check_device(args.device)
        compile_all(args.device, workers=args.workers)
        return
    p = argparse.ArgumentParser(prog="python -m dmlnumba", description=__doc__)
    p.add_argument(
        "--device", default=None, help="cpu, cuda or cuda:N (default: where the input lives)"
    )
    p.add_argument("--no-timing", action="store_true")
    args = p.parse_args(argv)
    dev = args.device
    _check_device(dev)
    print(f"dmlnumba {dmlnumba.__version__}, device={dev or 'default (cpu for NumPy input)'}\n")

    x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    print("SLICE1 input, shape (1, 1, 4, 4), float32:")
    print(x[0, 0])
    for strides in [(1, 1, 2, 2), (1, 1, -2, 2)]:
        t0 = time.perf_counter()
        out = _host(dmlnumba.slice1(x, (0, 0, 0, 1), (1, 1, 4, 3), strides, device=dev))
        dt = time.perf_counter() - t0
        print(
            f"\nslice1(offsets=(0, 0, 0, 1), sizes=(1, 1, 4, 3), strides={strides})"
            f"  [first call {dt:.2f} s]"
        )
        print(out[0, 0])

    y = np.array([[1.0, 0.0, 0.0, 2.0], [-0.0, 3.5, 0.0, -5.2]], np.float32).reshape(1, 1, 2, 4)
    print("\nNONZERO_COORDINATES input, shape (1, 1, 2, 4), float32:")
    print(y[0, 0])
    t0 = time.perf_counter()
    count, coords = dmlnumba.nonzero_coordinates(y, 3, device=dev)
    dt = time.perf_counter() - t0
    count, coords = _host(count), _host(coords)
    n = int(count[0])
    print(f"\nnonzero_coordinates(width=3)  [first call {dt:.2f} s]")
    print(f"count = {n}; coordinates ({coords.shape[0]} rows, rows >= count undefined):")
    print(coords[:n])

    if args.no_timing:
        return
    print("\nTiming (median of 20, after a warm-up), against NumPy on the CPU:")
    rng = np.random.default_rng(0)
    big = rng.standard_normal((8, 64, 256, 256)).astype(np.float32)
    idx = np.s_[:, ::-1, 3:250:2, 1::3]
    w = dmlnumba.window(big.shape, idx)
    t_np = _best(lambda: np.ascontiguousarray(big[idx]))
    t_dm = _best(lambda: dmlnumba.slice1(big, *w, device="cpu"))
    print(
        f"  slice1 x[:, ::-1, 3:250:2, 1::3] of 8x64x256x256 float32: "
        f"dmlnumba {t_dm * 1e3:.2f} ms, numpy {t_np * 1e3:.2f} ms, {t_np / t_dm:.2f}x"
    )
    z = rng.standard_normal((16, 1024, 1024)).astype(np.float32)
    z[rng.random(z.shape) >= 0.5] = 0
    t_np = _best(lambda: np.argwhere(z), 5)
    t_dm = _best(lambda: dmlnumba.nonzero_coordinates(z, device="cpu"), 5)
    print(
        f"  nonzero 16x1024x1024 float32, 50% non-zero: "
        f"dmlnumba {t_dm * 1e3:.1f} ms, numpy.argwhere {t_np * 1e3:.1f} ms, {t_np / t_dm:.2f}x"
    )
    print("\nFull side-by-side tables: python -m dmlnumba.bench (see docs/PERFORMANCE.md)")


def cli(argv=None):
    """:func:`main` for the command line: an error (a device that cannot be used, a bad
    setting) is one line on stderr and exit status 1, not a traceback."""
    try:
        main(argv)
    except (ValueError, TypeError, OSError) as e:
        print(f"python -m dmlnumba: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("python -m dmlnumba: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(cli())
