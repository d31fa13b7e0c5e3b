"""Device memory of the CUDA target that is not the caller's arrays: the device's
stream-ordered pool (and, inside a capture, graph allocations), look-back buffers
from the caller's allocator, memsets and host-to-device copies, all on the call's
stream."""

from typing import Any

from numba import cuda

from .sim import SIM
from .streams import (
    capturing,
    core_stream,
    refuse_capture,
    torch_current_stream,
    torch_module,
    torch_stream,
)

_pools: dict = {}  # device -> cuda.core DeviceMemoryResource (stream-ordered pool)
_graph_pools: dict = {}  # device -> cuda.core GraphMemoryResource (inside a capture)
_contexts: dict = {}  # device -> numba context (for numba arrays over pool memory)


_device_ids: dict = {}  # current context handle -> its device's index


def device_id(device):
    """``device``, or where it is None the current context's device (numba's
    query of it, slow next to a launch, made once per context)."""
    if device is not None:
        return device
    ctx = current_context()
    dev = _device_ids.get(ctx)
    if dev is None:
        dev = cuda.get_current_device().id
        if ctx:
            _device_ids[ctx] = dev
    return dev


def pool_buffer(nbytes, handle, device=None, func=None):
    """A cuda.core buffer of ``nbytes`` from the device's stream-ordered memory pool,
    allocated on the stream.  Inside a capture (where the pool refuses), a graph
    allocation for a call's own scratch, freed in the graph by
    ``buffer.close(core_stream(handle))``; for an output (``func`` names the
    call), a ValueError: memory that a graph allocates is the graph's, and an
    array over it would outlive it."""
    dev = device_id(device)
    try:
        return pool(dev).allocate(max(nbytes, 1), stream=core_stream(handle))
    except RuntimeError:
        if not capturing(handle):
            raise
    if func is not None:
        refuse_capture(handle, func, "allocates new numba device arrays (pass out= arrays)")
    mr = _graph_pools.get(dev)
    if mr is None:
        from cuda.core import GraphMemoryResource

        mr = _graph_pools[dev] = GraphMemoryResource(dev)
    return mr.allocate(max(nbytes, 1), stream=core_stream(handle))


def pool(dev):
    """The stream-ordered pool of device ``dev`` (the driver's current one), first
    opened to the devices that can reach it (:func:`_open_to_peers`)."""
    mr = _pools.get(dev)
    if mr is None:
        from cuda.core import DeviceMemoryResource

        mr = DeviceMemoryResource(dev)
        _open_to_peers(mr.handle, dev)
        _pools[dev] = mr
    return mr


def _open_to_peers(handle, dev):
    """Let every other device with peer access to ``dev`` read and write the memory of
    its pool ``handle``.  A pool's memory is its own device's alone until then: a
    numba result there, copied to the host by numba with another device's context
    current (as numba's own memory can be), failed with ``CUDA_ERROR_INVALID_VALUE``.
    Access, once given, holds for every allocation of the pool, other libraries'
    included.  Where the driver refuses, the pool stays its device's alone: that
    costs only the copies above, which then fail as loudly as before."""
    from cuda.bindings import driver

    err, n = driver.cuDeviceGetCount()
    access = []
    for peer in range(0 if err else n):
        if peer == dev:
            continue
        err, can = driver.cuDeviceCanAccessPeer(peer, dev)
        if not err and can:
            a = driver.CUmemAccessDesc()
            a.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            a.location.id = peer
            a.flags = driver.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
            access.append(a)
    if access:
        driver.cuMemPoolSetAccess(handle, access, len(access))


def numba_context(dev):
    """numba's context object of device ``dev`` (its primary context), whichever
    device is current."""
    ctx = _contexts.get(dev)
    if ctx is None:
        with cuda.gpus[dev]:
            ctx = _contexts[dev] = cuda.current_context()
    return ctx


def _context_query():
    """The query of the current context's handle as an int (0 where none is
    current): ``cuCtxGetCurrent`` through cuda.bindings (the cheapest), or numba's slower
    view of the same with older bindings; under the simulator, a constant."""
    if SIM:
        return lambda: 1
    try:
        from cuda.bindings.driver import cuCtxGetCurrent
    except ImportError:  # pragma: no cover
        return lambda: cuda.current_context().handle.value
    return lambda: int(cuCtxGetCurrent()[1])


current_context = _context_query()


