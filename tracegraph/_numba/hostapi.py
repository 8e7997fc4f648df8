"""Numba's host API while tracing: what eager Numba does on every call happens on every
replay (allocations become graph-owned arrays, copies and assignments become copy, memset
or kernel nodes, event records and waits become event nodes), and what would read device
data on the host at trace time, or make memory a graph cannot own, is refused at the
user's line. docs/api.md has the whole table; ufuncs.py does the CUDA ufuncs."""
from __future__ import annotations

from typing import Any

from .hooks import current_tracer, refuse, refuse_in_callback
from .kernels import SIMULATOR
from .reduction import hook_reduce

_HOST_ALLOCATORS = ("pinned_array", "pinned_array_like", "mapped_array",
                    "mapped_array_like", "managed_array", "mapped")
_READS = ("copy_to_host", "__array__", "tolist", "item")
_READ_FIX = ("return the array from the traced function and read it after the call, or "
             "use tg.callback for host work")


def install_host_api_hooks() -> None:
    from numba import cuda
    _wrap_module(cuda, "device_array", _device_array)
    _wrap_module(cuda, "device_array_like", _device_array_like)
    _wrap_module(cuda, "to_device", _to_device)
    for name in _HOST_ALLOCATORS:
        _wrap_module(cuda, name, _refuse_host_allocation(name))
    for module in _api_modules(cuda):
        _wrap_module(module, "is_cuda_array", _is_cuda_array, calls_cuda=False)
        _wrap_module(module, "as_cuda_array", _as_cuda_array, calls_cuda=False)
    for name, what in (("select_device", "makes another GPU current"),
                       ("close", "closes the CUDA context"),
                       ("open_ipc_array", "maps another process's memory only for its "
                                          "`with` block"),
                       ("event_elapsed_time", "reads two events' times on the host")):
        _wrap_module(cuda, name, _refuse_call(name, what))
    hook_reduce(cuda)
    if SIMULATOR:
        from numba.cuda.simulator.api import Event as event_type
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray as array_type
    else:
        from numba.cuda.cudadrv.devicearray import DeviceNDArray as array_type
        from numba.cuda.cudadrv.devicearray import DeviceRecord
        from numba.cuda.cudadrv.driver import Event as event_type
        from numba.cuda.cudadrv.driver import Stream
        _refuse_method(Stream, "add_callback", "runs its callback once, after the work "
                       "queued at trace time", "use tg.callback(fn, *arrays): a host node "
                       "run on every replay")
        _refuse_method(Stream, "async_done", "waits for the work queued at trace time",
                       "await the compiled function's results instead")
        _guard_device_array_methods(DeviceRecord)
    _hook_events(event_type)
    _guard_device_array_methods(array_type)


def _api_modules(cuda: Any) -> list[Any]:
    """numba.cuda and the module its functions come from (numba.cuda.api on a GPU)."""
    import sys
    return [cuda] + [m for m in (sys.modules.get("numba.cuda.api"),) if m is not None
                     and m is not cuda]


def _wrap_module(module: Any, name: str, traced: Any, calls_cuda: bool = True) -> None:
    """module.name calls `traced(tracer, original, *args)` while tracing."""
    original = getattr(module, name, None)
    if original is None or getattr(original, "_tracegraph", False):
        return

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        tracer = current_tracer()
        if tracer is None:
            if calls_cuda:
                refuse_in_callback(f"cuda.{name}")
            return original(*args, **kwargs)
        return traced(tracer, original, *args, **kwargs)

    setattr(wrapper, "_tracegraph", True)  # noqa: B010 - a mark on a function
    setattr(wrapper, "__wrapped__", original)  # noqa: B010
    wrapper.__name__ = getattr(original, "__name__", name)
    wrapper.__doc__ = getattr(original, "__doc__", None)
    setattr(module, name, wrapper)


def _device_array(tracer: Any, _: Any, shape: Any, dtype: Any = float, strides: Any = None,
                  order: str = "C", stream: Any = 0) -> Any:  # noqa: ARG001 - Numba's own signature
    if strides is not None:
        raise refuse("cuda.device_array() with explicit strides inside a traced function",
                      "use a C- or F-ordered array (tg.empty), or make it outside")
    return tracer.numba_api.device_array(shape, dtype, order)


def _device_array_like(tracer: Any, _: Any, ary: Any, stream: Any = 0) -> Any:  # noqa: ARG001
    import numpy as np
    if getattr(ary, "shape", None) is None or getattr(ary, "dtype", None) is None:
        from ..errors import TraceError
        from ..location import user_location
        from ..trace.origins import what_it_is
        raise TraceError(f"cuda.device_array_like(ary) makes an array like the array `ary`, "
                         f"and got {what_it_is(ary)}", where=user_location(3),
                         fix="pass an array (a traced, device or NumPy array), or use "
                             "cuda.device_array(shape, dtype)")
    strides = tuple(getattr(ary, "strides", ()))
    shape, dtype = tuple(ary.shape), np.dtype(ary.dtype)
    order = "F" if len(shape) > 1 and strides == _f_strides(shape, dtype.itemsize) else "C"
    return tracer.numba_api.device_array(shape, dtype, order)


def _f_strides(shape: tuple, itemsize: int) -> tuple:
    out, acc = [], itemsize
    for n in shape:
        out.append(acc)
        acc *= n
    return tuple(out)


def _to_device(tracer: Any, _: Any, obj: Any, stream: Any = 0, copy: bool = True,  # noqa: ARG001
               to: Any = None) -> Any:
    api = tracer.numba_api
    if to is None:  # a device array comes back as it is (Numba's auto_device)
        return obj if api.is_device(obj) else api.copy_in(obj)
    dst = tracer.view_or_external(to)
    if dst is None:
        raise refuse("cuda.to_device(..., to=...) needs a device array as `to`",
                     "pass a traced or device array")
    api.copy_into(dst, obj)
    return to


