"""What a call in a kernel's IR leads to: the Python function the access analysis follows
(a device function's, a register_jitable helper), how the call's arguments bind to its
parameters, a parameter's default, and Numba's intrinsics (`cuda.grid`, atomics)."""
from __future__ import annotations

import inspect
import types
import weakref
from collections.abc import Callable
from typing import Any

from .kernels import is_device_function, is_kernel, kernel_py_func


class Intrinsic:
    """What `cuda.grid`, `cuda.atomic.add`, `cuda.threadIdx.x`... are to the analysis (stubs
    on a GPU; missing under the simulator, which supplies them only while a kernel runs):
    Numba's own functions and values, named by their path under `cuda`. Only the atomics
    store to an argument; `grid(n)` and `gridsize(n)` give n numbers."""

    def __init__(self, path: str = "") -> None:
        self.path = path

    def attribute(self, name: str) -> Intrinsic:
        """The one Intrinsic of that path (the walk compares values by identity)."""
        path = f"{self.path}.{name}" if self.path else name
        found = _intrinsics.get(path)
        if found is None:
            found = _intrinsics[path] = Intrinsic(path)
        return found

    @property
    def writes(self) -> bool:
        # the atomics and the cache-hinted stores (cuda.stcs(array, i, value), ...)
        return self.path.startswith("atomic") or self.path.split(".")[-1] in _STORES


_intrinsics: dict[str, Intrinsic] = {}
_STORES = frozenset({"stcg", "stcs", "stwb", "stwt"})
INTRINSIC = Intrinsic()  # the `cuda` module itself, as the analysis sees it

# functions that read their arguments and return numbers (or, for const.array_like, a view)
_PURE_BUILTINS = frozenset({abs, min, max, int, float, round, bool, complex, range, divmod,
                            pow})
TUPLE_RESULTS = frozenset({divmod})  # pure builtins that give a tuple


def is_ufunc(fn: Any) -> bool:
    import numpy as np
    return isinstance(fn, np.ufunc)


def is_pure(fn: Any) -> bool:
    """A function of Numba's, Python's or math's that stores to none of its arguments."""
    import numpy as np
    if isinstance(fn, Intrinsic):
        return not fn.writes
    try:
        if fn in _PURE_BUILTINS:
            return True
    except TypeError:  # unhashable
        return False
    module = getattr(fn, "__module__", None) or ""
    return module in ("math", "cmath") or isinstance(fn, np.ufunc)

# Functions of these packages are Numba's own implementations (np.sum, math.sin): they
# touch only their arguments. Any other plain function a kernel calls is a
# register_jitable helper (Numba refuses other Python functions): its code is followed.
_LIBRARY_PACKAGES = ("numpy", "numba", "math", "cmath", "operator", "builtins")


def is_number(value: Any) -> bool:
    """A value that, used as an index, takes an element: a number, or one of Numba's
    intrinsics (`cuda.threadIdx.x`, `cuda.grid`) whose results are numbers."""
    import numpy as np
    if isinstance(value, (int, float, complex, np.number, Intrinsic)):
        return True
    from .captured import is_device_array
    module = getattr(value, "__module__", None) or type(value).__module__ or ""
    return module.split(".")[0] == "numba" and not is_device_function(value) \
        and not is_kernel(value) and not is_device_array(value)


def is_stub(found: Any) -> bool:
    """An attribute of `numba.cuda` that is one of its intrinsics (or, under the simulator,
    missing): not a submodule (`cuda.random`), not a compiled function."""
    if found is None:
        return True
    if isinstance(found, types.ModuleType) or followed_function(found) is not None or \
            hasattr(found, "py_func"):
        return False
    module = getattr(found, "__module__", None) or type(found).__module__ or ""
    return module.startswith("numba.cuda")


def is_intrinsic_module(value: Any) -> bool:
    from numba import cuda
    return value is cuda


