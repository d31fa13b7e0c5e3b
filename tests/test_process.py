"""The process around the CPU kernels: numba's disk cache written by several processes
at once (``python -m dmlnumba compile``'s workers), a first call interrupted by Ctrl-C,
``fork()`` while another thread compiles, and numba's thread settings.  Most tests run
a fresh interpreter on a cache of their own (``NUMBA_CACHE_DIR``)."""

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from interpreter import run_python

pytestmark = pytest.mark.skipif(
    os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"), reason="numba compiles nothing"
)


def _scan(cache):
    """``(entries, wrong)``: how many entries numba's indexes under ``cache`` hold, and
    those whose data file holds the code of another signature (read from the compiled
    result numba pickled, whoever wrote it) or names another key."""
    from dmlnumba.cpu.cachefile import TAG

    entries, wrong = 0, []
    for index in sorted(Path(cache).rglob("*.nbi")):
        with open(index, "rb") as f:
            pickle.load(f)  # numba's version
            overloads = pickle.loads(f.read())[1]
        for key, name in overloads.items():
            entries += 1
            data = pickle.loads((index.parent / name).read_bytes())
            tagged = data[0] == TAG
            # numba's CompileResult._reduce: (library, fndesc, environment, signature, ...)
            sig = (data[2] if tagged else data)[3]
            want = key[0].args if hasattr(key[0], "args") else tuple(key[0])
            if tuple(sig.args) != tuple(want) or (tagged and data[1] != key):
                wrong.append(f"{index.name}: {want} -> {name} holds {sig}")
    return entries, wrong


# What every input dtype and coordinate type gives, against NumPy: small inputs (the
# serial drivers) and large ones (the parallel kernels), one column and rows of two,
# rows cut short, argwhere, and slice1 into out= (the kernel).  argv[1]: the coordinate
# types; argv[2]: the input dtypes' sizes in bytes.  Prints the number of wrong answers,
# the number of checks and the first few wrong.
_CHECK = """
    import sys
    import numpy as np, dmlnumba
    from dmlnumba import config
    from dmlnumba.validation import NONZERO_DTYPES, SLICE_DTYPES

    big = max(config.CPU_PARALLEL_MIN, 2 * config.CPU_NONZERO_BLOCK, 2 * config.CPU_SLICE_CHUNK)
    rng = np.random.default_rng(0)
    bad, checked = [], 0

    def same(what, got, want):
        global checked
        checked += 1
        if got.shape != want.shape or not np.array_equal(got, want):
            bad.append(f"{what}: {got[:3].tolist()} != {want[:3].tolist()}")

    if dmlnumba.argwhere(np.array([[1, 0], [0, 2]])).tolist() != [[0, 0], [1, 1]]:
        bad.append("argwhere of [[1, 0], [0, 2]]")
    sizes = [int(b) for b in sys.argv[2].split(",")]
    for dt in sorted((t for t in NONZERO_DTYPES if t.itemsize in sizes), key=str):
        for n in (12, big):
            x = (rng.random(n) < 0.5).astype(dt)
            for y in (x, x.reshape(-1, 2)):
                want = np.argwhere(y)
                same(f"argwhere {dt} {y.shape}", dmlnumba.argwhere(y), want)
                for c in sys.argv[1].split(","):
                    count, coords = dmlnumba.nonzero_coordinates(y, dtype=c)
                    k = int(count[0])
                    same(f"nonzero {dt} {y.shape} -> {c}", coords[:k].astype(np.int64), want)
                    count, coords = dmlnumba.nonzero_coordinates(y, dtype=c, max_count=1)
                    same(f"nonzero {dt} {y.shape} -> {c}, max_count=1", coords.astype(np.int64),
                         want[:1])
                    if coords.dtype != c or int(count[0]) != len(want):
                        bad.append(f"nonzero {dt} {y.shape} -> {c}: {coords.dtype} {count}")
            if np.dtype(dt) in SLICE_DTYPES:
                out = np.empty(n, dt)
                same(f"slice1 {dt}", dmlnumba.slice1(x, (0,), (n,), (-1,), out=out), x[::-1])
    print(len(bad), checked, bad[:5])
"""


