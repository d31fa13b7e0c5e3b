"""Settings from the environment: NUMBA_DISABLE_JIT runs every path, bad values name
their variable, and a bad setting never breaks the import."""

import pytest
from interpreter import run_python

pytestmark = pytest.mark.boundscheck  # CI runs these again with NUMBA_BOUNDSCHECK=1


def test_disable_jit_runs_every_path():
    # Was: multi-row slice1 failed (the prefetch intrinsic cannot run as Python).
    r = run_python(
        """
        import numpy as np, dmlnumba
        x = np.arange(3 * 40 * 50, dtype=np.float32).reshape(3, 40, 50)
        assert (dmlnumba.slice1(x, (0, 0, 0), (3, 40, 50), (1, -1, 2)) == x[:, ::-1, ::2]).all()
        assert (dmlnumba.slice1(x, (0, 0, 0), (3, 40, 50), (1, 3, 3)) == x[:, ::3, ::3]).all()
        out = np.empty((3, 14, 17), np.float32)  # into out=: the kernel, not NumPy's copy
        dmlnumba.slice1(x, (0, 0, 0), (3, 40, 50), (1, -3, 3), out=out)
        assert (out == x[:, ::-3, ::3]).all()
        y = np.arange(1 << 14, dtype=np.int16)  # past CPU_SLICE_NUMPY_MAX: the kernel
        assert (dmlnumba.slice1(y, (1,), (y.size - 1,), (-2,)) == y[1:][::-2]).all()
        assert (dmlnumba.argwhere(x) == np.argwhere(x)).all()
        assert (dmlnumba.argwhere(x[:, ::-2]) == np.argwhere(x[:, ::-2])).all()
        for v in (x[:, ::-1], x[::-1, 1::3], x.T, x[0, :3, :4][:, ::-1]):  # (wrapping: no warning)
            count, coords = dmlnumba.nonzero_coordinates(v)
            assert (coords[: int(count[0])] == np.argwhere(v)).all()
        g = dmlnumba.slice_grad(x[:, ::-3, ::3], (3, 40, 50), (0, 0, 0), (3, 40, 50), (1, -3, 3))
        assert (g[:, ::-3, ::3] == x[:, ::-3, ::3]).all()
        print("ok")
    """,
        {"NUMBA_DISABLE_JIT": "1"},
        flags=("-W", "error::RuntimeWarning"),
    )
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1.5", "٣", ""])
def test_bad_environment_values_name_the_variable(value):
    # Was: import failed, or ZeroDivisionError at the first call.
    r = run_python(
        """
        import numpy as np, dmlnumba
        for call in (lambda: dmlnumba.slice1(np.ones(3), (0,), (3,), (1,)),
                     lambda: dmlnumba.argwhere(np.ones(3))):
            try:
                call()
            except ValueError as e:
                print(e)
    """,
        {"DMLNUMBA_CPU_SLICE_CHUNK": value},
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("slice1(): environment variable DMLNUMBA_CPU_SLICE_CHUNK=")
    assert lines[1].startswith("argwhere(): environment variable DMLNUMBA_CPU_SLICE_CHUNK=")


def test_settings_assigned_at_run_time_are_checked(monkeypatch):
    """config.X = v takes the environment's range: a block of -4 or 2.5 elements gave
    wrong nonzero results, 0 a ZeroDivisionError; the value stays as it was."""
    import numpy as np

    import dmlnumba
    from dmlnumba import config

    for name, bad in [
        ("CPU_NONZERO_BLOCK", -4),
        ("CPU_NONZERO_BLOCK", 2.5),
        ("CPU_NONZERO_BLOCK", 0),
        ("CPU_NONZERO_BLOCK", True),
        ("CPU_SLICE_CHUNK", "8"),
        ("CPU_LOAD_CHECK", 2),
        ("CUDA_THREADS", 48),
    ]:
        before, generation = getattr(config, name), config.GENERATION
        with pytest.raises(ValueError, match=rf"^dmlnumba\.config\.{name} = .* is not valid"):
            setattr(config, name, bad)
        assert getattr(config, name) == before and config.GENERATION == generation
    monkeypatch.setattr(config, "CPU_NONZERO_BLOCK", np.int64(3))  # (NumPy ints are ints)
    assert type(config.CPU_NONZERO_BLOCK) is int
    x = np.zeros((3, 5), np.float32)
    x[0, 1] = x[2, 4] = 1
    assert (dmlnumba.argwhere(x) == np.argwhere(x)).all()


def test_register_cap_out_of_range_names_the_variable():
    """The register caps (0 to 255) and the slice kernel's 32-bit bound (0 to 2**31)
    are checked like every setting."""
    for var, value in [
        ("CUDA_NONZERO_MAX_REGISTERS", "256"),
        ("CUDA_SLICE_32BIT_REGISTERS", "256"),
        ("CUDA_SLICE_32BIT_BELOW", str((1 << 31) + 1)),
    ]:
        r = run_python(
            """
            import numpy as np, dmlnumba
            try:
                dmlnumba.argwhere(np.ones(3))
            except ValueError as e:
                print(e)
        """,
            {f"DMLNUMBA_{var}": value},
        )
        assert r.returncode == 0, r.stderr
        want = f"argwhere(): environment variable DMLNUMBA_{var}='{value}'"
        assert r.stdout.startswith(want), r.stdout


def test_a_bad_setting_never_breaks_the_import_and_dask_refuses_it_at_once():
    # Was: DMLNUMBA_CPU_SLICE_CHUNK=--5 made `import dmlnumba` raise; dask graphs were
    # built and failed inside a task.
    pytest.importorskip("dask.array")  # the child process builds dask graphs
    r = run_python(
        """
        import numpy as np, dask.array as da, dmlnumba
        x = da.ones((4, 4), chunks=2)
        for call in (
            lambda: dmlnumba.slice1(np.ones(3), (0,), (3,), (1,)),
            lambda: dmlnumba.slice1(x, (0, 0), (2, 2), (1, 1)),
            lambda: dmlnumba.nonzero_coordinates(x),
            lambda: dmlnumba.argwhere(x),
        ):
            try:
                call()
                print("built")
            except ValueError as e:
                print(e)
    """,
        {"DMLNUMBA_CPU_SLICE_CHUNK": "--5"},
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 4
    for line, f in zip(lines, ["slice1", "slice1", "nonzero_coordinates", "argwhere"]):
        assert line.startswith(f"{f}(): environment variable DMLNUMBA_CPU_SLICE_CHUNK='--5'")
