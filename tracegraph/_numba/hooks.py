"""Launch interception: while a tracer is active on this thread, `kernel[grid, block](...)`
and `kernel.forall(n)(...)` are handed to it instead of launching."""
from __future__ import annotations

import threading
from typing import Any

from .kernels import SIMULATOR

_thread = threading.local()
_hooks_lock = threading.Lock()
_hooks_installed = False


def current_tracer() -> Any:
    return getattr(_thread, "tracer", None)


def set_tracer(tracer: Any) -> Any:
    """Make `tracer` receive this thread's launches; returns the previous one."""
    install_hooks()
    previous = getattr(_thread, "tracer", None)
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
        _hooks_installed = True


def _install_dispatcher_hooks() -> None:
    from numba.cuda import dispatcher as d

    original_call = d.CUDADispatcher.call

    def call(self, args, launch_config):
        tracer = current_tracer()
        if tracer is None:
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
            return None
        # Numba asks the driver for a block size here; tracing must not need a GPU,
        # and forall kernels bound-check their index, so any block size is correct.
        tpb = self.thread_per_block or 256
        grid = (self.ntasks + tpb - 1) // tpb
        tracer.record_launch(self.dispatcher, (grid, 1, 1), (tpb, 1, 1), self.sharedmem, args,
                             stream=bool(self.stream))

    d.CUDADispatcher.call = call
    d.ForAll.__call__ = forall


def _stream_given(stream: Any) -> bool:
    if stream is None or (isinstance(stream, int) and stream == 0):
        return False
    try:
        return int(getattr(stream, "handle", 1) or 0) != 0
    except Exception:  # noqa: BLE001 - an exotic stream object: it was given
        return True


def _install_simulator_hooks() -> None:
    from numba.cuda.simulator import kernel as k

    original_call = k.FakeCUDAKernel.__call__
    original_getitem = k.FakeCUDAKernel.__getitem__

    def call(self, *args):
        tracer = current_tracer()
        # tracers are per thread and the simulator's CUDA threads have none
        if tracer is None or self._device:
            return original_call(self, *args)
        from numba.cuda.errors import normalize_kernel_dimensions
        grid, block = normalize_kernel_dimensions(self.grid_dim, self.block_dim)
        stream = getattr(self, "_tracegraph_stream", 0)
        tracer.record_launch(self, tuple(grid), tuple(block), self.dynshared_size, args,
                             stream=_stream_given(stream))

    def getitem(self, configuration):
        # The simulator keeps the last launch's shared memory size and drops the stream;
        # reset the one and remember the other so tracing can warn about it.
        self.dynshared_size = 0
        result = original_getitem(self, configuration)
        self._tracegraph_stream = configuration[2] if len(configuration) >= 3 else 0
        return result

    original_forall = k.FakeCUDAKernel.forall

    def forall(self, ntasks, tpb=0, stream=0, sharedmem=0):
        if ntasks == 0 and current_tracer() is not None:
            return lambda *args: None  # numba-cuda launches nothing for zero tasks
        return original_forall(self, ntasks, tpb, stream, sharedmem)

    k.FakeCUDAKernel.__call__ = call
    k.FakeCUDAKernel.__getitem__ = getitem
    k.FakeCUDAKernel.forall = forall
