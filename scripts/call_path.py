"""The path of a caller's array through dmlnumba's modules: every call into a dmlnumba
function whose arguments hold the input (or a view of it that dmlnumba made), in
order, from ``nonzero_coordinates`` to the kernel; then the number of stops, of moves
between modules (consecutive stops in different modules) and of calls up the
layering (a module calling one of a higher layer: a lower layer asking again what
the door already worked out).  The measurement behind docs/DESIGN.md's "The path of
a call"::

    python scripts/call_path.py numpy           # a NumPy array, first call
    python scripts/call_path.py numba           # a numba device array (GPU, or
                                                # NUMBA_ENABLE_CUDASIM=1)
    python scripts/call_path.py torch|cupy      # on a GPU machine
    python scripts/call_path.py torch-cpu|jax|dask   # (dask: the graph's building)

Layers (docs/DESIGN.md's module map): 0 ``api``; 1 the prepare step's front
(``keys``, ``prepare``, and the keys' ``layouts``, ``traced``, ``caches``); 2 the
adapters (``torch_ops``, ``chunked``, ``onnx``); 3 the in-memory prepare step and what
it asks (``dispatch``, ``interop``, ``validation``, ``arrays``, ``array_checks``,
``dtypes``); 4 the targets (``target``, ``cpu.target``, ``gpu.target``); 5 what a
target uses (``gpu.plans``, ``gpu.views``, ``gpu.streams``, ``gpu.memory``,
``gpu.runners``, ``gpu.devices``, ``gpu.launch``, ``cpu.views``, ``cpu.slice``,
``cpu.nonzero``, ``cpu.nonzero_launch``, ``cpu.threads``, ``cpu.compiling``,
``cpu.process``, ``layout``, ``params``); 6 kernels (any other module).
"""

import sys

import numpy as np

import dmlnumba

LAYERS = {"api": 0, "torch_ops": 2, "chunked": 2, "onnx": 2}
LAYERS.update(dict.fromkeys(["keys", "prepare", "layouts", "traced", "caches"], 1))
LAYERS.update(dict.fromkeys(["dispatch", "interop", "validation", "arrays"], 3))
LAYERS.update(dict.fromkeys(["array_checks", "dtypes"], 3))
LAYERS.update({"target": 4, "cpu.target": 4, "gpu.target": 4, "layout": 5, "params": 5})
LAYERS.update(dict.fromkeys(["gpu.plans", "gpu.views", "gpu.streams", "gpu.memory"], 5))
LAYERS.update(dict.fromkeys(["gpu.runners", "cpu.views", "cpu.slice", "cpu.nonzero"], 5))
LAYERS.update(dict.fromkeys(["cpu.threads", "cpu.compiling", "cpu.nonzero_launch"], 5))
LAYERS.update(dict.fromkeys(["cpu.process", "gpu.devices", "gpu.launch"], 5))


#: The prepare step's modules, whose functions return the input as a target reads it.
CONVERTERS = ("dmlnumba.prepare", "dmlnumba.dispatch")


def layer(module):
    name = module.removeprefix("dmlnumba.")
    if name.startswith("chunked."):
        name = "chunked"
    return LAYERS.get(name, 6)


def the_input(kind):
    h = np.zeros((30, 40), np.float32)
    h[::3, ::7] = 1
    if kind == "numpy":
        return h
    if kind == "numba":
        from numba import cuda

        return cuda.to_device(h)
    if kind == "torch":
        import torch

        return torch.from_numpy(h).cuda()
    if kind == "torch-cpu":
        import torch

        return torch.from_numpy(h)
    if kind == "jax":
        import jax.numpy as jnp

        return jnp.asarray(h)
    if kind == "dask":  # the graph's building (the chunks' calls run at compute)
        import dask.array as da

        return da.from_array(h, chunks=(10, 40))
    import cupy

    return cupy.asarray(h)


def trace(x, kind):
    tracked = {id(x)}
    keep = [x]
    host = np.asarray(x) if kind in ("numpy", "torch-cpu", "jax") else None
    lo = host.__array_interface__["data"][0] if host is not None else -1
    hi = lo + (host.nbytes if host is not None else 0)

    def inside(v):  # (PyTorch's Tensor.numpy and DLPack's arrays have no base to follow)
        return v.size > 0 and lo <= v.__array_interface__["data"][0] < hi

    def holds(v, depth=0):
        if id(v) in tracked:
            return True
        if depth < 2 and isinstance(v, (tuple, list)):
            return any(holds(e, depth + 1) for e in v)
        if isinstance(v, np.ndarray):  # a view, or a host array over the input's memory
            return (v.base is not None and holds(v.base, depth + 1)) or inside(v)
        if type(v).__name__ == "DeviceView":
            return holds(getattr(v, "obj", None), depth + 1)  # (None in its __init__)
        if type(v).__name__ == "Call":  # a prepared call: its input and its view
            return holds(getattr(v, "input", None), depth + 1) or holds(
                getattr(v, "x", None), depth + 1
            )
        return False

    stops = []

    def profile(frame, event, arg):
        mod = frame.f_globals.get("__name__", "")
        if not mod.startswith("dmlnumba"):
            return
        if event == "call" and any(holds(v) for v in list(frame.f_locals.values())):
            caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
            stops.append((mod, frame.f_code.co_name, caller))
        elif event == "return":  # views of the input that dmlnumba made go on being followed
            # (and the input as the prepare step converts it: a NumPy array from DLPack)
            converts = mod in CONVERTERS and any(holds(v) for v in list(frame.f_locals.values()))
            for a in arg if isinstance(arg, tuple) else (arg,):
                if type(a).__name__ == "DeviceView" or isinstance(a, np.ndarray):
                    if (
                        converts
                        or holds(getattr(a, "obj", None))
                        or holds(getattr(a, "base", None))
                    ):
                        tracked.add(id(a))
                        keep.append(a)

    sys.setprofile(profile)
    try:
        dmlnumba.nonzero_coordinates(x)
    finally:
        sys.setprofile(None)
    return stops


def main():
    kind = sys.argv[1] if len(sys.argv) > 1 else "numpy"
    stops = trace(the_input(kind), kind)
    moves = ups = 0
    prev = None
    for mod, fn, caller in stops:
        up = caller.startswith("dmlnumba") and layer(mod) < layer(caller)
        moves += prev is not None and mod != prev
        ups += up
        print(f"  {mod}.{fn}" + (f"   <- called up from {caller}" if up else ""))
        prev = mod
    print(f"{kind}: {len(stops)} stops, {moves} moves between modules, {ups} calls up")


if __name__ == "__main__":
    main()