def followed_function(fn: Any) -> Callable | None:
    """The Python function whose code runs when a kernel calls `fn`, where the analysis
    can follow it; None for Numba's and NumPy's functions and for what is not a function."""
    if is_device_function(fn) or is_kernel(fn):
        return kernel_py_func(fn)
    func = getattr(fn, "py_func", None)  # numba.njit functions
    registered = isinstance(func, types.FunctionType)
    if not registered:
        func = fn
        # a plain function runs in a kernel only as register_jitable or @overload makes it
        # (a host function of the same name as an attribute the code uses is not one)
        registered = isinstance(func, types.FunctionType) and bool(overload_functions(func))
    module = (getattr(func, "__module__", None) or "").split(".")[0]
    return func if registered and module not in _LIBRARY_PACKAGES else None


def overloads_of(func: Callable) -> list[Callable]:
    """The @overload functions registered for a plain function, other than the one
    register_jitable makes: Numba compiles what they return, not `func`'s own code."""
    # a template with no overload function (type_callable + lower_builtin) hides its
    # implementation: the function itself stands for it (not followed, its names count)
    return [func if f is None else f for f in overload_functions(func)
            if f is None or not _is_register_jitable(f, func)]


def method_overloads(attr: str) -> list[Callable]:
    """The user's @overload_method / @overload_attribute functions named `attr` (Numba's
    own are left out: they touch only their arguments)."""
    found = []
    for registry in _registries():
        for template in list(registry.attributes):
            func = getattr(template, "_overload_func", None)
            if getattr(template, "_attr", None) == attr and func is not None and \
                    (getattr(func, "__module__", "") or "").split(".")[0] not in _LIBRARY_PACKAGES:
                found.append(func)
    return found


def _registries() -> list[Any]:
    from numba.core.typing.templates import builtin_registry as core_registry
    registries = [core_registry]
    try:
        from numba.cuda.typing.templates import builtin_registry as cuda_registry
        registries.append(cuda_registry)
    except ImportError:
        pass
    return registries


def overload_functions(func: Callable) -> list[Any]:
    """The functions @overload (and register_jitable) registered for `func`, for Numba's
    and numba-cuda's typing registries."""
    registries = _registries()
    size = sum(len(r.globals) for r in registries)
    known = _overloads.get(func)
    if known is not None and known[0] == size:  # nothing registered since
        return known[1]
    found = []
    for registry in registries:
        for fn, fnty in list(registry.globals):
            if fn is func:
                found += [getattr(t, "_overload_func", None) for t in
                          getattr(fnty, "templates", ())]
    _overloads[func] = (size, found)
    return found


_overloads: weakref.WeakKeyDictionary[Callable, tuple[int, list]] = weakref.WeakKeyDictionary()


def _is_register_jitable(overload_func: Any, func: Callable) -> bool:
    """register_jitable's overload hands back the function itself."""
    cells = getattr(overload_func, "__closure__", None) or ()
    return getattr(getattr(overload_func, "__code__", None), "co_name", "") == "ov_wrap" and \
        any(getattr(c, "cell_contents", None) is func for c in cells)


def bind_call(func: Callable, args: list, kws: list, vararg: Any) -> list | None:
    """One IR variable per parameter of `func` the call gives (positionally first, then by
    keyword; trailing parameters take their defaults), or None where the binding is not
    that simple (`f(*t)`, a skipped parameter, keyword-only ones)."""
    if vararg is not None:
        return None
    code = func.__code__
    names = code.co_varnames[:code.co_argcount]
    slots: list[Any] = list(args)
    if not kws:
        return slots if len(slots) <= len(names) or code.co_flags & inspect.CO_VARARGS \
            else None
    if len(slots) > len(names):
        return None
    slots += [None] * (len(names) - len(slots))
    for name, var in kws:
        if name not in names or slots[names.index(name)] is not None:
            return None
        slots[names.index(name)] = var
    while slots and slots[-1] is None:
        slots.pop()
    return None if any(s is None for s in slots) else slots