def scratch(lib, dev):
    """``(alloc, release)`` for a call's look-back buffer on device ``dev`` (for
    PyTorch, its device index; otherwise a view's ``device``: None for the current
    one): ``alloc(words, handle)`` gives ``(address, keep)`` of ``words`` uint64 on
    the device, for use on that stream, and ``release(keep, handle)`` gives it back
    after the launch.  A
    PyTorch input's buffer comes from PyTorch's caching allocator (inside
    ``torch.cuda.graph``, from the graph's own pool); any other from the device's
    stream-ordered pool, freed on the stream after the launch (inside a capture,
    a graph allocation freed in the graph)."""
    if lib == "torch":
        torch = torch_module()
        new_empty = torch.empty(0, dtype=torch.int64, device=dev).new_empty

        def alloc_torch(words, handle):
            if handle == torch_current_stream(torch)(dev):
                t = new_empty(words)
            else:
                with torch.cuda.stream(torch_stream(torch, handle, dev)):
                    t = new_empty(words)
            return t.data_ptr(), t

        return alloc_torch, _keep_until_freed

    def alloc_pool(words, handle):
        buf = pool_buffer(8 * words, handle, dev)
        return int(buf.handle), buf

    return alloc_pool, _close_on


def _keep_until_freed(keep, handle):
    """A PyTorch buffer is freed when its tensor is: PyTorch's allocator reuses the
    block only for work ordered after this stream's."""


def _close_on(buf, handle):
    buf.close(core_stream(handle))


def check(err, what):
    """Raise where the CUDA driver call ``what`` returned the error ``err`` (a
    ``CUresult``, false for ``CUDA_SUCCESS`` alone)."""
    if err:
        raise RuntimeError(f"dmlnumba: {what} failed: {err!r}")


def zero(ptr, nbytes, handle):
    """Zero ``nbytes`` (a multiple of 4) at ``ptr`` on the stream: a memset, which a
    CUDA graph captures."""
    from cuda.bindings import driver

    check(driver.cuMemsetD32Async(ptr, 0, nbytes // 4, handle)[0], "cuMemsetD32Async")


def zero_bytes(ptr, nbytes, handle):
    """Zero ``nbytes`` at ``ptr`` on the stream: 4-byte words where the address and
    size allow, else bytes (a memset either way, which a CUDA graph captures)."""
    from cuda.bindings import driver

    if ptr % 4 == 0 and nbytes % 4 == 0:
        zero(ptr, nbytes, handle)
    else:
        check(driver.cuMemsetD8Async(ptr, 0, nbytes, handle)[0], "cuMemsetD8Async")


_driver: Any = None  # cuda.bindings.driver, bound by the first staged input
_pool_handles: dict = {}  # device -> its stream-ordered pool's CUmemoryPool


def upload(host, handle, device=None):
    """A C-contiguous NumPy array copied to new memory of the device's stream-ordered
    pool (:func:`stage`) on the stream: its address.  The copy reads pageable
    memory, so the driver has taken the bytes when this returns; the array itself
    is the copy's source (its buffer, which the bindings read without the ctypes
    object of ``host.ctypes.data``, 0.9 us a call)."""
    ptr = stage(host.nbytes, handle, device)
    if host.nbytes:
        (err,) = _driver.cuMemcpyHtoDAsync(ptr, host, host.nbytes, handle)
        check(err, "cuMemcpyHtoDAsync")
    return ptr


def stage(nbytes, handle, device=None):
    """The address of ``nbytes`` (at least 1) of the device's stream-ordered pool,
    allocated on the stream, for a call's staged input; :func:`unstage` gives them
    back.  The driver's calls themselves, not cuda.core's buffer objects (1.0 us less
    a call, docs/PERFORMANCE.md).  Never inside a capture: the callers refuse first."""
    global _driver
    if _driver is None:
        from cuda.bindings import driver

        _driver = driver
    dev = device_id(device)
    ph = _pool_handles.get(dev)
    if ph is None:
        ph = _pool_handles[dev] = pool(dev).handle
    err, ptr = _driver.cuMemAllocFromPoolAsync(max(nbytes, 1), ph, handle)
    check(err, "cuMemAllocFromPoolAsync")
    return int(ptr)


def unstage(ptr, handle):
    """Give the staged memory at ``ptr`` back to its pool on the stream, after the
    work queued there (which reads it)."""
    check(_driver.cuMemFreeAsync(ptr, handle)[0], "cuMemFreeAsync")
