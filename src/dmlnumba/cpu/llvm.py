"""LLVM intrinsics for the CPU kernels: a software prefetch, bit counts (one
instruction each where the CPU has it), calls of C functions by address and scratch
arrays on the stack, with plain-Python stand-ins where numba's JIT is disabled."""

import ctypes
from typing import Any

import numpy as np
from llvmlite import ir
from numba import config as _nbconfig
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, arr, idx):
    """Hint the CPU to load the cache line holding ``arr[idx]`` (``llvm.prefetch``,
    read, keep in all levels).  A hint only: it never faults and reads nothing
    into the program, so an address is not bounds-checked."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        if getattr(i8p, "is_opaque", False):  # opaque pointers (LLVM 15 and later)
            name = "llvm.prefetch.p0"
        else:
            name = "llvm.prefetch.p0i8"
        ptr = builder.bitcast(ptr, i8p)
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), name
        )
        builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


def _bit_count(op):
    """An intrinsic: llvmlite's ``op`` (``ctpop``, ``cttz`` or ``ctlz``) of a uint64,
    as an int64 (one instruction where the CPU has it)."""

    @intrinsic
    def count(typingctx, x):
        def codegen(context, builder, signature, args):
            if op == "ctpop":
                return builder.ctpop(args[0])
            return getattr(builder, op)(args[0], ir.Constant(ir.IntType(1), 0))

        return types.int64(types.uint64), codegen

    return count


#: Set bits, trailing zeros and leading zeros of a uint64 (64 where it is 0).
popcount = _bit_count("ctpop")
trailing_zeros = _bit_count("cttz")
leading_zeros = _bit_count("ctlz")


@intrinsic
def _data_pointer(typingctx, arr):
    """A pointer to ``arr``'s first item, for a C function's pointer parameter."""

    def codegen(context, builder, signature, args):
        return context.make_array(signature.args[0])(context, builder, args[0]).data

    return types.CPointer(arr.dtype)(arr), codegen


data_pointer: Any = _data_pointer  # called as data_pointer(arr) (typingctx is numba's)


@intrinsic
def _address(typingctx, arr):
    """The address of ``arr``'s first item as an int64, for a block of a pass's
    arguments (:mod:`dmlnumba.cpu.blocks`)."""

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.ptrtoint(data, ir.IntType(64))

    return types.int64(arr), codegen


@intrinsic
def _pointer(typingctx, address, item):
    """The int64 ``address`` as a pointer to items of the NumPy scalar type ``item``
    (a class, such as ``np.uint32``), for ``carray``."""
    ty = types.CPointer(item.instance_type)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(ty))

    return ty(address, item), codegen


address: Any = _address
pointer: Any = _pointer

_UINTS = {8: types.uint8, 16: types.uint16, 32: types.uint32, 64: types.uint64}
#: The unsigned NumPy types of the flat views, by bit width (a pass's item type).
UINTS = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def item_pointer(bits):
    """The numba type of a pointer to ``bits``-bit items (the flat views' unsigned
    integers), for a C function's signature."""
    return types.CPointer(_UINTS[bits])


def _c_call(restype):
    """An intrinsic ``call(address, *args)``: the C function at ``address`` (an
    integer, from :func:`~dmlnumba.cpu.compiling.c_function`) called with ``args``,
    returning a ``restype``.  (numba's own first-class functions dispatch a function
    object on every call, which costs more than a small call's work; an integer
    costs what any argument does.)"""

    @intrinsic
    def call(typingctx, address, *args):
        # numba passes the arguments as one StarArgTuple, or one by one
        if len(args) == 1 and isinstance(args[0], types.StarArgTuple):
            tup = args[0]
        else:
            tup = types.StarArgTuple(args)

        def codegen(context, builder, signature, llargs):
            argtys = signature.args[1]
            values = [builder.extract_value(llargs[1], i) for i in range(len(argtys))]
            ret = ir.VoidType() if restype == types.void else context.get_value_type(restype)
            fnty = ir.FunctionType(ret, [context.get_value_type(t) for t in argtys])
            r = builder.call(builder.inttoptr(llargs[0], fnty.as_pointer()), values)
            return context.get_dummy_value() if restype == types.void else r

        return restype(address, tup), codegen

    return call