def _is_cuda_array(tracer: Any, original: Any, obj: Any) -> bool:
    """A traced array is a device array inside the graph (whatever the caller passed)."""
    return True if tracer.numba_api.is_traced(obj) else bool(original(obj))


def _as_cuda_array(tracer: Any, original: Any, obj: Any, sync: bool = True) -> Any:
    return obj if tracer.numba_api.is_traced(obj) else original(obj, sync=sync)


def _refuse_host_allocation(name: str) -> Any:
    def traced(*_: Any, **__: Any) -> Any:
        raise refuse(f"cuda.{name}() makes host memory (or maps it for the device), which a "
                     "CUDA graph cannot own", "allocate it outside the traced function and "
                     "pass it in, or use tg.empty / cuda.device_array for device memory")
    return traced


def _refuse_call(name: str, what: str) -> Any:
    def traced(*_: Any, **__: Any) -> Any:
        raise refuse(f"cuda.{name}() inside a traced function {what}, at trace time only",
                     f"call cuda.{name} outside the traced function")
    return traced


def _refuse_method(cls: Any, name: str, what: str, fix: str) -> None:
    original = getattr(cls, name, None)
    if original is None or getattr(original, "_tracegraph", False):
        return

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if current_tracer() is not None:
            raise refuse(f"{name}() of a {cls.__name__} inside a traced function {what}",
                         fix)
        return original(self, *args, **kwargs)
    setattr(method, "_tracegraph", True)  # noqa: B010 - a mark on a function
    setattr(cls, name, method)


def _hook_events(cls: Any) -> None:
    """event.record(stream) / event.wait(stream) become event nodes after all earlier
    work / before all later work (tg.record(event) / tg.wait(event)); reading an event
    on the host would read the trace's, not a replay's."""
    from ..ir import OpKind
    for name, kind, mode in (("record", OpKind.EVENT_RECORD, "r"),
                             ("wait", OpKind.EVENT_WAIT, "w")):
        original = getattr(cls, name)
        if getattr(original, "_tracegraph", False):
            continue

        def method(self: Any, stream: Any = 0, *, _kind: Any = kind, _mode: str = mode,
                   _original: Any = original) -> Any:
            tracer = current_tracer()
            if tracer is None:
                return _original(self, stream)
            tracer.record_event(_kind, self, (), _mode)
            return None
        setattr(method, "_tracegraph", True)  # noqa: B010 - a mark on a function
        setattr(cls, name, method)
    for name in ("synchronize", "query", "elapsed_time"):
        if hasattr(cls, name):
            _refuse_method(cls, name, "reads the event as the trace left it, not as a "
                           "replay does", "read events after the compiled function's call "
                           "(events it records are event nodes of the graph)")


def _guard_device_array_methods(cls: Any) -> None:
    """A captured device array's data cannot be read on the host at trace time;
    copy_to_device becomes a copy node and assignment a copy, memset or kernel node."""
    if getattr(cls, "_tracegraph_guarded", False):
        return
    cls._tracegraph_guarded = True
    for name in _READS:
        original = getattr(cls, name, None)
        if original is not None:
            setattr(cls, name, _guarded_read(original, name))
    if "__getattr__" in vars(cls):  # the simulator's: NumPy's methods of its data
        getattr_ = cls.__getattr__

        def __getattr__(self: Any, name: str) -> Any:
            if name in _READS or name in ("__array_interface__", "__array_struct__"):
                _refuse_read(name)
            return getattr_(self, name)
        cls.__getattr__ = __getattr__
    for name in ("__setitem__", "setitem"):
        original = getattr(cls, name, None)
        if original is not None:
            setattr(cls, name, _assigning(original, name))
    for name in ("__getitem__", "getitem"):
        original = getattr(cls, name, None)
        if original is not None:
            setattr(cls, name, _indexing(original, cls))
    copy_to_device = cls.copy_to_device

    def copy_in(self: Any, ary: Any, stream: Any = 0) -> Any:
        tracer = current_tracer()
        if tracer is None:
            refuse_in_callback("copy_to_device() of a device array")
            return copy_to_device(self, ary, stream)
        tracer.numba_api.copy_into(tracer.view_or_external(self), ary)
        return None
    cls.copy_to_device = copy_in


def _indexing(original: Any, cls: type) -> Any:
    """Indexing that gives a view; an element (read on the host) is refused."""
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        if current_tracer() is not None and not isinstance(result, cls) and \
                not hasattr(result, "__cuda_array_interface__"):
            raise refuse("reading an element of a device array on the host inside a traced "
                         "function reads its data at trace time, once",
                         "read it inside a kernel, or pass the value as an argument")
        return result
    return method


def _guarded_read(original: Any, name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        _refuse_read(name)
        return original(self, *args, **kwargs)
    return method


def _refuse_read(name: str) -> None:
    refuse_in_callback(f"{name}() of a device array")
    if current_tracer() is not None:
        raise refuse(f"{name}() of a device array inside a traced function reads its data "
                     "at trace time, once", _READ_FIX)


def _assigning(original: Any, name: str) -> Any:
    def method(self: Any, key: Any, value: Any, stream: Any = 0) -> Any:
        tracer = current_tracer()
        if tracer is None:
            refuse_in_callback(f"{name}() of a device array")
            return original(self, key, value) if name == "__setitem__" else \
                original(self, key, value, stream)
        tracer.numba_api.assign(tracer.view_or_external(self), key, value)
        return None
    return method
