"""Raw CUDA handles for the real platform: callers' streams and events, page-locked host
memory, cooperative kernel nodes, and kernel-node parameters held in ctypes storage for
fast re-pointing (through cuda.bindings, where cuda.core has no API or measured slower)."""
from __future__ import annotations

import ctypes
from typing import Any

from ...errors import TracegraphError


def _core() -> Any:
    import cuda.core as core
    return core


_streams: dict[int, Any] = {}


def _as_int(value: Any) -> int | None:
    """A raw handle as an int: ints, ctypes pointers, cuda.bindings handles (int() gives
    the handle, not its address), or objects that wrap one in `.handle`."""
    if value is None:
        return None
    if isinstance(value, int):
        return value
    if hasattr(value, "value") and not hasattr(value, "getPtr"):  # ctypes c_void_p
        return int(value.value or 0)
    if hasattr(value, "getPtr"):  # cuda.bindings CUstream / CUevent
        return int(value)
    if hasattr(value, "handle"):
        return _as_int(value.handle)
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def stream_handle(stream: Any) -> int:
    """The raw cudaStream_t of a Numba, CuPy, PyTorch or cuda.core stream, or an int."""
    if stream is None or stream == 0:
        return 0
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    for attr in ("cuda_stream", "ptr", "handle"):  # torch, cupy, numba / cuda.core
        value = _as_int(getattr(stream, attr, None))
        if value is not None:
            return value
    value = _as_int(stream)
    if value is None:
        raise TracegraphError(f"cannot use a {type(stream).__name__} as a CUDA stream",
                              fix="pass a Numba, CuPy, PyTorch or cuda.core stream, or a raw "
                                  "cudaStream_t as an int")
    return value


def core_stream(stream: Any) -> Any:
    handle = stream_handle(stream)
    s = _streams.get(handle)
    if s is None:
        core = _core()
        s = core.LEGACY_DEFAULT_STREAM if handle == 0 else core.Stream.from_handle(handle)
        _streams[handle] = s
    return s


def event_handle(event: Any) -> int:
    """The raw CUevent of a cuda.core, Numba, CuPy or PyTorch event."""
    for attr in ("cuda_event", "ptr", "handle"):
        value = _as_int(getattr(event, attr, None))
        if value:
            return value
    raise TracegraphError(f"cannot use a {type(event).__name__} as a CUDA event",
                          fix="pass a cuda.core, Numba, CuPy or PyTorch event")


_DRIVER: list[Any] = []


def driver() -> Any:
    """cuda.bindings' driver module, imported on first use (the CPU stand-in needs none);
    kept, since graph building asks for it per node and edge."""
    if not _DRIVER:
        from cuda.bindings import driver
        _DRIVER.append(driver)
    return _DRIVER[0]


def copy_on_stream(dst: int, src: int, nbytes: int, stream: Any) -> None:
    """nbytes of device memory from src to dst, enqueued on `stream` (None: the legacy
    default stream) without waiting for the GPU (a padded call's rows: padding.py)."""
    err = driver().cuMemcpyDtoDAsync(dst, src, nbytes, stream_handle(stream))[0]
    check(err, "cuMemcpyDtoDAsync")


def synchronize(stream: Any) -> None:
    """Wait until the work enqueued on `stream` (None: the legacy default stream) is done."""
    core_stream(stream).sync()


def pinned(address: int, nbytes: int) -> bool:
    """Is [address, address + nbytes) page-locked host memory the GPU can copy directly?"""
    drv = driver()
    attr = drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE
    host = drv.CUmemorytype.CU_MEMORYTYPE_HOST
    for a in (address, address + max(nbytes, 1) - 1):
        err, kind = drv.cuPointerGetAttribute(attr, a)
        if err != drv.CUresult.CUDA_SUCCESS or int(kind) != int(host):
            return False
    return True


class KernelPatch:
    """A kernel node's parameters in ctypes storage we own, so re-pointing writes an
    8-byte slot and makes one driver call (cuGraphExecKernelNodeSetParams) instead of
    re-marshalling every argument through cuda.core."""

    def __init__(self, exec_handle: Any, node_handle: Any, args: list):
        drv = driver()
        err, params = drv.cuGraphKernelNodeGetParams(node_handle)
        if err != drv.CUresult.CUDA_SUCCESS:
            raise RuntimeError(err.name)
        self.values = [ctype_value(a) for a in args]
        self.pointers = (ctypes.c_void_p * len(args))(*[ctypes.addressof(v) for v in self.values])
        params.kernelParams = ctypes.addressof(self.pointers)
        params.extra = 0
        self.params = params
        self.exec_handle = exec_handle
        self.node_handle = node_handle

    def apply(self, slots: list, base: int) -> None:
        for pos, offset in slots:
            self.values[pos].value = base + offset
        self._set()

    def apply_values(self, values: list[tuple[int, Any]]) -> None:
        """New values (dynamic scalars) for these parameter positions."""
        for pos, value in values:
            self.values[pos].value = value
        self._set()

    def _set(self) -> None:
        drv = driver()
        err, = drv.cuGraphExecKernelNodeSetParams(self.exec_handle, self.node_handle,
                                                     self.params)
        if err != drv.CUresult.CUDA_SUCCESS:
            raise RuntimeError(err.name)