#: C functions called by address: returning nothing, or an int64.
call_void = _c_call(types.void)
call_int64 = _c_call(types.int64)


@intrinsic
def _call_pass(typingctx, address, args, b):
    """The pass at ``address`` (a C function ``int64(int64 *args, int64 b)``, see
    :mod:`dmlnumba.cpu.blocks`) called with the data of the int64 array ``args`` and
    ``b``.  The array itself is this call's argument, not a pointer taken before it:
    numba frees an array after its last use, which a pointer is not."""

    def codegen(context, builder, signature, llargs):
        data = context.make_array(signature.args[1])(context, builder, llargs[1]).data
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(i64, [data.type, i64])
        return builder.call(builder.inttoptr(llargs[0], fnty.as_pointer()), [data, llargs[2]])

    return types.int64(address, args, types.int64), codegen


call_pass: Any = _call_pass


@intrinsic
def _stack_array(typingctx, like, n):
    """A 1-d array of ``n`` (a compile-time constant) items of ``like``'s dtype in the
    calling function's stack frame, allocated once in its entry block: a kernel's
    scratch (an odometer, a position buffer) without numba's allocator, whose
    ``np.empty`` costs a first call about 0.1 s of compile per item type
    (docs/PERFORMANCE.md, "Startup and compile time") and each call an allocation.
    Lives until the C function (whose body inlines every helper) returns."""
    if not isinstance(n, types.IntegerLiteral):
        return None
    arrty = types.Array(like.dtype, 1, "C")
    count = n.literal_value

    def codegen(context, builder, signature, args):
        from numba.np.arrayobj import populate_array

        item = context.get_data_type(like.dtype)
        size = context.get_constant(types.intp, context.get_abi_sizeof(item))
        ary = context.make_array(arrty)(context, builder)
        populate_array(
            ary,
            data=cgutils.alloca_once(builder, item, size=count),
            shape=[context.get_constant(types.intp, count)],
            strides=[size],
            itemsize=size,
            meminfo=None,
        )
        return ary._getvalue()

    return arrty(like, n), codegen


stack_array: Any = _stack_array


#: Under ``NUMBA_DISABLE_JIT``, the passes that stand for C functions, by the handle
#: :func:`~dmlnumba.cpu.compiling.c_function` gives in an address's place.
python_functions: dict[int, Any] = {}

# Plain Python (debugging): an intrinsic cannot be called there.  (getattr: numba sets
# its config attributes at run time, out of its type stubs' sight.)
if getattr(_nbconfig, "DISABLE_JIT", 0):

    def prefetch(arr, idx):  # type: ignore[misc]  # a plain function in the intrinsic's place
        pass

    def popcount(x):
        return bin(int(x)).count("1")

    def trailing_zeros(x):
        x = int(x)
        return (x & -x).bit_length() - 1 if x else 64

    def leading_zeros(x):
        return 64 - int(x).bit_length()

    def data_pointer(arr):  # type: ignore[misc]
        return arr.ctypes.data_as(ctypes.POINTER(np.ctypeslib.as_ctypes_type(arr.dtype)))

    def address(arr):  # type: ignore[misc]
        return arr.ctypes.data

    def pointer(address, item):  # type: ignore[misc]
        return ctypes.cast(int(address), ctypes.POINTER(np.ctypeslib.as_ctypes_type(item)))

    # The passes' unsigned position arithmetic wraps by design, which NumPy's scalars
    # report as overflow (an error under ``-W error``): not here.
    def call_void(fn, *args):  # type: ignore[misc]  # fn: the Python function's handle
        with np.errstate(over="ignore"):
            python_functions[int(fn)](*args)

    def call_int64(fn, *args):  # type: ignore[misc]
        with np.errstate(over="ignore"):
            return python_functions[int(fn)](*args)

    def call_pass(fn, args, b):  # type: ignore[misc]
        with np.errstate(over="ignore"):
            return python_functions[int(fn)](data_pointer(args), b)

    def stack_array(like, n):
        return np.empty(n, like.dtype)
