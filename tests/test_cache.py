"""numba's disk cache as the kernels use it: no cache location (compiled in memory,
one warning, alike under ``-W error``), truncated entries recompiled, a missing
threading layer not taken for a bad entry.  tests/test_process.py has the cache
written by several processes at once."""

import pytest
from interpreter import run_python

pytestmark = pytest.mark.boundscheck  # CI runs these again with NUMBA_BOUNDSCHECK=1


def test_no_cache_location_compiles_in_memory_with_one_warning():
    # Was: every call raised "cannot cache function 'unravel': no locator available".
    r = run_python("""
        import warnings
        warnings.simplefilter("always")
        from numba.core import caching
        caching.CacheImpl._locator_classes = []       # what numba finds with nowhere to write
        import numpy as np, dmlnumba
        print(dmlnumba.argwhere(np.ones((3, 4))).shape)
        x = np.arange(6.).reshape(2, 3)
        print(dmlnumba.slice1(x, (0, 0), (2, 3), (1, -1)).tolist())
        out = np.empty((2, 3))  # into out=: the kernel (a new output this small: NumPy's copy)
        print(dmlnumba.slice1(x, (0, 0), (2, 3), (1, -1), out=out).tolist())
    """)
    assert r.returncode == 0, r.stderr
    want = "[[2.0, 1.0, 0.0], [5.0, 4.0, 3.0]]"
    assert r.stdout.split("\n")[:3] == ["(12, 2)", want, want]
    assert r.stderr.count("numba has no writable cache directory") == 1


def test_truncated_cache_entries_are_recompiled(tmp_path):
    code = """
        import numpy as np, dmlnumba
        out = np.empty(5, np.int8)  # into out=: the kernel
        print(dmlnumba.argwhere(np.array([0, 5, 0, 7], np.int8)).ravel().tolist(),
              dmlnumba.slice1(np.arange(5, dtype=np.int8), (0,), (5,), (-1,), out=out).tolist())
    """
    env = {"NUMBA_CACHE_DIR": str(tmp_path)}
    first = run_python(code, env)
    assert first.returncode == 0, first.stderr
    files = [p for p in tmp_path.rglob("*") if p.suffix in (".nbi", ".nbc")]
    assert files
    for p in files:
        p.write_bytes(p.read_bytes()[:7])
    second = run_python(code, env)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout == "[1, 3] [4, 3, 2, 1, 0]\n"
    assert "could not be read" in second.stderr
    third = run_python(code, env)  # the entries were written anew
    assert third.returncode == 0 and third.stdout == first.stdout
    assert "could not be read" not in third.stderr


def test_a_missing_threading_layer_is_not_taken_for_a_bad_cache_entry(tmp_path):
    # Was: "numba's cached code for count/8/parallel could not be read (ValueError: No
    # threading layer could be loaded...); recompiling it", and every kernel's cache
    # flushed, before the same error was raised.
    code = """
        import numpy as np, dmlnumba
        print(dmlnumba.argwhere(np.ones(1 << 21, np.int8)).shape)
    """
    env = {"NUMBA_CACHE_DIR": str(tmp_path), "DMLNUMBA_CPU_PARALLEL_MIN": str(1 << 20)}
    first = run_python(code, env)
    assert first.returncode == 0 and first.stdout == "(2097152, 1)\n", first.stderr
    second = run_python(code, {**env, "NUMBA_THREADING_LAYER": "tbb"})
    if second.returncode == 0:
        pytest.skip("numba loads tbb here")
    assert "No threading layer could be loaded" in second.stderr
    assert "could not be read" not in second.stderr
    third = run_python(code, env)  # the cache is intact: nothing to recompile
    assert third.returncode == 0 and third.stdout == first.stdout
    assert "compiling" not in third.stderr


def test_cache_warning_under_w_error_is_raised_by_every_call_alike():
    # Was: the first call raised the warning from inside the kernels' import and later
    # calls succeeded silently (dmlnumba half initialised).
    r = run_python(
        """
        import warnings
        from numba.core import caching
        caching.CacheImpl._locator_classes = []       # what numba finds with nowhere to write
        import numpy as np, dmlnumba
        x = np.ones((3, 4))
        for _ in range(3):
            try:
                dmlnumba.argwhere(x)
                print("returned")
            except RuntimeWarning as e:
                print("raised", "no writable cache directory" in str(e))
        warnings.simplefilter("ignore")
        print(dmlnumba.argwhere(x).shape, dmlnumba.argwhere(x).shape)
    """,
        flags=("-W", "error"),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["raised True"] * 3 + ["(12, 2) (12, 2)"]
