"""Warp primitives for the CUDA kernels, one interface for the GPU and the simulator.

On a GPU each is the hardware instruction (a vote, a shuffle, a 16-byte load, a
vector store, a high-word multiply), or a constant of a pointer's type (its item width).
Under numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``), which has no warp
instructions, each is a stand-in through a shared array of its own.  The
stand-ins synchronize the block, so the kernels call every primitive at a point
that all threads of a block reach together (block-uniform control flow); on a
GPU that is more than the warp-uniformity they need, never less.

This is the only module that knows about the simulator's limits: the kernels
(:mod:`dmlnumba.gpu.slice_kernel`, :mod:`dmlnumba.gpu.nonzero_kernel`) call these and
have no simulator branches.
"""

import numpy as np
from numba import cuda, int32, int64, uint32, uint64

from .sim import SIM

FULL = 0xFFFFFFFF

#: ``cuda.jit(device=True)``, cached on disk on a GPU (the simulator has no cache).
device = cuda.jit(device=True, cache=not SIM)
#: The nonzero kernel's steps (:mod:`dmlnumba.gpu.nonzero_count`,
#: :mod:`dmlnumba.gpu.nonzero_write`): module-level device functions inlined into
#: the kernel at the NVVM level, where the variant constants the kernel passes them
#: fold (the kernel's disk cache keeps the result).
agent = cuda.jit(device=True) if SIM else cuda.jit(device=True, forceinline=True)

#: The most threads a simulated block may have (the stand-ins' shared arrays).
_SIM_THREADS = 1024

