"""What the public functions accept as arguments: parameters that reshape or resize the
input while they are read, ordered sequences only, max_count past the input, and
messages that name their function."""

from pathlib import Path

import numpy as np
import pytest
from interpreter import run_python

import dmlnumba

pytestmark = pytest.mark.boundscheck  # CI runs these again with NUMBA_BOUNDSCHECK=1

X = np.arange(1, 13, dtype=np.float32).reshape(3, 4)


def test_parameters_that_reshape_or_resize_the_input_never_read_past_it():
    # Was: the window was checked against the input's old layout and walked over its
    # new one: a read 2**40 bytes past a 1 MiB buffer (a segfault), or wrong results.
    r = run_python(
        """
        import sys
        sys.path.insert(0, sys.argv[1])  # the tests' folder
        import numpy as np, dmlnumba
        from mutating import Index, Seq

        N = 1 << 20

        def attempt(call, x, window):
            # "error" (naming the function), or whether the result is the window of the
            # input's layout after the call (where that window exists).
            try:
                r = call()
            except (ValueError, TypeError) as e:
                return "error" if str(e).startswith(("slice1()", "nonzero_")) else str(e)
            offsets, sizes = window
            if any(o + s > n for o, s, n in zip(offsets, sizes, x.shape)):
                return "wrong: no such window"
            want = x[tuple(slice(o, o + s) for o, s in zip(offsets, sizes))]
            return "right" if r.tolist() == want.tolist() else "wrong"

        def column():
            x = np.zeros((N, 1), np.uint8)
            x[-1] = 7
            return x

        def flip(x):
            def act():
                x.shape = (1, N)
            return act

        w = ((N - 1, 0), (1, 1))
        for out in [None, np.zeros((1, 1), np.uint8)]:
            x = column()
            o = (Index(N - 1, flip(x)), 0)
            print(attempt(lambda: dmlnumba.slice1(x, o, (1, 1), (1, 1), out=out), x, w))
        for on in ("len", "iter"):
            x = column()
            s = Seq((1, 1), flip(x), on)
            print(attempt(lambda: dmlnumba.slice1(x, (N - 1, 0), s, (1, 1)), x, w))
        x = np.arange(N, dtype=np.uint8)
        def shrink():
            x.resize((16,), refcheck=False)
        o = (Index(N - 1, shrink),)
        print(attempt(lambda: dmlnumba.slice1(x, o, (1,), (1,)), x, ((N - 1,), (1,))))
        # A reshape that makes the window valid: the result is the new layout's window.
        x = np.arange(16, dtype=np.int16).reshape(4, 4)
        def wide():
            x.shape = (2, 8)
        o = (1, Index(5, wide))
        print(attempt(lambda: dmlnumba.slice1(x, o, (1, 3), (1, 1)), x, ((1, 5), (1, 3))))
        # nonzero_coordinates: width and dtype read before the input's shape.
        x = np.arange(16, dtype=np.float32).reshape(1, 16)
        def tall():
            x.shape = (16, 1)
        try:
            dmlnumba.nonzero_coordinates(x, Index(1, tall))
        except ValueError as e:
            print(str(e).split(":")[0])
        class DType:
            @property
            def dtype(self):
                x.shape = (16,)
                return np.dtype(np.uint32)
        x = np.arange(16, dtype=np.float32).reshape(4, 4)
        count, coords = dmlnumba.nonzero_coordinates(x, dtype=DType())
        print(int(count[0]), coords.shape, coords[:15].ravel().tolist() == list(range(1, 16)))
    """,
        args=(str(Path(__file__).parent),),
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(line in ("error", "right") for line in lines[:5]), lines
    assert lines[5:] == [
        "right",
        "nonzero_coordinates()",
        "15 (16, 1) True",
    ]


@pytest.mark.parametrize(
    "offsets", [{0: 0, 1: 0}, {0, 1}, frozenset({0}), (i for i in (0, 0)), iter([0, 0])]
)
def test_unordered_containers_are_refused(offsets):
    out = np.full((3, 4), 5.0, np.float32)
    with pytest.raises(TypeError, match=r"slice1\(\): offsets must be a sequence of 2 integers"):
        dmlnumba.slice1(X, offsets, (3, 4), (1, 1), out=out)
    assert (out == 5).all()


@pytest.mark.parametrize("seq", [[0, 1], (0, 1), range(2), np.array([0, 1], np.int8)])
def test_ordered_sequences_are_accepted(seq):
    np.testing.assert_array_equal(dmlnumba.slice1(X, seq, (2, 3), (1, 1)), X[0:2, 1:4])


def test_max_count_past_the_input_gives_input_size_rows():
    # Was: max_count rows, here 2**32 - 1 of them (16 GiB).
    x = np.array([0, 3, 0, 5, 1], np.float32)
    count, coords = dmlnumba.nonzero_coordinates(x, max_count=2**32 - 1)
    assert coords.shape == (5, 1) and int(count[0]) == 3
    np.testing.assert_array_equal(coords[:3], np.argwhere(x))
    out = np.full((5, 1), 9, np.uint32)  # input.size rows are enough for any max_count
    count, coords = dmlnumba.nonzero_coordinates(x, max_count=100, out_coordinates=out)
    assert coords is out and int(count[0]) == 3
    np.testing.assert_array_equal(out[:3], np.argwhere(x))


def test_argwhere_errors_name_argwhere():
    with pytest.raises(ValueError, match=r"^argwhere\(\): input has 9 dimensions"):
        dmlnumba.argwhere(np.zeros((1,) * 9))
    with pytest.raises(TypeError, match=r"^argwhere\(\): input dtype complex64"):
        dmlnumba.argwhere(np.zeros(3, np.complex64))


def test_window_with_a_huge_shape_is_a_value_error():
    with pytest.raises(ValueError, match=r"does not fit in int64"):
        dmlnumba.window((2**70,), slice(None))
    assert dmlnumba.window((2**62,), slice(None, None, -1)) == ((0,), (2**62,), (-1,), (2**62,))


@pytest.mark.parametrize(
    "index,exc",
    [
        (slice(None, None, 0), ValueError),
        (slice(0.5, 3), TypeError),
        ((Ellipsis, slice(0, "a")), TypeError),
    ],
)
def test_window_slice_errors_name_window(index, exc):
    # Was: Python's own "slice step cannot be zero" / "slice indices must be integers".
    with pytest.raises(exc, match=r"^window\(\): the slice .* of dimension 0"):
        dmlnumba.window((4,), index)


def test_dtype_none_names_the_parameter():
    # Was: "dtype float64 is not supported" (numpy.dtype(None) is float64).
    with pytest.raises(TypeError, match=r"nonzero_coordinates\(\): dtype=None is not a coord"):
        dmlnumba.nonzero_coordinates(np.ones(3), dtype=None)