def check_results(env, coordinate_types, sizes=(1, 2, 4, 8)):
    """:data:`_CHECK` in a fresh interpreter: ``(wrong, checked, output)``."""
    r = run_python(
        _CHECK, env, args=(",".join(coordinate_types), ",".join(map(str, sizes))), timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    wrong, checked = r.stdout.split()[:2]
    return int(wrong), int(checked), r.stdout + r.stderr


# ---------------------------------------------------------------- the disk cache

#: Groups of the compile command for the test below (all twelve take minutes on 2
#: cores): slice1, and nonzero with 64-bit coordinates (argwhere's passes too), of two
#: bit widths each: the groups of an operator share every index of its kernels.
_GROUPS = [("slice1", t, None) for t in ("uint16", "float32")] + [
    ("nonzero", t, "uint64") for t in ("uint16", "float32")
]


def test_the_compile_command_leaves_every_entry_its_own_code(tmp_path):
    # Was: in 2 of 9 runs (2 cores; 3 of 6 with 12 workers) an index entry named another
    # specialisation's data file: argwhere([[1, 0], [0, 2]]) gave [[0, 0]] for 64-bit
    # inputs, or "can't unbox array" for uint8, bool, int16 and float16.  Here: 4 groups
    # in 4 processes at once, on a fresh cache.
    env = {"NUMBA_CACHE_DIR": str(tmp_path)}
    r = run_python(
        f"""
        import sys
        import dmlnumba.__main__ as m
        import dmlnumba.precompile as p
        p.CASES = {_GROUPS!r}
        sys.exit(m.cli(["compile", "--workers", "4"]))
        """,
        env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "4/4" in r.stderr
    entries, wrong = _scan(tmp_path)
    assert entries >= 16 and not wrong, wrong
    bad, checked, out = check_results(env, ["uint64", "int64"], sizes=(2, 4))
    assert bad == 0 and checked > 100, out
    assert "another specialisation" not in out


# A jitted function of the library's (dmlnumba.cpu.compiling.jit), compiled in four
# processes at once for four signatures, with numba's index update made slow and
# staggered: without a lock every process reads the index before any writes it, all
# take data file 1, and the index's last writer is not the data file's.
_KERNEL = """
from dmlnumba.cpu.compiling import jit


@jit
def add_one(x):
    return x + 1
"""

_WORKER = """
    import os, sys, time
    import numpy as np
    from numba.core import caching

    i, d = int(sys.argv[1]), sys.argv[2]
    index_file = caching.IndexDataCacheFile
    save_index, save_data = index_file._save_index, index_file._save_data

    def slow_index(self, overloads):
        time.sleep(1.0 + 0.3 * i)
        save_index(self, overloads)

    def slow_data(self, name, data):
        time.sleep(2.0 - 0.6 * i)
        save_data(self, name, data)

    index_file._save_index = slow_index
    index_file._save_data = slow_data
    sys.path.insert(0, d)
    import kern

    open(os.path.join(d, f"ready{i}"), "w").close()
    while len([f for f in os.listdir(d) if f.startswith("ready")]) < 4:
        time.sleep(0.01)
    print(kern.add_one(np.dtype(["int8", "int16", "float32", "float64"][i]).type(1)))
"""


def test_processes_adding_entries_of_one_function_at_once(tmp_path, monkeypatch):
    (tmp_path / "kern.py").write_text(_KERNEL)
    monkeypatch.syspath_prepend(str(tmp_path))  # numba's cached code names its module
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    code = textwrap.dedent(_WORKER)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(i), str(tmp_path)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    entries, wrong = _scan(tmp_path / "cache")
    assert (entries, wrong) == (4, [])
    r = run_python(
        """
        import sys
        import numpy as np
        sys.path.insert(0, sys.argv[1])
        import kern
        print([kern.add_one(np.dtype(t).type(1)) for t in ("int8", "int16", "float32", "float64")])
        """,
        {"NUMBA_CACHE_DIR": str(tmp_path / "cache")},
        args=(str(tmp_path),),
    )
    assert r.returncode == 0 and r.stdout == "[2, 2, 2.0, 2.0]\n", r.stderr[-2000:]


def test_an_entry_holding_another_signatures_code_is_not_loaded(tmp_path):
    # What the race left: each index entry naming another entry's data file.  Was:
    # wrong coordinates, "can't unbox array", or a crash, in every later process.
    code = """
        import numpy as np, dmlnumba
        for t in ("int8", "float32"):
            print(dmlnumba.argwhere(np.array([[1, 0], [0, 2]], t)).tolist())
    """
    env = {"NUMBA_CACHE_DIR": str(tmp_path)}
    first = run_python(code, env)
    assert first.returncode == 0 and first.stdout == "[[0, 0], [1, 1]]\n" * 2, first.stderr
    swapped = 0
    for index in tmp_path.rglob("*.nbi"):
        raw = index.read_bytes()
        with open(index, "rb") as f:
            version = pickle.load(f)
            stamp, overloads = pickle.loads(f.read())
        if len(overloads) < 2:
            continue
        keys = list(overloads)
        names = [overloads[k] for k in keys]
        rotated = dict(zip(keys, names[1:] + names[:1]))
        index.write_bytes(
            raw[: len(pickle.dumps(version, protocol=-1))] + pickle.dumps((stamp, rotated), -1)
        )
        swapped += len(keys)
    assert swapped >= 6
    assert len(_scan(tmp_path)[1]) == swapped
    second = run_python(code, env)
    assert second.returncode == 0 and second.stdout == first.stdout, second.stderr[-3000:]
    assert "holds another specialisation's code" in second.stderr
    assert _scan(tmp_path)[1] == []  # written anew


def test_numba_cuda_cache_files_are_checked_too(tmp_path):
    # The CUDA kernels' cache (numba-cuda's own copy of numba's index file): entries
    # added under the index's lock, and an entry naming another key's code not loaded.
    caching = pytest.importorskip("numba.cuda.core.caching", reason="needs numba-cuda")
    from dmlnumba.cpu.cachefile import checked

    f = caching.IndexDataCacheFile(str(tmp_path), "kernel", "stamp")

    class Cache:
        _cache_file = f

    checked(Cache)
    f.save("a", "code of a")
    f.save("b", "code of b")
    assert (tmp_path / "kernel.nbi.lock").exists()
    assert (f.load("a"), f.load("b")) == ("code of a", "code of b")
    names = f._load_index()
    f._save_index({"a": names["b"], "b": names["a"]})  # what the race left
    assert (f.load("a"), f.load("b")) == (None, None)


# ---------------------------------------------------------------- the process

_INTERRUPT_IMPORT = """
    import sys, importlib.abc
    import numpy as np, dmlnumba

    class Interrupt(importlib.abc.MetaPathFinder):
        # KeyboardInterrupt once, as the first call imports this module.
        fired = False

        def find_spec(self, name, path, target=None):
            if name == sys.argv[1] and not Interrupt.fired:
                Interrupt.fired = True
                raise KeyboardInterrupt
            return None

    sys.meta_path.insert(0, Interrupt())
    x = np.array([[1, 0], [0, 2]])
    try:
        dmlnumba.argwhere(x)
    except KeyboardInterrupt:
        print("interrupted")
    y = np.arange(10000)  # past CPU_SLICE_NUMPY_MAX: the kernel
    print(dmlnumba.argwhere(x).tolist(), dmlnumba.slice1(y, (0,), (10000,), (-1,))[0])
"""


@pytest.mark.parametrize("module", ["numba.core.typing", "llvmlite.binding.ffi", "numba.np.ufunc"])
def test_an_interrupted_import_is_made_again_by_the_next_call(module):
    # Was: AttributeError: module 'numba' has no attribute 'core', from every later call.
    r = run_python(_INTERRUPT_IMPORT, args=(module,))
    assert r.returncode == 0 and r.stdout == "interrupted\n[[0, 0], [1, 1]] 9999\n", r.stderr


def test_ctrl_c_during_the_first_calls_import_leaves_the_library_usable():
    # Was: a SIGINT in the first 0.02-0.14 s of the first call (numba's import) broke
    # every later call.  Now the import finishes, then the call raises KeyboardInterrupt.
    r = run_python(
        """
        import os, signal, sys, importlib.abc
        import numpy as np, dmlnumba

        # Python's own handler, whatever this process inherited: a shell's background
        # job starts with SIGINT ignored, and then no KeyboardInterrupt comes.
        signal.signal(signal.SIGINT, signal.default_int_handler)

        class CtrlC(importlib.abc.MetaPathFinder):
            # A real SIGINT, once, as the first call imports numba.core.typing.
            sent = False

            def find_spec(self, name, path, target=None):
                if name == "numba.core.typing" and not CtrlC.sent:
                    CtrlC.sent = True
                    os.kill(os.getpid(), signal.SIGINT)
                return None

        sys.meta_path.insert(0, CtrlC())
        x = np.array([[1, 0], [0, 2]])
        try:
            dmlnumba.argwhere(x)
        except KeyboardInterrupt:
            print("interrupted", "numba.core.typing" in sys.modules)
        print(dmlnumba.argwhere(x).tolist())
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "interrupted True\n[[0, 0], [1, 1]]\n", r.stderr


_FORK = """
    import os, sys, threading, time
    import numpy as np, dmlnumba
    from dmlnumba.cpu import process

    def compiler_lock_held():
        # The module may be in sys.modules half imported, by the other thread.
        lock = getattr(sys.modules.get("numba.core.compiler_lock"), "global_compiler_lock", None)
        if lock is None or lock._lock.acquire(blocking=False):
            if lock is not None:
                lock._lock.release()
            return False
        return True

    def fork_and_wait(child):
        pid = os.fork()
        if pid == 0:
            try:
                child()
                os._exit(0)
            except BaseException as e:
                print("child:", type(e).__name__, e, flush=True)
                os._exit(1)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.05)
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        return "hung"

    def first_calls():
        assert dmlnumba.argwhere(np.array([0, 3, 0, 4], np.int8)).ravel().tolist() == [1, 3]
        assert dmlnumba.argwhere(np.array([0, 3, 0, 4], np.float32)).ravel().tolist() == [1, 3]
"""


def test_fork_while_another_thread_compiles_gives_a_working_child(tmp_path):
    # Was: the child's first call that needed a kernel waited forever for numba's
    # compiler lock, which the parent's compiling thread held at the fork.
    r = run_python(
        _FORK
        + """
    t = threading.Thread(target=first_calls)
    t.start()
    while not compiler_lock_held():
        time.sleep(0.001)
    print(fork_and_wait(first_calls))
    t.join()
    """,
        {"NUMBA_CACHE_DIR": str(tmp_path)},  # a cold compile: seconds under the lock
    )
    assert r.returncode == 0 and r.stdout == "0\n", r.stdout + r.stderr[-3000:]


def test_fork_past_the_wait_gives_a_runtime_error_not_a_hang(tmp_path):
    r = run_python(
        _FORK
        + """
    from numba.core.compiler_lock import global_compiler_lock
    warm = np.array([0, 3, 0, 4], np.int8)
    dmlnumba.argwhere(warm)
    process.FORK_WAIT_S = 0.2
    t = threading.Thread(target=lambda: global_compiler_lock.__enter__() or time.sleep(3))
    t.start()
    while not compiler_lock_held():
        time.sleep(0.001)

    def child():
        assert dmlnumba.argwhere(warm).ravel().tolist() == [1, 3]  # compiled: runs
        dmlnumba.argwhere(np.ones(3, np.float32))  # would compile

    print(fork_and_wait(child))
    """,
        {"NUMBA_CACHE_DIR": str(tmp_path)},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.endswith("1\n"), r.stdout
    assert "child: RuntimeError" in r.stdout and "forked while another thread" in r.stdout


# ---------------------------------------------------------------- settings and arguments

_SMALL_CALLS = """
    import numpy as np, dmlnumba
    for name, call in (
        ("slice1", lambda: dmlnumba.slice1(np.ones(3), (0,), (3,), (1,))),
        ("argwhere", lambda: dmlnumba.argwhere(np.ones(3))),
        ("nonzero_coordinates", lambda: dmlnumba.nonzero_coordinates(np.ones((2, 2)))),
    ):
        try:
            call()
            print(name, "ran")
        except ValueError as e:
            print(e)
"""


def test_no_threads_is_reported_at_the_first_call_of_any_size():
    # Was: numba's bare "Number of threads specified must be > 0.", and only from calls
    # large enough to start numba's threads.
    r = run_python(_SMALL_CALLS, {"NUMBA_NUM_THREADS": "0"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3
    for name, line in zip(("slice1", "argwhere", "nonzero_coordinates"), lines):
        assert line.startswith(f"{name}(): environment variable NUMBA_NUM_THREADS='0'"), line


def test_a_threading_layer_that_cannot_load_is_reported_at_the_first_call():
    from numba.np.ufunc.parallel import _check_tbb_version_compatible

    try:
        _check_tbb_version_compatible()
        import numba.np.ufunc.tbbpool  # noqa: F401

        pytest.skip("numba loads tbb here")
    except ImportError:
        pass
    r = run_python(_SMALL_CALLS, {"NUMBA_THREADING_LAYER": "tbb"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3
    for name, line in zip(("slice1", "argwhere", "nonzero_coordinates"), lines):
        assert line.startswith(f"{name}(): environment variable NUMBA_THREADING_LAYER='tbb'")
        assert "No threading layer could be loaded" in line and "pip install tbb" in line


def test_workable_thread_settings_run():
    r = run_python(_SMALL_CALLS, {"NUMBA_NUM_THREADS": "1", "NUMBA_THREADING_LAYER": "workqueue"})
    assert r.returncode == 0 and r.stdout.split() == ["slice1", "ran", "argwhere", "ran"] + [
        "nonzero_coordinates",
        "ran",
    ], r.stdout + r.stderr
