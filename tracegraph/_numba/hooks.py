"""Launch interception: while a tracer is active on this thread, `kernel[grid, block](...)`
and `kernel.forall(n)(...)` are handed to it instead of launching."""
from __future__ import annotations

import threading
from typing import Any

from .kernels import SIMULATOR, positional


class _ThreadState(threading.local):
    """This thread's tracer, and whether it runs a host callback. (Defaults as class
    attributes: a getattr that misses raised inside, 0.7 us at every eager launch.)"""
    tracer: Any = None
    in_callback = False


_thread = _ThreadState()
_hooks_lock = threading.Lock()
_hooks_installed = False


def current_tracer() -> Any:
    return _thread.tracer


class in_host_callback:
    """While the sim backend runs a tg.callback: any CUDA call from it is refused, as the
    driver refuses it inside a graph's host node."""

    def __enter__(self) -> None:
        _thread.in_callback = True

    def __exit__(self, *exc: Any) -> None:
        _thread.in_callback = False


def _refuse_in_callback(what: str) -> None:
    if _thread.in_callback:
        from ..errors import TracegraphError
        raise TracegraphError(f"a host callback called CUDA ({what}); the driver refuses "
                              "that inside a graph's host node",
                              fix="host callbacks must not call CUDA (no launches, copies or "
                                  "synchronization); move that work into the traced function")


# [how many threads have a tracer set]: the C replay entry (backends/cuda/_graphlaunch.c)
# takes its fast path only while it is 0
TRACING = [0]
_tracing_lock = threading.Lock()


def set_tracer(tracer: Any) -> Any:
    """Make `tracer` receive this thread's launches; returns the previous one."""
    install_hooks()
    previous = _thread.tracer
    with _tracing_lock:
        TRACING[0] += (tracer is not None) - (previous is not None)
        _thread.tracer = tracer
    return previous


def install_hooks() -> None:
    """Route launches through the active tracer. Idempotent; costs nothing when not tracing."""
    global _hooks_installed
    with _hooks_lock:
        if _hooks_installed:
            return
        if SIMULATOR:
            _install_simulator_hooks()
        else:
            _install_dispatcher_hooks()
        install_host_api_hooks()
        _hooks_installed = True


def _install_dispatcher_hooks() -> None:
    from numba.cuda import dispatcher as d

    original_call = d.CUDADispatcher.call

    def call(self, args, launch_config):
        tracer = current_tracer()
        if tracer is None:
            _refuse_in_callback(f"a launch of {self.py_func.__name__}")
            return original_call(self, args, launch_config)
        tracer.record_launch(self, launch_config.griddim, launch_config.blockdim,
                             launch_config.sharedmem, args,
                             stream=_stream_given(launch_config.stream))

    original_forall = d.ForAll.__call__

    def forall(self, *args):
        tracer = current_tracer()
        if tracer is None:
            return original_forall(self, *args)
        if self.ntasks == 0:
            tracer.launches += 1  # a launch, of nothing (as numba-cuda does it)
            return None
        # Numba asks the driver for a block size here; tracing must not need a GPU,
        # and forall kernels bound-check their index, so any block size is correct.
        tpb = self.thread_per_block or 256
        grid = (self.ntasks + tpb - 1) // tpb
        tracer.record_launch(self.dispatcher, (grid, 1, 1), (tpb, 1, 1), self.sharedmem, args,
                             stream=bool(self.stream))

    original_configure = d.CUDADispatcher.configure

    def configure(self, griddim, blockdim, stream=0, sharedmem=0):
        tracer = current_tracer()
        if tracer is not None:  # Numba's own refusals, as tracegraph's at the user's line
            tracer.check_configuration(self, griddim, blockdim)
        return original_configure(self, griddim, blockdim, stream, sharedmem)

    d.CUDADispatcher.call = call
    d.ForAll.__call__ = forall
    d.CUDADispatcher.configure = configure


class _ConfiguredLaunch:
    """`kernel[grid, block, stream, shared]` while tracing, under the simulator."""

    def __init__(self, kernel: Any, configuration: tuple):
        self.kernel, self.configuration = kernel, configuration

    def __call__(self, *args: Any) -> None:
        config = self.configuration  # checked as Numba checks it by the tracer
        if not isinstance(config, tuple):
            config = (config,)
        grid, block = (*config, None, None)[:2]
        stream = config[2] if len(config) >= 3 else 0
        sharedmem = config[3] if len(config) >= 4 else 0
        current_tracer().record_launch(self.kernel, grid, block, sharedmem, args,
                                       stream=_stream_given(stream))


def _stream_given(stream: Any) -> bool:
    if stream is None or (isinstance(stream, int) and stream == 0):
        return False
    # the CUDA stream protocol first: a cuda.core Stream's `handle` cost 0.9 us, and
    # numba-cuda makes one for every launch, the default stream's too
    protocol = getattr(type(stream), "__cuda_stream__", None)
    if protocol is not None:
        try:
            return int(protocol(stream)[1]) != 0
        except Exception:  # not the protocol after all: its handle below
            pass
    try:
        return int(getattr(stream, "handle", 1) or 0) != 0
    except Exception:
        return True


