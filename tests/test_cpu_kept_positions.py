"""The CPU nonzero's kept positions: the count pass of a C-contiguous input keeps the
positions of a sparse block's non-zeros, and the write pass writes that block's rows
from them without reading the input again (dmlnumba.params.kept_slots)."""

import os

import numpy as np
import pytest

import dmlnumba
from dmlnumba import config
from dmlnumba.params import KEEP_OF, NONZERO_CPU, kept_slots

pytestmark = pytest.mark.boundscheck  # CI runs these again with NUMBA_BOUNDSCHECK=1

BLOCK = 4096


def _input(rng):
    """Blocks of every kind: empty, sparse (kept), a dense first group, sparse then
    dense from the middle, dense throughout, and a last block cut short."""
    x = np.zeros(8 * BLOCK - 100, np.float32)
    blocks = x[: 7 * BLOCK].reshape(7, BLOCK)
    blocks[1, rng.random(BLOCK) < 0.01] = 1
    blocks[2, :64] = 1
    blocks[2, 64:][rng.random(BLOCK - 64) < 0.01] = 1
    blocks[3, rng.random(BLOCK) < 0.01] = 1
    blocks[3, BLOCK // 2 :] = 2
    blocks[4, rng.random(BLOCK) < 0.5] = 3
    blocks[5, rng.random(BLOCK) < 1 / (2 * KEEP_OF)] = 4
    blocks[6, BLOCK - 1] = 5
    x[7 * BLOCK :][rng.random(BLOCK - 100) < 0.02] = 6
    x[-((BLOCK - 100) % 64) :] = 0  # (the last block's last, short group: none)
    return x


@pytest.mark.parametrize("tail", [False, True])
@pytest.mark.parametrize("on_threads", [False, True])
def test_sparse_blocks_are_written_from_their_kept_positions(on_threads, tail, monkeypatch):
    """Every sparse block keeps its positions (how many, then each, in order); a block
    that is dense in its first 64 elements or turns dense keeps none (-1), nor does a
    last block with a non-zero in its short last group (counted, not looked through).  With the
    input zeroed after the count, the write pass still writes the kept blocks' rows:
    it read none of their elements."""
    from dmlnumba.cpu import nonzero_launch, process, threads
    from dmlnumba.cpu.nonzero import _fresh_rows_block
    from dmlnumba.params import NONZERO_PASS, size

    monkeypatch.setattr(config, "CPU_NONZERO_BLOCK", BLOCK)
    x = _input(np.random.default_rng(0))
    if tail:
        x[-1] = 8
    want = np.argwhere(x)
    p = _fresh_rows_block(x, 0, (1,), 1, x.size)
    P = NONZERO_CPU
    nblocks, keep = int(p[P.nblocks]), int(p[P.keep])
    assert keep == kept_slots(BLOCK) and nblocks == 8
    src = x.view(np.uint32)
    out = np.full((x.size, 1), 7, np.uint32)
    k = process.kernels()
    fw = nonzero_launch.write_pass(k, (32, 32), p)
    a = nonzero_launch.pass_args(src, p, out.reshape(-1), nblocks + 1, keep)
    args = size(NONZERO_PASS)
    rows = a[args : args + nblocks + 1]
    rows[0] = 0
    threads.run_pass(nonzero_launch.count_pass(k, 32, p), a, rows[1:], on_threads)
    np.cumsum(rows, out=rows)
    assert rows[-1] == len(want)
    held = a[args + nblocks + 1 : args + 2 * nblocks + 1]
    kept = a[args + 2 * nblocks + 1 :].reshape(nblocks, keep)
    for b, expect in enumerate([True, True, False, False, False, True, True, not tail]):
        mine = np.flatnonzero(x[b * BLOCK : (b + 1) * BLOCK])
        if expect:
            assert held[b] == len(mine), b
            np.testing.assert_array_equal(kept[b, : len(mine)], mine)
        else:
            assert held[b] == -1, b
    src[:] = 0  # the kept blocks' rows need no element; the others find none
    threads.run_pass(fw, a, np.empty(nblocks, np.int64), on_threads)
    for b in (1, 5, 6) if tail else (1, 5, 6, 7):
        r = slice(rows[b], rows[b + 1])
        np.testing.assert_array_equal(out[r], want[r], err_msg=f"block {b}")


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("limit", [None, 10, 2500, 0])
def test_kept_positions_give_numpy_rows(parallel, limit, monkeypatch):
    """The whole call, on the calling thread's blocks driver or on numba's threads,
    into new and given outputs, with ``max_count`` cutting inside a kept block, and
    a 3-d input (its positions unravelled): numpy.argwhere's rows and count."""
    monkeypatch.setattr(config, "CPU_NONZERO_BLOCK", BLOCK)
    monkeypatch.setattr(config, "CPU_PARALLEL_MIN", 0 if parallel else 1 << 40)
    monkeypatch.setattr(config, "CPU_LOAD_CHECK", 0)
    x = _input(np.random.default_rng(1))
    for shape in [x.shape, (2, 4, x.size // 8)]:
        y = x[: x.size // 8 * 8].reshape(shape) if len(shape) > 1 else x
        want = np.argwhere(y)
        n = len(want) if limit is None else min(limit, len(want))
        count, coords = dmlnumba.nonzero_coordinates(y, max_count=limit)
        assert int(count[0]) == len(want)
        np.testing.assert_array_equal(coords[:n], want[:n])
        oc, ox = np.empty(1, np.uint32), np.full(coords.shape, 9, np.uint32)
        dmlnumba.nonzero_coordinates(y, max_count=limit, out_count=oc, out_coordinates=ox)
        assert int(oc[0]) == len(want)
        np.testing.assert_array_equal(ox[:n], want[:n])


def test_no_positions_kept_for_huge_blocks():
    assert kept_slots(1 << 24) > 0 and kept_slots((1 << 24) + 1) == 0
    assert kept_slots(1 << 16) > (1 << 16) // KEEP_OF


@pytest.mark.skipif(
    os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="a C function called by address"
)
def test_the_serial_blocks_driver_gives_room_for_kept_positions(monkeypatch):
    """The blocks driver on the calling thread (a jitted driver of its own) gives the
    count pass room too: a stand-in write pass, called with the driver's argument
    block, reads each block's number kept (its rows come from no read of the input)."""
    from numba import carray, cfunc, types

    from dmlnumba.cpu import nonzero_launch, process
    from dmlnumba.cpu.llvm import pointer
    from dmlnumba.cpu.nonzero import _fresh_rows_block
    from dmlnumba.cpu.nonzero_kernels import nonzero as blocks_driver
    from dmlnumba.params import NONZERO_PASS, size

    monkeypatch.setattr(config, "CPU_NONZERO_BLOCK", BLOCK)
    A, args = NONZERO_PASS, size(NONZERO_PASS)

    @cfunc(types.int64(types.CPointer(types.int64), types.int64))
    def held(ap, b):  # out[b]: block b's number kept (-2: no room given)
        a = carray(ap, args)
        out = carray(pointer(a[A.out], np.int64), a[A.out_n])
        n = a[A.out_n]
        out[b] = carray(pointer(a[A.kept], np.int64), n)[b] if a[A.kept] != 0 else -2
        return 0

    x = _input(np.random.default_rng(2))
    p = _fresh_rows_block(x, 0, (1,), 1, x.size)
    nblocks = int(p[NONZERO_CPU.nblocks])
    fc = nonzero_launch.count_pass(process.kernels(), 32, p)
    out, count = np.full(nblocks, -3, np.int64), np.empty(1, np.uint32)
    assert blocks_driver(fc, held.address, x.view(np.uint32), p, out, count)
    assert count[0] == np.count_nonzero(x)
    for b, expect in enumerate([True, True, False, False, False, True, True, True]):
        mine = np.count_nonzero(x[b * BLOCK : (b + 1) * BLOCK])
        assert out[b] == (mine if expect else -1), b
