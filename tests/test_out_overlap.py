"""The overlap rule of ``out=`` parameters: an output overlapping the input or
another output is refused or handled as documented, interleaved outputs that share
no byte are accepted, and the self-overlap test is exact."""

import numpy as np
import pytest

import dmlnumba

from devices import DEVICES, device_view, to_device, to_host

pytestmark = pytest.mark.boundscheck  # CI runs these again with NUMBA_BOUNDSCHECK=1


@pytest.mark.parametrize("device", DEVICES)
def test_out_coordinates_overlapping_the_input(device):
    # Was: a count of 1792 instead of 2048, with wrong rows.
    buf = np.ones(4096, np.uint32)
    if device == "cpu":
        x, oc = buf[:2048].reshape(1024, 2), buf.reshape(2048, 2)
    else:
        d = to_device(buf, device)
        x = device_view(d, lambda b: b[:2048].reshape(1024, 2), buf)
        oc = device_view(d, lambda b: b.reshape(2048, 2), buf)
    count, coords = dmlnumba.nonzero_coordinates(x, out_coordinates=oc)
    assert coords is oc
    assert int(to_host(count)[0]) == 2048
    np.testing.assert_array_equal(to_host(coords), np.argwhere(np.ones((1024, 2))))


@pytest.mark.parametrize("device", DEVICES)
def test_out_count_overlapping_the_input(device):
    buf = np.arange(1, 9, dtype=np.uint32)
    if device == "cpu":
        x, cnt = buf[:4], buf[3:4]
    else:
        d = to_device(buf, device)
        x = device_view(d, lambda b: b[:4], buf)
        cnt = device_view(d, lambda b: b[3:4], buf)
    count, coords = dmlnumba.nonzero_coordinates(x, out_count=cnt)
    assert int(to_host(count)[0]) == 4
    np.testing.assert_array_equal(to_host(coords)[:4, 0], [0, 1, 2, 3])


@pytest.mark.parametrize("device", DEVICES)
def test_out_count_overlapping_out_coordinates_is_refused(device):
    buf = np.full(10, 77, np.uint32)
    if device == "cpu":
        cnt, oc = buf[:1], buf[:8].reshape(4, 2)
    else:
        d = to_device(buf, device)
        cnt = device_view(d, lambda b: b[:1], buf)
        oc = device_view(d, lambda b: b[:8].reshape(4, 2), buf)
    with pytest.raises(ValueError, match=r"out_count and out_coordinates overlap"):
        x = np.ones((2, 2), np.float32)
        dmlnumba.nonzero_coordinates(
            x if device == "cpu" else to_device(x, device), out_count=cnt, out_coordinates=oc
        )
    assert (to_host(to_device(buf, "cpu")) == 77).all()


@pytest.mark.parametrize("device", DEVICES)
def test_out_count_beside_out_coordinates_is_accepted(device):
    # Interleaved but disjoint: count in the gap after each coordinate row.
    buf = np.full(12, 77, np.uint32)
    view_c = lambda b: b[2:3]  # noqa: E731
    view_x = lambda b: np.lib.stride_tricks.as_strided(b, (4, 1), (12, 4))  # noqa: E731
    x = np.array([0, 3, 0, 5], np.float32)
    if device == "cpu":
        cnt, oc = view_c(buf), view_x(buf)
    else:
        d = to_device(buf, device)
        cnt, oc = device_view(d, view_c, buf), device_view(d, view_x, buf)
        x = to_device(x, device)
    count, coords = dmlnumba.nonzero_coordinates(x, 1, out_count=cnt, out_coordinates=oc)
    assert int(to_host(count)[0]) == 2
    assert to_host(coords)[:2, 0].tolist() == [1, 3]


@pytest.mark.parametrize("device", DEVICES)
def test_slice1_out_overlapping_the_input(device):
    # Was, on CUDA: TypeError: unhashable type: 'list'.
    buf = np.arange(24, dtype=np.float32)
    want = buf[:12].reshape(3, 4)[::-1, ::-1].copy()
    if device == "cpu":
        x, out = buf[:12].reshape(3, 4), buf[6:18].reshape(3, 4)
    else:
        d = to_device(buf, device)
        x = device_view(d, lambda b: b[:12].reshape(3, 4), buf)
        out = device_view(d, lambda b: b[6:18].reshape(3, 4), buf)
    r = dmlnumba.slice1(x, (0, 0), (3, 4), (-1, -1), out=out)
    assert r is out
    np.testing.assert_array_equal(to_host(r).reshape(3, 4), want)


@pytest.mark.parametrize("device", DEVICES)
def test_interleaved_out_that_does_not_overlap_is_accepted(device):
    # Byte strides (12, 8), shape (2, 3), float32: elements at 0, 8, 16, 12, 20, 28.
    buf = np.full(9, -1.0, np.float32)
    view = lambda b: np.lib.stride_tricks.as_strided(b, (2, 3), (12, 8))  # noqa: E731
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    if device == "cpu":
        out = view(buf)
    else:
        d = to_device(buf, device)
        out = device_view(d, view, buf)
        src = to_device(src, device)
    r = dmlnumba.slice1(src, (0, 0), (2, 3), (1, 1), out=out)
    np.testing.assert_array_equal(to_host(r), np.arange(6).reshape(2, 3))


@pytest.mark.parametrize(
    "shape,strides,isz,overlaps",
    [
        ((2, 3), (12, 8), 4, False),
        ((2, 3), (12, 4), 4, False),  # 0, 4, 8 then 12, 16, 20
        ((2, 3), (8, 4), 4, True),  # 0, 4, 8 then 8, 12, 16
        ((3, 3), (8, 4), 4, True),
        ((4, 2, 3), (0, 12, 4), 4, True),
        ((5,), (0,), 4, True),
        ((1, 5), (0, 4), 4, False),
        ((3, 4), (16, 4), 4, False),
        ((3, 4), (-16, -4), 4, False),
        ((3, 4), (4, 16), 4, False),
        ((2, 2), (6, 4), 4, True),  # 0, 4, 6, 10: the 4-byte elements at 4 and 6 collide
        ((2, 2), (8, 3), 2, False),  # 0, 3, 8, 11 with 2-byte elements
        ((0, 3), (0, 0), 4, False),
        ((100000, 100000), (4, 4), 4, True),
    ],
)
def test_self_overlap_is_exact(shape, strides, isz, overlaps):
    from dmlnumba.validation import self_overlaps

    assert self_overlaps(shape, strides, isz) is overlaps