if SIM:
    import threading
    import weakref

    # A launch's simulated CUDA module -> {warp: its lanes' barrier} (sync_warp)
    _barriers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
    _barriers_lock = threading.Lock()

    @cuda.jit(device=True)
    def ballot(flag):
        """Bit ``i``: lane ``i`` of this warp passed a true ``flag``."""
        scratch = cuda.shared.array(_SIM_THREADS, int32)
        tid = cuda.threadIdx.x
        scratch[tid] = 1 if flag else 0
        cuda.syncthreads()
        base = tid - (tid & 31)
        m = 0
        for i in range(32):
            if scratch[base + i]:
                m |= 1 << i
        cuda.syncthreads()
        return uint32(m)

    @cuda.jit(device=True)
    def all_lanes(flag):
        """Whether every lane passed a true ``flag`` (here: every thread of the
        block, a stricter vote that is still uniform within each warp)."""
        return cuda.syncthreads_and(1 if flag else 0) != 0

    @cuda.jit(device=True)
    def shfl_down(x, d):
        """Lane ``lane + d``'s ``x`` (a uint32), or this lane's own past lane 31."""
        scratch = cuda.shared.array(_SIM_THREADS, np.uint32)
        tid = cuda.threadIdx.x
        scratch[tid] = x
        cuda.syncthreads()
        r = scratch[tid + d] if (tid & 31) + d < 32 else x
        cuda.syncthreads()
        return uint32(r)

    @cuda.jit(device=True)
    def shfl_idx(x, j):
        """Lane ``j``'s ``x`` (a uint32).  Like :func:`sync_warp`, this stand-in may
        sit in warp-uniform control flow: it waits on the warp's barrier."""
        scratch = cuda.shared.array(_SIM_THREADS, np.uint32)
        tid = cuda.threadIdx.x
        scratch[tid] = x
        sync_warp()
        r = scratch[tid - (tid & 31) + j]
        sync_warp()
        return uint32(r)

    @cuda.jit(device=True)
    def warp_sum(x):
        """The sum of ``x`` (an int32-sized count) over the warp, in every lane."""
        scratch = cuda.shared.array(_SIM_THREADS, np.int64)
        tid = cuda.threadIdx.x
        scratch[tid] = x
        cuda.syncthreads()
        base = tid - (tid & 31)
        t = 0
        for i in range(32):
            t += scratch[base + i]
        cuda.syncthreads()
        return int64(t)

    @cuda.jit(device=True)
    def sync_warp():
        """Wait for the other lanes of this warp.  The simulator runs a block's
        threads freely and has no warp barrier, so each warp gets a thread barrier
        of its own, per launch (here ``cuda`` is the launch's simulated module;
        a launch runs its blocks one at a time, launches from several threads run
        at once).  Unlike the other stand-ins, this one may sit in warp-uniform
        control flow."""
        _warp_barrier(cuda, cuda.threadIdx.x >> 5).wait(timeout=600)

    @cuda.jit(device=True)
    def local_array(n, dtype):
        """``cuda.local.array`` itself (a simulated thread's array is NumPy's)."""
        return cuda.local.array(n, dtype)

    def _warp_barrier(launch, w):
        with _barriers_lock:
            per = _barriers.get(launch)
            if per is None:
                per = _barriers[launch] = {}
            b = per.get(w)
            if b is None:
                b = per[w] = threading.Barrier(32)
        return b

    def umulhi32(a, b):
        """The high 32 bits of the 64-bit product of ``a`` and ``b`` (uint32s)."""
        return np.uint32((int(a) * int(b)) >> 32)

    def umulhi(a, b):
        """The high 64 bits of the 128-bit product of ``a`` and ``b`` (64-bit
        integers read as unsigned)."""
        m = (1 << 64) - 1
        return np.uint64(((int(a) & m) * (int(b) & m)) >> 64)

    def load16(src, i):
        """16 bytes from element ``i`` on: two little-endian 64-bit words."""
        w = src.itemsize
        a = b = 0
        for j in range(16 // w):
            v = int(src[i + j]) << (8 * ((j * w) % 8))
            if j * w < 8:
                a |= v
            else:
                b |= v
        return np.uint64(a), np.uint64(b)

    def aligned4(dst, i):
        """Whether element ``i`` lies on :func:`store4`'s alignment: here where ``i`` is a
        multiple of 4, so that tests reach both paths."""
        return i % 4 == 0

    def store4(dst, i, a, b, c, d):
        """``a, b, c, d`` into elements ``i`` to ``i + 3`` of ``dst``."""
        dst[i], dst[i + 1], dst[i + 2], dst[i + 3] = a, b, c, d

    def load_volatile(ary, i):
        """Element ``i`` of ``ary`` (one simulated thread's read is whole)."""
        return ary[i]

    def item_bits(a):
        """The bits of an item of the simulated array ``a``."""
        return 8 * a.dtype.itemsize

else:
    from llvmlite import ir as _ir
    from numba import types as _types
    from numba.cuda import libdevice as _libdevice
    from numba.cuda.extending import intrinsic as _intrinsic
    from numba.extending import intrinsic as _generic_intrinsic

    @device
    def ballot(flag):
        return uint32(cuda.ballot_sync(FULL, flag))

    @device
    def all_lanes(flag):
        return cuda.all_sync(FULL, flag)

    @device
    def shfl_down(x, d):
        return uint32(cuda.shfl_down_sync(FULL, int32(x), d))

    @device
    def shfl_idx(x, j):
        return uint32(cuda.shfl_sync(FULL, int32(x), j))

    @device
    def warp_sum(x):
        x = int32(x)
        for d in (16, 8, 4, 2, 1):
            x += cuda.shfl_xor_sync(FULL, x, d)
        return int64(x)

    @device
    def sync_warp():
        cuda.syncwarp(FULL)

    @device
    def umulhi32(a, b):
        return uint32(_libdevice.umulhi(int32(a), int32(b)))

    @device
    def umulhi(a, b):
        return uint64(_libdevice.umul64hi(int64(a), int64(b)))

    @_intrinsic
    def load16(typingctx, ptr, idx):
        """16 bytes from element ``idx`` of ``ptr`` on, in one vector load
        (``ld.global.v2.u64``; the address must be 16-byte aligned): two
        little-endian 64-bit words."""
        sig = _types.UniTuple(_types.uint64, 2)(ptr, idx)

        def codegen(context, builder, signature, args):
            p, i = args
            vty = _ir.VectorType(_ir.IntType(64), 2)
            v = builder.load(builder.bitcast(builder.gep(p, [i]), vty.as_pointer()), align=16)
            words = [builder.extract_element(v, _ir.Constant(_ir.IntType(32), k)) for k in range(2)]
            return context.make_tuple(builder, signature.return_type, words)

        return sig, codegen

    def _vector_bytes(item):
        """The bytes of one vector store of 4 items of numba type ``item`` (at most 16:
        a store of 4 64-bit items is two of 16 bytes)."""
        return min(16, item.bitwidth // 2)

    @_intrinsic
    def aligned4(typingctx, ptr, idx):
        """Whether element ``idx`` of the raw pointer ``ptr`` lies on a multiple of
        :func:`store4`'s alignment (4 items' bytes, at most 16)."""
        mask = _vector_bytes(ptr.dtype) - 1

        def codegen(context, builder, signature, args):
            i = context.cast(builder, args[1], signature.args[1], _types.int64)
            addr = builder.ptrtoint(builder.gep(args[0], [i]), _ir.IntType(64))
            low = builder.and_(addr, _ir.Constant(_ir.IntType(64), mask))
            return builder.icmp_unsigned("==", low, _ir.Constant(_ir.IntType(64), 0))

        return _types.boolean(ptr, idx), codegen

    @_intrinsic
    def store4(typingctx, ptr, idx, a, b, c, d):
        """``a, b, c, d`` into elements ``idx`` to ``idx + 3`` of the raw pointer ``ptr``
        in one vector store (``st.global.v4`` of 1- to 4-byte items, two ``v2.u64`` of
        8-byte ones), where :func:`aligned4` holds."""
        item = ptr.dtype
        align = _vector_bytes(item)

        def codegen(context, builder, signature, args):
            i = context.cast(builder, args[1], signature.args[1], _types.int64)
            vty = _ir.VectorType(context.get_value_type(item), 4)
            v = _ir.Constant(vty, _ir.Undefined)
            for k, (val, ty) in enumerate(zip(args[2:], signature.args[2:])):
                val = context.cast(builder, val, ty, item)
                v = builder.insert_element(v, val, _ir.Constant(_ir.IntType(32), k))
            dst = builder.bitcast(builder.gep(args[0], [i]), vty.as_pointer())
            builder.store(v, dst, align=align)
            return context.get_dummy_value()

        return _types.void(ptr, idx, a, b, c, d), codegen

    @_intrinsic
    def load_volatile(typingctx, ary, idx):
        """Element ``idx`` of the 64-bit array ``ary`` by a volatile load
        (``ld.volatile``, every architecture; a relaxed load from Volta on): a word
        another block stored or exchanged there, read whole and never from a stale
        L1 copy, without an atomic's round trip through L2's atomic unit
        (docs/PERFORMANCE.md, "Specialised paths")."""
        sig = _types.uint64(ary, idx)

        def codegen(context, builder, signature, args):
            a = context.make_array(signature.args[0])(context, builder, args[0])
            ptr = builder.gep(a.data, [args[1]])
            fnty = _ir.FunctionType(_ir.IntType(64), [ptr.type])
            load = _ir.InlineAsm(fnty, "ld.volatile.u64 $0, [$1];", "=l,l", side_effect=True)
            return builder.call(load, [ptr])

        return sig, codegen

    @_intrinsic
    def local_array(typingctx, n, dtype):
        """A thread's array of ``n`` (a constant) items of the numba type ``dtype``, as
        ``cuda.local.array`` makes one (in registers where its indices are constants,
        else in local memory) but without its zero fill: numba-cuda stores zeros over
        every local array at kernel entry, and where an array stays in local memory
        that is a store of its whole size by every thread, which reaches L2 and DRAM
        as write traffic beside a streaming kernel's reads (docs/PERFORMANCE.md).  For
        arrays whose every item is written before it is read."""
        count = getattr(n, "literal_value", None)
        item = getattr(dtype, "instance_type", None)
        if type(count) is not int or count < 1 or not isinstance(item, _types.Integer):
            return None  # (numba tries again with the literal count)
        arrty = _types.Array(item, 1, "C")
        width = np.dtype(str(item)).itemsize  # (the numba type's name is NumPy's)

        def codegen(context, builder, signature, args):
            llitem = context.get_data_type(item)
            with builder.goto_entry_block():  # as cuda.local.array's, less the store
                ptr = builder.alloca(_ir.ArrayType(llitem, count))
            ary = context.make_array(arrty)(context, builder)
            size = context.get_constant(_types.intp, width)
            context.populate_array(
                ary,
                data=builder.bitcast(ptr, ary.data.type),
                shape=[context.get_constant(_types.intp, count)],
                strides=[size],
                itemsize=size,
                meminfo=None,
            )
            return ary._getvalue()

        return arrty(n, dtype), codegen

    @_generic_intrinsic
    def item_bits(typingctx, ptr):
        """The bits of an item of the raw pointer ``ptr``: a constant of its type, so
        that a branch on it folds away in each item width's kernel."""
        bits = ptr.dtype.bitwidth

        def codegen(context, builder, signature, args):
            return context.get_constant(_types.int64, bits)

        return _types.int64(ptr), codegen