def ctype_value(arg: Any) -> Any:
    """A kernel parameter in ctypes storage: ints as 8 bytes (pointers and Numba's intp
    fields), ctypes scalars as they are, a conditional node's condition as its handle."""
    if isinstance(arg, bool):
        return ctypes.c_bool(arg)
    if isinstance(arg, int):
        return ctypes.c_int64(arg) if arg < 2**63 else ctypes.c_uint64(arg)
    if isinstance(arg, ctypes._SimpleCData):
        return type(arg)(arg.value)
    handle = getattr(arg, "handle", None)  # cuda.core's GraphCondition
    if handle is not None:
        return ctypes.c_uint64(int(handle))
    raise TypeError(f"no kernel-parameter storage for a {type(arg).__name__}")


def check(err: Any, call: str) -> None:
    """Raise on a cuda.bindings error code."""
    from cuda.bindings import driver
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{call} returned {err.name}")


def set_cooperative(gnode: Any) -> None:
    """Make a kernel node a cooperative launch (cuda.core refuses to create one:
    cuda-python#2421); the executable keeps the attribute on re-pointing."""
    from cuda.bindings import driver
    value = driver.CUkernelNodeAttrValue()
    value.cooperative = 1
    (err,) = driver.cuGraphKernelNodeSetAttribute(
        gnode.handle, driver.CUkernelNodeAttrID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE, value)
    check(err, "cuGraphKernelNodeSetAttribute")


def set_priority(gnode: Any, priority: int) -> None:
    """A kernel node's scheduling priority (honoured when the graph is instantiated with
    use_node_priority), clamped to the context's stream-priority range as the driver does."""
    from cuda.bindings import driver
    err, least, greatest = driver.cuCtxGetStreamPriorityRange()
    check(err, "cuCtxGetStreamPriorityRange")
    value = driver.CUkernelNodeAttrValue()
    value.priority = max(int(greatest), min(int(least), int(priority)))
    (err,) = driver.cuGraphKernelNodeSetAttribute(
        gnode.handle, driver.CUkernelNodeAttrID.CU_LAUNCH_ATTRIBUTE_PRIORITY, value)
    check(err, "cuGraphKernelNodeSetAttribute(PRIORITY)")


def set_access_policy(gnode: Any, address: int, nbytes: int, hit_ratio: float) -> int:
    """An L2 access-policy window over [address, address + nbytes) on a kernel node (cut
    to the device's largest window); returns the bytes it covers."""
    from cuda.bindings import driver
    err, dev = driver.cuCtxGetDevice()
    check(err, "cuCtxGetDevice")
    err, most = driver.cuDeviceGetAttribute(
        driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, dev)
    check(err, "cuDeviceGetAttribute(MAX_ACCESS_POLICY_WINDOW_SIZE)")
    window = driver.CUaccessPolicyWindow()
    window.base_ptr = address
    window.num_bytes = min(int(nbytes), int(most))
    window.hitRatio = float(hit_ratio)
    window.hitProp = driver.CUaccessProperty.CU_ACCESS_PROPERTY_PERSISTING
    window.missProp = driver.CUaccessProperty.CU_ACCESS_PROPERTY_STREAMING
    value = driver.CUkernelNodeAttrValue()
    value.accessPolicyWindow = window
    (err,) = driver.cuGraphKernelNodeSetAttribute(
        gnode.handle, driver.CUkernelNodeAttrID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, value)
    check(err, "cuGraphKernelNodeSetAttribute(ACCESS_POLICY_WINDOW)")
    return int(window.num_bytes)


def captured_node_count(gdef: Any) -> int:
    from cuda.bindings import driver
    err, _, count = driver.cuGraphGetNodes(gdef.handle, 0)
    check(err, "cuGraphGetNodes")
    return int(count)


def end_invalid_capture(stream: Any) -> None:
    """End a capture a failed call invalidated (cuda.core refuses to end it)."""
    from cuda.bindings import driver
    driver.cuStreamEndCapture(stream.handle)


def set_child_graph(graph: Any, node: Any, gdef: Any) -> None:
    """An executable's child-graph node runs `gdef` from now on (same topology: a library
    call captured again over moved arrays)."""
    from cuda.bindings import driver
    (err,) = driver.cuGraphExecChildGraphNodeSetParams(graph.handle, node.handle, gdef.handle)
    check(err, "cuGraphExecChildGraphNodeSetParams")
