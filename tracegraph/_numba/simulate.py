"""Running any kernel on Numba's CPU simulator (the sim backend), also where Numba is
not in simulator mode: the kernel's function is re-bound to a copy of its globals (and
closure) in which the device functions it calls are simulator kernels too."""
from __future__ import annotations

import sys
import threading
import types as pytypes
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .kernels import SIMULATOR, _KernelType, is_device_function, referenced_names

_sim_kernels: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_sim_lock = threading.RLock()
# the globals and closure cells of every clone, where captured device arrays are swapped
# for simulator arrays during a launch
_clone_scopes: list[tuple[dict, tuple]] = []


def simulator_lock() -> threading.RLock:
    """The simulator runs one kernel at a time in a process; hold this around each one."""
    return _sim_lock


def simulator_kernel(kernel: Any) -> Any:
    """A kernel the CPU simulator can run, for any kernel (simulated or compiled).

    Under NUMBA_ENABLE_CUDASIM the kernel already is one. Otherwise its Python function
    is re-bound to a copy of its globals in which the device functions it calls are
    simulator kernels too, so the user's modules are never modified.
    """
    if SIMULATOR:
        return kernel
    with _sim_lock:
        return _simulated(kernel)


def _simulated(dispatcher: Any) -> Any:
    """A @cuda.jit kernel or device function as a simulator kernel."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel
    return _clone(dispatcher, lambda clone: FakeCUDAKernel(
        clone, device=is_device_function(dispatcher),
        fastmath=bool(dispatcher.targetoptions.get("fastmath"))))


def _python_clone(dispatcher: Any) -> Any:
    """A @numba.jit function (numba.cuda.random's) as plain Python."""
    return _clone(dispatcher, lambda clone: clone)


def _clone(dispatcher: Any, wrap: Callable[[Callable], Any]) -> Any:
    """`wrap` of a copy of the dispatcher's Python function whose globals and closure point
    at simulator versions; cached, and registered before re-binding so recursion ends."""
    cached = _sim_kernels.get(dispatcher)
    if cached is not None:
        return cached
    func = dispatcher.py_func
    namespace = dict(func.__globals__)
    cells = (tuple(pytypes.CellType() for _ in func.__closure__) if func.__closure__
             else None)
    result = _sim_kernels[dispatcher] = wrap(pytypes.FunctionType(
        func.__code__, namespace, func.__name__, func.__defaults__, cells))
    _rebind(func, namespace, cells)
    _clone_scopes.append((namespace, cells or ()))
    return result


def _sim_value(value: Any) -> Any:
    """What a kernel's global or closure variable becomes for the simulator: kernels and
    device functions simulator kernels, @numba.jit functions (numba.cuda.random's) plain
    Python, tuples of these tuples of their replacements."""
    from numba.core.registry import CPUDispatcher
    if isinstance(value, _KernelType):
        return _simulated(value)
    if isinstance(value, CPUDispatcher):
        return _python_clone(value)
    if type(value) is tuple and any(isinstance(v, (_KernelType, CPUDispatcher)) for v in value):
        return tuple(_sim_value(v) for v in value)
    return value


def _rebind(func: Callable, namespace: dict, cells: tuple | None) -> None:
    """Point the clone's globals and closure cells at simulator versions (filled after the
    clone is registered, so recursion terminates)."""
    for name in referenced_names(func.__code__):
        if name in namespace:
            namespace[name] = _sim_value(namespace[name])
    for new, old in zip(cells or (), func.__closure__ or ()):
        try:
            new.cell_contents = _sim_value(old.cell_contents)
        except ValueError:  # an empty cell stays empty
            pass




def simulator_array(host: np.ndarray) -> Any:
    """Wrap a NumPy view so a simulator kernel works on its memory in place (no copy)."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    return FakeCUDAArray(host)


def _swap_captured(captured: dict[int, Any]) -> list[tuple[Any, Any, Any]]:
    """Point clones' globals and closure cells that hold a captured device array (or a
    tuple of them) at its simulator stand-in; returns what to put back."""
    def swapped(value: Any) -> Any:
        if id(value) in captured:
            return captured[id(value)]
        if type(value) is tuple and any(id(v) in captured for v in value):
            return tuple(captured.get(id(v), v) for v in value)
        return value

    undo = []
    for namespace, cells in _clone_scopes:
        for name, value in list(namespace.items()):
            new = swapped(value)
            if new is not value:
                undo.append((namespace, name, value))
                namespace[name] = new
        for cell in cells:
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            new = swapped(value)
            if new is not value:
                undo.append((cell, None, value))
                cell.cell_contents = new
    return undo


def run_simulated(kernel: Any, griddim: tuple, blockdim: tuple, sharedmem: int,
                  args: list, captured: dict[int, Any] | None = None) -> None:
    """Run one launch on the CPU simulator; `captured` maps id() of device arrays the
    kernels name as globals to the simulator arrays they stand for in this run."""
    fake = simulator_kernel(kernel)
    with _sim_lock:
        undo = _swap_captured(captured) if captured else []
        # The simulator runs a Python thread per CUDA thread and polls them at every
        # syncthreads(); a short switch interval makes shared-memory kernels ~20x faster.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-4)
        try:
            fake[griddim, blockdim, 0, sharedmem](*args)
        finally:
            sys.setswitchinterval(interval)
            for where, name, value in undo:
                if name is None:
                    where.cell_contents = value
                else:
                    where[name] = value
