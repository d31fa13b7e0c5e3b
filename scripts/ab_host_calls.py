"""Host time of small default CUDA calls, an old source tree against this one, in one
process: 1000 back-to-back calls on a 1000-element tensor, then one sync, the packages
alternating for 20 rounds; medians and the per-round new / old::

    git archive <commit> src/dmlnumba | tar -x -C /tmp/ab
    mv /tmp/ab/src/dmlnumba /tmp/ab/dmlnumba_old
    python3 scripts/ab_host_calls.py /tmp/ab

The H100 hosts' speed moves by up to 2x between processes, so only this in-process
comparison says whether a host-side change pays."""

import statistics
import sys
import time

sys.path.insert(0, sys.argv[1])
import cupy as cp  # noqa: E402
import dmlnumba_old  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import dmlnumba  # noqa: E402

xt = torch.randn(10, 10, 10, device="cuda")
xt[xt < 0] = 0
xc = cp.asarray(xt)
w = dmlnumba.window(xt.shape, np.s_[:, ::-1, 1::2])


def cases(m):
    return {
        "nonzero torch": lambda: m.nonzero_coordinates(xt),
        "nonzero cupy": lambda: m.nonzero_coordinates(xc),
        "slice1 torch": lambda: m.slice1(xt, *w),
    }


for m in (dmlnumba, dmlnumba_old):
    c, x = m.nonzero_coordinates(xt)
    assert int(c[0]) == int((xt != 0).sum())
    assert torch.equal(x[: int(c[0])].long(), torch.nonzero(xt))
new, old = cases(dmlnumba), cases(dmlnumba_old)
for name in new:
    t_new, t_old, ratio = [], [], []
    for f in (new[name], old[name]):
        f()
        torch.cuda.synchronize()
    for r in range(20):
        order = (old[name], new[name]) if r % 2 else (new[name], old[name])
        pair = []
        for f in order:
            t = time.perf_counter()
            for _ in range(1000):
                f()
            torch.cuda.synchronize()
            pair.append((time.perf_counter() - t) / 1000 * 1e6)
        tn, to = (pair[1], pair[0]) if r % 2 else (pair[0], pair[1])
        t_new.append(tn)
        t_old.append(to)
        ratio.append(tn / to)
    print(
        f"{name:14s} new {statistics.median(t_new):6.2f} us  old {statistics.median(t_old):6.2f} us"
        f"  new/old {statistics.median(ratio):.3f} ({min(ratio):.2f}-{max(ratio):.2f})",
        flush=True,
    )
