"""The runner of :mod:`dmlnumba.bench`: contenders timed interleaved, and each case
recorded as a row of the results and printed as a line of the table."""

import statistics
import time


class Timings(dict):
    """Median seconds per contender (the dict), with ``spread``: each one's
    ``(min, max)`` over the repetitions."""

    spread: dict[str, tuple[float, float]]


def interleaved(fns, reps, sync=None, warmup=2, clock=None):
    """Time ``fns`` alternately, ``reps`` rounds after ``warmup``: a :class:`Timings`.
    ``clock``: a function giving the seconds of one call of the function it is given
    (CUDA events); by default the wall clock, with ``sync`` before and after."""
    for _ in range(warmup):
        for f in fns.values():
            f()
        if sync:
            sync()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for k, f in fns.items():
            if clock is not None:
                times[k].append(clock(f))
                continue
            if sync:
                sync()
            t = time.perf_counter()
            f()
            if sync:
                sync()
            times[k].append(time.perf_counter() - t)
    med = Timings({k: statistics.median(v) for k, v in times.items()})
    med.spread = {k: (min(v), max(v)) for k, v in times.items()}
    return med


def record(rows, case, med, roof_bytes=None, bw=None):
    """Record and print a case: every contender's median time (in us or ms) with its
    spread (min-max over the repetitions) and its ratio to ``dmlnumba`` (the default
    call, outputs allocated by the call); and where ``roof_bytes`` (the bytes the
    operation must move) and ``bw`` (the copy bandwidth) are given, the share of the
    copy bandwidth the default call reaches."""
    base = med["dmlnumba"]
    spread = getattr(med, "spread", {})
    r = {
        "case": case,
        "times_s": dict(med),
        "spread_s": spread,
        "ratios": {k: med[k] / base for k in med if k != "dmlnumba"},
    }
    if roof_bytes and bw:
        r["roofline_pct"] = 100.0 * roof_bytes / bw / base
    rows.append(r)

    unit, scale = ("us", 1e6) if base < 1e-3 else ("ms", 1e3)

    def cell(k):
        lo, hi = spread.get(k, (med[k], med[k]))
        return f"{med[k] * scale:.3f} ({lo * scale:.3f}-{hi * scale:.3f}) {unit}"

    others = "  ".join(f"{k} {cell(k)} ({med[k] / base:5.2f}x)" for k in med if k != "dmlnumba")
    roof = f"  {r['roofline_pct']:5.1f}% of copy bw" if "roofline_pct" in r else ""
    print(f"{case:58s} dmlnumba (default) {cell('dmlnumba')}  {others}{roof}", flush=True)