def _install_simulator_hooks() -> None:
    from numba.cuda.simulator import kernel as k

    original_call = k.FakeCUDAKernel.__call__
    original_getitem = k.FakeCUDAKernel.__getitem__

    def call(self, *args, **kwargs):
        tracer = current_tracer()
        if kwargs:
            args = positional(self.fn, args, kwargs)
        # tracers are per thread and the simulator's CUDA threads have none
        if tracer is None:
            return original_call(self, *args)
        # a device function called (or launched) by the traced host code itself
        tracer.record_launch(self, (1, 1, 1), (1, 1, 1), 0, args)

    def getitem(self, configuration):
        tracer = current_tracer()
        if tracer is None:
            _refuse_in_callback(f"a launch of {self.fn.__name__}")
        else:
            # the simulator keeps a launch's configuration on the shared kernel object,
            # where another thread's launch could change it before the call: keep it here
            return _ConfiguredLaunch(self, configuration)
        # the simulator keeps the last launch's shared memory size: reset it
        self.dynshared_size = 0
        return original_getitem(self, configuration)

    original_forall = k.FakeCUDAKernel.forall

    def forall(self, ntasks, tpb=0, stream=0, sharedmem=0):
        tracer = current_tracer()
        if ntasks == 0 and tracer is not None:
            tracer.launches += 1  # a launch, of nothing, as numba-cuda does it
            return lambda *args: None  # noqa: ARG005 - Numba's own signature
        return original_forall(self, ntasks, tpb, stream, sharedmem)

    k.FakeCUDAKernel.__call__ = call
    k.FakeCUDAKernel.__getitem__ = getitem
    k.FakeCUDAKernel.forall = forall


# ---------------------------------------------------------------------------
# Numba's host API while tracing: what eager Numba does on every call happens on every
# replay (allocations become graph-owned arrays, host-to-device copies become copy
# nodes), and what would read device data on the host at trace time is refused.

_HOST_ALLOCATORS = ("pinned_array", "pinned_array_like", "mapped_array",
                    "mapped_array_like", "managed_array", "pinned", "mapped")


def install_host_api_hooks() -> None:
    from numba import cuda
    _wrap_module(cuda, "device_array", _device_array)
    _wrap_module(cuda, "device_array_like", _device_array_like)
    _wrap_module(cuda, "to_device", _to_device)
    for name in _HOST_ALLOCATORS:
        _wrap_module(cuda, name, _refuse_host_allocation(name))
    _wrap_reduce(cuda)
    if SIMULATOR:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray as array_type
    else:
        from numba.cuda.cudadrv.devicearray import DeviceNDArray as array_type
    _guard_device_array_methods(array_type)


def _wrap_module(module: Any, name: str, traced: Any) -> None:
    original = getattr(module, name, None)
    if original is None or getattr(original, "_tracegraph", False):
        return

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        tracer = current_tracer()
        if tracer is None:
            _refuse_in_callback(f"cuda.{name}")
            return original(*args, **kwargs)
        return traced(tracer, *args, **kwargs)

    setattr(wrapper, "_tracegraph", True)  # noqa: B010 - a mark on a function
    setattr(wrapper, "__wrapped__", original)  # noqa: B010
    wrapper.__name__ = getattr(original, "__name__", name)
    wrapper.__doc__ = getattr(original, "__doc__", None)
    setattr(module, name, wrapper)


def _where() -> str:
    from ..location import user_location
    return user_location(3)


def _refuse(what: str, fix: str) -> Exception:
    from ..errors import TraceError
    return TraceError(what, where=_where(), fix=fix)


def _device_array(tracer: Any, shape: Any, dtype: Any = float, strides: Any = None,
                  order: str = "C", stream: Any = 0) -> Any:  # noqa: ARG001 - Numba's own signature
    if strides is not None:
        raise _refuse("cuda.device_array() with explicit strides inside a traced function",
                      "use a C- or F-ordered array (tg.empty), or make it outside")
    return tracer.device_array(shape, dtype, order)


def _device_array_like(tracer: Any, ary: Any, stream: Any = 0) -> Any:  # noqa: ARG001
    import numpy as np
    if getattr(ary, "shape", None) is None or getattr(ary, "dtype", None) is None:
        from ..trace.origins import what_it_is
        raise _refuse(f"cuda.device_array_like(ary) makes an array like the array `ary`, "
                      f"and got {what_it_is(ary)}",
                      "pass an array (a traced, device or NumPy array), or use "
                      "cuda.device_array(shape, dtype)")
    strides = tuple(getattr(ary, "strides", ()))
    shape, dtype = tuple(ary.shape), np.dtype(ary.dtype)
    order = "F" if len(shape) > 1 and strides == _f_strides(shape, dtype.itemsize) else "C"
    return tracer.device_array(shape, dtype, order)


