"""Per-call time of small calls on JAX CPU arrays and bfloat16 NumPy arrays, beside
JAX's own: nonzero_coordinates of 1000 float32 elements (50% non-zero) against
``jnp.nonzero(x, size=1000)`` (JAX's static-size form; without ``size`` it waits for
the count) and ``jnp.argwhere``, slice1 of a (10, 10, 10) window with a reversed
dimension of a (20, 20, 20) input against JAX's slicing (``x[11:1:-1, 3:13, 4:14]``),
each on float32 and bfloat16; and the same calls on bfloat16 NumPy arrays (ml_dtypes')
beside float16 ones.  Every contender of an operator runs interleaved
(:func:`harness.compare`), each call's results waited for (``jax.block_until_ready``);
``--old REF`` adds this tree's calls from an older tree (:func:`harness.old_tree`).
Median (min-max).

    python3 scripts/jax_small_calls.py [--old REF] [--rounds 15]
"""

import harness
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

args, trees = harness.trees_cli()
h, cube = harness.small_inputs()
cpu = jax.devices("cpu")[0]
bf = ml_dtypes.bfloat16
inputs = {
    "jax": (jax.device_put(h, cpu), jax.device_put(cube, cpu)),
    "jax bfloat16": (jax.device_put(h.astype(bf), cpu), jax.device_put(cube.astype(bf), cpu)),
    "numpy float16": (h.astype(np.float16), cube.astype(np.float16)),
    "numpy bfloat16": (h.astype(bf), cube.astype(bf)),
}
W = ((2, 3, 4), (10, 10, 10), (-1, 1, 1))
done = jax.block_until_ready  # (each call's results, JAX's or dmlnumba's, waited for)
nz, sl = {}, {}
for tag, m in trees.items():
    for lib, (x, c) in inputs.items():
        nz[f"{tag}{lib}"] = lambda m=m, x=x: done(m.nonzero_coordinates(x))
        sl[f"{tag}{lib}"] = lambda m=m, c=c: done(m.slice1(c, *W))
for lib in ("jax", "jax bfloat16"):
    x, c = inputs[lib]
    nz[f"jnp.nonzero size, {lib}"] = lambda x=x: done(jnp.nonzero(x, size=1000))
    nz[f"jnp.argwhere, {lib}"] = lambda x=x: done(jnp.argwhere(x))
    sl[f"JAX slicing, {lib}"] = lambda c=c: done(c[11:1:-1, 3:13, 4:14])

ratios = [
    ("jnp.nonzero size, jax", "jax"),
    ("jnp.nonzero size, jax bfloat16", "jax bfloat16"),
    ("JAX slicing, jax", "jax"),
    ("JAX slicing, jax bfloat16", "jax bfloat16"),
    ("numpy bfloat16", "numpy float16"),
]
ratios += [(f"old {b}", b) for b in dict.fromkeys(b for _, b in ratios)] if args.old else []
print(f"{args.rounds} interleaved rounds; us a call: median (min-max)")
for op, cases in (("nonzero_coordinates", nz), ("slice1", sl)):
    st = harness.compare(cases, args.rounds)
    print(f"{op}:")
    for k, s in st.items():
        print(f"  {k:32s} {s.fmt('us')}")
    shown = [f"{a} / {b} {st[a].median / st[b].median:.2f}" for a, b in ratios if a in st]
    print("  " + "; ".join(shown))
