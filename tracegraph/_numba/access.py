"""Read/write inference from a kernel's untyped Numba IR.

Every array a kernel can reach is accounted for: its parameters (also through `*args`,
tuples, views and record elements) and the device arrays its code names as globals or
closure variables (Numba captures those by address), in the kernel and in the device
functions (and register_jitable helpers) it calls. Whatever the analysis cannot follow
is read and written; a call it cannot follow counts every array the kernel can reach.
The walk over the IR lives in `access_walk.py`.
"""
from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .captured import GlobalRef, same_binding
from .kernels import kernel_py_func

# the rank the analysis gives a value that is not an array but may be a slice or a tuple
# (a device function's parameter given one): an index through it may make a view
OPAQUE = -2
_inference_cache: weakref.WeakKeyDictionary[Callable, dict] = weakref.WeakKeyDictionary()
_inference_lock = threading.RLock()


@dataclass(frozen=True)
class KernelAccess:
    """What one launch of a kernel can touch.

    params:  per launch argument, "" (untouched), "r", "w" or "rw"
    stored:  arguments the kernel certainly stores to (not only through unseen calls)
    globals: (GlobalRef, mode) for each global or closure variable that may hold arrays
    calls_unknown: it calls a function it was handed (a parameter, a tuple member), which
             may be any device function its callers can reach: they count what those
             capture
    depends: (GlobalRef, value) of each name holding a function the answer was found
             through: a name rebound since makes the answer stale
    returns_index: how many dimensions an index made of what it returns takes: 1 for a
             number, n for a tuple of n numbers, None when not known (maybe a slice)
    """
    params: tuple[str, ...]
    stored: frozenset[int]
    globals: tuple[tuple[GlobalRef, str], ...]
    calls_unknown: bool = False
    depends: tuple[tuple[GlobalRef, Any], ...] = ()
    returns_index: int | None = None

    def still_bound(self) -> bool:
        return all(same_binding(ref.resolve(), value) for ref, value in self.depends)


def infer_param_access(kernel: Any, ndims: tuple[int | None, ...]) -> tuple[str, ...]:
    """For each argument: "" (untouched), "r", "w" or "rw" (see infer_kernel_access)."""
    return infer_kernel_access(kernel, ndims).params


def infer_kernel_access(kernel: Any, ndims: tuple[int | None, ...],
                        records: frozenset[int] = frozenset()) -> KernelAccess:
    """What a launch with arguments of these ranks can touch, from the kernel's Numba IR.

    `ndims[i]` is the array rank of argument i, -1 for a tuple (its members share one
    answer), None for a scalar; `records` the arguments whose dtype is a record. A
    parameter passed to a call the analysis cannot see through counts as read and
    written.
    """
    func = kernel_py_func(kernel)
    key = (ndims, records)
    with _inference_lock:
        per_func = _inference_cache.setdefault(func, {})
        found = per_func.get(key)
        if found is None or not found.still_bound():
            found = per_func[key] = infer_launch(func, ndims, records, frozenset())
        return found


def infer_launch(func: Callable, ndims: tuple[int | None, ...], records: frozenset[int],
                 active: frozenset) -> KernelAccess:
    """Map a call's arguments onto the function's parameters (`*args` collects the rest
    as one tuple), infer, and map the answer back per argument. `active` holds the
    functions being inferred further up (a recursive call is not followed)."""
    code = func.__code__
    nfixed = code.co_argcount
    if not code.co_flags & inspect.CO_VARARGS or len(ndims) <= nfixed:
        return _infer(func, ndims, records, active)
    rest = ndims[nfixed:]
    star = -1 if any(r is not None for r in rest) else None
    inner = _infer(func, (*ndims[:nfixed], star),
                   frozenset(r for r in records if r < nfixed), active)
    star_mode = inner.params[nfixed] if len(inner.params) > nfixed else "rw"
    params = inner.params[:nfixed] + tuple(star_mode if r is not None else "" for r in rest)
    stored = {p for p in inner.stored if p < nfixed}
    if nfixed in inner.stored:
        stored.update(i for i, r in enumerate(ndims) if i >= nfixed and r is not None)
    return KernelAccess(params, frozenset(stored), inner.globals, inner.calls_unknown,
                        inner.depends, inner.returns_index)


def _infer(func: Callable, ndims: tuple[int | None, ...], records: frozenset[int],
           active: frozenset) -> KernelAccess:
    from .access_walk import AccessWalk  # it calls back into infer_launch for callees
    return AccessWalk(func, ndims, records, active).run()