def _f_strides(shape: tuple, itemsize: int) -> tuple:
    out, acc = [], itemsize
    for n in shape:
        out.append(acc)
        acc *= n
    return tuple(out)


def _to_device(tracer: Any, obj: Any, stream: Any = 0, copy: bool = True, to: Any = None) -> Any:  # noqa: ARG001
    where = _where()
    if to is None:
        return tracer.host_to_device(obj, None, where)
    dst = tracer.view_or_external(to)
    if dst is None:
        raise _refuse("cuda.to_device(..., to=...) needs a device array as `to`",
                      "pass a traced or device array")
    tracer.host_to_device(obj, dst, where)
    return to


def _refuse_host_allocation(name: str) -> Any:
    def traced(tracer: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: ARG001
        raise _refuse(f"cuda.{name}() allocates host memory, which a CUDA graph cannot own",
                      "allocate it outside the traced function and pass it in, or use "
                      "tg.empty for device memory")
    return traced


def _wrap_reduce(cuda: Any) -> None:
    """cuda.reduce launches its kernels and copies the result to the host."""
    def refuse(*_: Any, **__: Any) -> Any:
        raise _refuse("a cuda.reduce reduction runs on the host (it launches its own "
                      "kernels and reads the result back), which cannot be part of a graph",
                      "use tg.ops.sum / tg.ops.max / tg.ops.min (graph nodes), or reduce "
                      "outside the traced function")

    if not SIMULATOR:
        from numba.cuda.kernels import reduction
        call = reduction.Reduce.__call__
        if not getattr(call, "_tracegraph", False):
            def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
                if current_tracer() is not None:
                    refuse()
                return call(self, *args, **kwargs)
            setattr(guarded, "_tracegraph", True)  # noqa: B010 - a mark on a function
            reduction.Reduce.__call__ = guarded
        return
    original = cuda.reduce
    if getattr(original, "_tracegraph", False):
        return

    def make(func: Any) -> Any:
        inner = original(func)

        def reduce_wrapper(*args: Any, **kwargs: Any) -> Any:
            if current_tracer() is not None:
                refuse()
            return inner(*args, **kwargs)
        return reduce_wrapper

    setattr(make, "_tracegraph", True)  # noqa: B010 - a mark on a function
    cuda.reduce = cuda.Reduce = make


def _guard_device_array_methods(cls: Any) -> None:
    """A captured device array's data cannot be read or written on the host at trace
    time; copy_to_device becomes a copy node."""
    if getattr(cls, "_tracegraph_guarded", False):
        return
    cls._tracegraph_guarded = True
    reads = ("copy_to_host", "__array__", "tolist", "item")
    for name in reads:
        original = getattr(cls, name, None)
        if original is not None:
            setattr(cls, name, _guarded_read(original, name))
    for name in ("__setitem__", "setitem"):
        original = getattr(cls, name, None)
        if original is not None:
            setattr(cls, name, _guarded_write(original, name))
    getitem = cls.__getitem__

    def __getitem__(self: Any, key: Any) -> Any:
        result = getitem(self, key)
        if current_tracer() is not None and not isinstance(result, cls) and \
                not hasattr(result, "__cuda_array_interface__"):
            raise _refuse("reading an element of a device array on the host inside a traced "
                          "function reads its data at trace time, once",
                          "read it inside a kernel, or pass the value as an argument")
        return result
    cls.__getitem__ = __getitem__
    copy_to_device = cls.copy_to_device

    def copy_in(self: Any, ary: Any, stream: Any = 0) -> Any:
        tracer = current_tracer()
        if tracer is None:
            _refuse_in_callback("copy_to_device() of a device array")
            return copy_to_device(self, ary, stream)
        dst = tracer.view_or_external(self)
        src = tracer.view_or_external(ary)
        if src is not None:
            tracer.device_copy(dst, src, _where())
        else:
            tracer.host_to_device(ary, dst, _where())
        return None
    cls.copy_to_device = copy_in


def _guarded_read(original: Any, name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        _refuse_in_callback(f"{name}() of a device array")
        if current_tracer() is not None:
            raise _refuse(f"{name}() of a device array inside a traced function reads its "
                          "data at trace time, once",
                          "return the array from the traced function and read it after the "
                          "call, or use tg.callback for host work")
        return original(self, *args, **kwargs)
    return method


def _guarded_write(original: Any, name: str) -> Any:  # noqa: ARG001 - Numba's own signature
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if current_tracer() is not None:
            raise _refuse("assigning into a device array on the host inside a traced "
                          "function runs once, at trace time",
                          "write it inside a kernel, or use tg.ops.fill / tg.ops.copy")
        return original(self, *args, **kwargs)
    return method
