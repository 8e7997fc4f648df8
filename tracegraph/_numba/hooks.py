"""Launch interception: while a tracer is active on this thread, `kernel[grid, block](...)`
and `kernel.forall(n)(...)` are handed to it instead of launching. (Numba's other host API
while tracing: hostapi.py; its CUDA ufuncs: ufuncs.py.)"""
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


def refuse_in_callback(what: str) -> None:
    if _thread.in_callback:
        from ..errors import TracegraphError
        raise TracegraphError(f"a host callback called CUDA ({what}); the driver refuses "
                              "that inside a graph's host node",
                              fix="host callbacks must not call CUDA (no launches, copies or "
                                  "synchronization); move that work into the traced function")


def refuse(what: str, fix: str) -> Exception:
    """A TraceError at the user's line (the innermost frame outside tracegraph and Numba)."""
    from ..errors import TraceError
    from ..location import user_location
    return TraceError(what, where=user_location(2), fix=fix)


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
        from .hostapi import install_host_api_hooks
        from .ufuncs import install_ufunc_hooks
        install_ufunc_hooks()  # first: on the simulator it adds cuda.is_cuda_array
        install_host_api_hooks()
        _hooks_installed = True


def _install_dispatcher_hooks() -> None:
    from numba.cuda import dispatcher as d

    original_call = d.CUDADispatcher.call

    def call(self, args, launch_config):
        tracer = current_tracer()
        if tracer is None:
            refuse_in_callback(f"a launch of {self.py_func.__name__}")
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
            refuse_in_callback(f"a launch of {self.fn.__name__}")
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
