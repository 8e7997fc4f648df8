"""Kernels as simulator kernels where Numba is not in simulator mode (the sim backend on a
GPU machine): the kernel's function is copied onto a copy of its globals (and closure) in
which the device functions, register_jitable helpers and @numba.jit functions it names are
simulator versions too, so the user's modules are never modified."""
from __future__ import annotations

import functools
import types as pytypes
import weakref
from collections.abc import Callable
from typing import Any

from .callees import followed_function
from .kernels import _KernelType, is_device_function, positional, referenced_names

_sim_kernels: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
# the globals and closure cells of every clone, where captured device arrays are swapped
# for simulator arrays during a launch
clone_scopes: list[tuple[dict, tuple]] = []
# per clone: the original function, its clone's namespace and cells, and the original values
# they were made from (to follow a name the user rebinds, as the simulator does)
_clone_sources: list[tuple[Callable, dict, tuple, dict[str, Any], list[Any]]] = []


def simulated(dispatcher: Any) -> Any:
    """A @cuda.jit kernel or device function as a simulator kernel."""
    return _clone(dispatcher, lambda clone: _kernel_class()(
        clone, device=is_device_function(dispatcher),
        fastmath=bool(dispatcher.targetoptions.get("fastmath"))))


@functools.cache
def _kernel_class() -> type:
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    class SimulatorKernel(FakeCUDAKernel):
        """Numba's simulator kernel, called with keywords too (as a device function can be
        on the GPU)."""

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            if kwargs:
                args = positional(self.fn, args, kwargs)
            return super().__call__(*args)
    return SimulatorKernel


def _python_clone(dispatcher: Any) -> Any:
    """A @numba.jit function (numba.cuda.random's) as plain Python."""
    return _clone(dispatcher, lambda clone: clone)


def _clone(dispatcher: Any, wrap: Callable[[Callable], Any]) -> Any:
    """`wrap` of a copy of the dispatcher's Python function whose globals and closure point
    at simulator versions; cached, and registered before re-binding so recursion ends."""
    cached = _sim_kernels.get(dispatcher)
    if cached is not None:
        return cached
    func = getattr(dispatcher, "py_func", dispatcher)
    namespace = dict(func.__globals__)
    cells = (tuple(pytypes.CellType() for _ in func.__closure__) if func.__closure__
             else None)
    result = _sim_kernels[dispatcher] = wrap(pytypes.FunctionType(
        func.__code__, namespace, func.__name__, None, cells))
    if func.__defaults__:  # a device function as a default: a simulator kernel too
        _clone_function(result).__defaults__ = tuple(map(_sim_value, func.__defaults__))
    _rebind(func, namespace, cells)
    clone_scopes.append((namespace, cells or ()))
    _clone_sources.append((func, namespace, cells or (), _names_now(func), _cells_now(func)))
    return result


def _clone_function(result: Any) -> Any:
    return getattr(result, "fn", result)  # a FakeCUDAKernel keeps its function as `fn`


def _names_now(func: Callable) -> dict[str, Any]:
    return {name: func.__globals__[name] for name in referenced_names(func.__code__)
            if name in func.__globals__}


def _cells_now(func: Callable) -> list[Any]:
    values = []
    for cell in func.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:
            values.append(_EMPTY)
    return values


_EMPTY = object()


def follow_rebound_names() -> None:
    """A clone's namespace is a copy: point it at what the user's names hold now, so the
    simulator reads a rebound global as Numba's own simulator does (the trace orders the
    launch for the array the name holds now)."""
    for func, namespace, cells, names, values in _clone_sources:
        for name, value in _names_now(func).items():
            if names.get(name, _EMPTY) is not value:
                names[name] = value
                namespace[name] = _sim_value(value)
        for k, value in enumerate(_cells_now(func)):
            if values[k] is not value and value is not _EMPTY:
                values[k] = value
                cells[k].cell_contents = _sim_value(value)


def _sim_value(value: Any) -> Any:
    """What a kernel's global or closure variable becomes for the simulator: kernels and
    device functions simulator kernels, @numba.jit functions (numba.cuda.random's) plain
    Python, tuples of these tuples of their replacements."""
    from numba.core.registry import CPUDispatcher
    if isinstance(value, _KernelType):
        return simulated(value)
    if isinstance(value, CPUDispatcher):
        return _python_clone(value)
    if isinstance(value, tuple):
        items = [_sim_value(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else rebuilt(value, items)
    if followed_function(value) is value:  # a register_jitable helper: plain Python
        return _clone(value, lambda clone: clone)
    return value


def rebuilt(value: tuple, items: list) -> tuple:
    """A tuple (or namedtuple) of the same type holding `items`."""
    make = getattr(type(value), "_make", None)
    return make(items) if make is not None else tuple(items)


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
