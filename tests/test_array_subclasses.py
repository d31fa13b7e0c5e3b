"""ndarray subclasses and look-alikes: np.matrix outputs written in place and nothing
past them, memmap and recarray inputs read as their data, masked arrays (NumPy's and
as dask chunks) refused with the parameter named."""

import numpy as np
import pytest

import dmlnumba

pytestmark = pytest.mark.boundscheck  # CI runs these again with NUMBA_BOUNDSCHECK=1

X = np.arange(1, 13, dtype=np.float32).reshape(3, 4)


def test_matrix_out_is_written_in_place_and_nothing_past_it():
    # Was: 9s everywhere and 30 elements written past the buffer (heap corruption).
    buf = np.full(40, -1.0, np.float32)
    o = buf[:6].reshape(3, 2).view(np.matrix)
    assert np.shares_memory(o, buf)
    r = dmlnumba.slice1(X, (0, 0), (3, 4), (-1, 2), out=o)
    assert r is o
    np.testing.assert_array_equal(np.asarray(o), X[::-1, ::2])
    assert (buf[6:] == -1).all()


def test_matrix_out_coordinates():
    buf = np.full(40, 7, np.uint32)
    o = buf[:24].reshape(12, 2).view(np.matrix)
    count, coords = dmlnumba.nonzero_coordinates(X, out_coordinates=o)
    assert coords is o and count[0] == 12
    np.testing.assert_array_equal(np.asarray(o), np.argwhere(X))
    assert (buf[24:] == 7).all()


def test_matrix_memmap_and_recarray_inputs_read_as_their_data(tmp_path):
    m = np.matrix(X)
    np.testing.assert_array_equal(dmlnumba.slice1(m, (0, 0), (3, 4), (-1, 2)), X[::-1, ::2])
    np.testing.assert_array_equal(dmlnumba.argwhere(m), np.argwhere(X))
    mm = np.memmap(tmp_path / "x.bin", np.float32, "w+", shape=X.shape)
    mm[:] = X
    np.testing.assert_array_equal(dmlnumba.slice1(mm, (0, 0), (3, 4), (1, -1)), X[:, ::-1])
    np.testing.assert_array_equal(dmlnumba.argwhere(X.view(np.recarray)), np.argwhere(X))


@pytest.mark.parametrize("where", ["input", "out", "out_coordinates"])
def test_masked_arrays_are_refused_with_the_parameter_named(where):
    ma = np.ma.masked_array(X, X > 5)
    out = np.ma.masked_array(np.zeros((3, 4), np.float32))
    with pytest.raises(TypeError, match=rf"{where} is a numpy.ma.MaskedArray.*filled"):
        if where == "input":
            dmlnumba.slice1(ma, (0, 0), (3, 4), (1, 1))
        elif where == "out":
            dmlnumba.slice1(X, (0, 0), (3, 4), (1, 1), out=out)
        else:
            dmlnumba.nonzero_coordinates(
                X, out_coordinates=np.ma.masked_array(np.zeros((12, 2), np.uint32))
            )
    assert (out.data == 0).all()


def test_dask_arrays_of_masked_chunks_are_refused_while_the_graph_is_built():
    # Was: refused inside a task, by "dask block()".
    da = pytest.importorskip("dask.array")
    m = np.ma.masked_array(np.arange(6.0), mask=[0, 1, 0, 0, 0, 0])
    for x in (
        da.from_array(m, chunks=3),
        da.ma.masked_array(da.arange(6.0, chunks=3), mask=da.zeros(6, chunks=3, dtype=bool)),
    ):
        for f, call in [
            ("slice1", lambda: dmlnumba.slice1(x, (0,), (6,), (1,))),
            ("nonzero_coordinates", lambda: dmlnumba.nonzero_coordinates(x)),
            ("argwhere", lambda: dmlnumba.argwhere(x)),
        ]:
            with pytest.raises(TypeError, match=rf"^{f}\(\): input is a dask array of numpy.ma"):
                call()
