"""Numba's mode (simulator or real) and facts about kernels: name, Python function,
debug/device flags, grid synchronization."""
from __future__ import annotations

import types as pytypes
from collections.abc import Callable
from typing import Any

from numba.cuda import config as _cuda_config

SIMULATOR = bool(_cuda_config.ENABLE_CUDASIM)

if SIMULATOR:
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray as _SimDeviceArray
    from numba.cuda.simulator.kernel import FakeCUDAKernel as _KernelType
else:
    from numba.cuda.dispatcher import CUDADispatcher as _KernelType
    _SimDeviceArray = None


def is_kernel(obj: Any) -> bool:
    return isinstance(obj, _KernelType)


def kernel_py_func(kernel: Any) -> Callable:
    return kernel.py_func


def kernel_name(kernel: Any) -> str:
    return getattr(kernel_py_func(kernel), "__name__", repr(kernel))


def kernel_is_debug(kernel: Any) -> bool:
    if SIMULATOR:
        return bool(getattr(kernel, "_debug", False))
    return bool(kernel.targetoptions.get("debug"))


def uses_grid_sync(kernel: Any) -> bool:
    """Does the kernel (or a device function it calls) synchronize the whole grid
    (`cuda.cg.this_grid().sync()`)? Such a kernel needs a cooperative launch."""
    # not cached: a name it calls through may be rebound (the tracer asks once per
    # kernel and arguments in a trace)
    return _uses_grid_sync(kernel_py_func(kernel), set())


def _uses_grid_sync(func: Callable, seen: set) -> bool:
    if func in seen:
        return False
    seen.add(func)
    code = getattr(func, "__code__", None)
    if code is None:
        return False
    names = referenced_names(code)
    if "this_grid" in names:
        return True
    called = []
    for v in referenced_values(func):
        if isinstance(v, pytypes.ModuleType):  # mod.fn(): the module's functions it names
            called += [getattr(v, n) for n in names if hasattr(v, n)]
        else:
            called.append(v)
    return any(_uses_grid_sync(kernel_py_func(v), seen) for v in called
               if is_device_function(v))


def referenced_values(func: Callable) -> list[Any]:
    """The values of the globals and closure variables a function's code names."""
    namespace = getattr(func, "__globals__", {})
    code = func.__code__
    values = [namespace[n] for n in referenced_names(code) if n in namespace]
    for cell in getattr(func, "__closure__", None) or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # an empty cell
            pass
    return values


def positional(fn: Callable, args: tuple, kwargs: dict) -> tuple:
    """A call's arguments all by position (Numba's simulator takes no keywords; the GPU
    does); a keyword after a skipped default keeps its place."""
    import inspect
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    return tuple(bound.args)


def kernel_extensions(kernel: Any) -> list:
    """Argument-handling extensions attached to a kernel (kernel.extensions)."""
    return list(getattr(kernel, "extensions", None) or ())


def is_device_function(obj: Any) -> bool:
    if SIMULATOR:
        return isinstance(obj, _KernelType) and obj._device
    return isinstance(obj, _KernelType) and bool(obj.targetoptions.get("device"))


def referenced_names(code: pytypes.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            names |= referenced_names(const)
    return names


def compiling() -> bool:
    """Is Numba compiling on this thread now (a typing hook, an extension's entry points:
    Python that runs inside the compiler, not the caller's code)?"""
    from numba.core.compiler_lock import global_compiler_lock
    return bool(global_compiler_lock.is_locked())
