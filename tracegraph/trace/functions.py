"""What a traced function calls besides kernels: graph-owned arrays (tg.empty, tg.zeros),
events, host callbacks, and tg.access declarations of what a kernel reads and writes."""
from __future__ import annotations

import inspect
import logging
import operator
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .. import _numba
from ..errors import TraceError
from ..ir import (
    OpKind,
)
from ..location import user_location
from ..traced import Array

log = logging.getLogger("tracegraph.trace")

# ---------------------------------------------------------------------------
# declared accesses

# kernel -> (reads, writes): argument positions, or ("*", k) for every argument from k on
_declared: weakref.WeakKeyDictionary[Any, tuple[frozenset, frozenset]] = \
    weakref.WeakKeyDictionary()


def access(kernel: Any, *, reads: Iterable[str | int] = (),
           writes: Iterable[str | int] = ()) -> Any:
    """Declare which parameters `kernel` reads and writes, overriding inference.

    Parameters are named or numbered (positions of the launch's arguments); naming a
    `*args` parameter covers every argument it collects. Array parameters in neither list
    are taken as read. Returns the kernel, so it can wrap the definition.
    """
    if not _numba.is_kernel(kernel):
        raise TraceError(f"tg.access expects a @cuda.jit kernel, got {type(kernel).__name__}",
                         where=user_location(2), fix="pass the kernel object itself")
    params = list(inspect.signature(_numba.kernel_py_func(kernel)).parameters.values())
    names = [p.name for p in params]
    star = next((k for k, p in enumerate(params) if p.kind == p.VAR_POSITIONAL), None)

    def index(p: str | int) -> Any:
        if isinstance(p, int) and p >= 0 and (p < len(names) or star is not None):
            return p
        if isinstance(p, str) and p in names:
            k = names.index(p)
            return ("*", k) if k == star else k
        raise TraceError(f"tg.access: {_numba.kernel_name(kernel)} has no parameter {p!r}",
                         where=user_location(3), fix=f"use one of {names}")

    _declared[kernel] = (frozenset(map(index, _names(reads, "reads"))),
                         frozenset(map(index, _names(writes, "writes"))))
    return kernel


def _names(given: Any, what: str) -> tuple:
    """One parameter (a name or a position) or several; a string is one name, not the
    letters of several (writes="xy" must not mean parameters x and y)."""
    if given is None:
        return ()
    if isinstance(given, (str, int)):
        return (given,)
    try:
        return tuple(given)
    except TypeError:
        raise TraceError(f"tg.access: {what}= takes parameter names or positions, got "
                         f"{type(given).__name__}", where=user_location(3),
                         fix=f"pass {what}=('name', ...) or {what}='name'") from None


def declared_access(kernel: Any) -> Any:
    """What tg.access declared for `kernel` now (None: nothing)."""
    return _declared.get(kernel)


def _declares(positions: frozenset, i: int) -> bool:
    return i in positions or any(type(p) is tuple and i >= p[1] for p in positions)


def _kernel_access(kernel: Any, ndims: tuple[int | None, ...],
                   records: frozenset[int]) -> _numba.KernelAccess:
    """What a launch touches: declared (tg.access) or inferred for its parameters, always
    inferred for the arrays the kernel names as globals or closure variables."""
    try:
        inferred = _numba.infer_kernel_access(kernel, ndims, records)
    except Exception as exc:
        log.debug("access inference failed for %s (%s); assuming read+write",
                  _numba.kernel_name(kernel), exc)
        inferred = None
    declared = _declared.get(kernel)
    if declared is not None:
        reads, writes = declared
        params = tuple(("w" if _declares(writes, i) and not _declares(reads, i) else
                        "rw" if _declares(writes, i) else "r") if nd is not None else ""
                       for i, nd in enumerate(ndims))
        stored = frozenset(i for i in range(len(ndims)) if _declares(writes, i))
        return _numba.KernelAccess(params, stored,
                                   inferred.globals if inferred is not None else
                                   _numba.unknown_globals(kernel),
                                   depends=inferred.depends if inferred is not None else ())
    if inferred is None:
        return _numba.KernelAccess(tuple("rw" if nd is not None else "" for nd in ndims),
                                   frozenset(), _numba.unknown_globals(kernel))
    return inferred


# ---------------------------------------------------------------------------
# creating graph-owned arrays

def _active(fn_name: str) -> Any:
    tracer = _numba.current_tracer()
    if tracer is None:
        raise TraceError(f"tg.{fn_name} is only meaningful inside a @tg.compile function",
                         where=user_location(3),
                         fix="call it from the traced function, or use numba.cuda.device_array")
    return tracer


MAX_BYTES = 2**63 - 1  # Numba indexes memory with int64


def _shape(shape: Any) -> tuple[int, ...]:
    """A shape as ints: integers only (2.0 is refused, as NumPy refuses it)."""
    try:
        dims = [shape] if np.ndim(shape) == 0 else list(shape)
        if any(isinstance(d, (bool, np.bool_)) for d in dims):
            raise TypeError("a bool is not a size")
        return tuple(operator.index(d) for d in dims)
    except TypeError:
        raise TraceError(f"shape {shape!r} is not a tuple of integers", where=user_location(3),
                         fix="pass integer dimensions, e.g. tg.empty((n, 4))") from None


def _dtype(dtype: Any) -> np.dtype:
    dt = np.dtype(dtype)
    problem = _numba.dtype_problem(dt)
    if problem is not None:
        raise TraceError(f"dtype {dt} cannot live in a graph-owned array: {problem}",
                         where=user_location(3),
                         fix="use a numeric, boolean, datetime or record dtype")
    return dt


def empty(shape: Any, dtype: Any = np.float64) -> Array:
    """A graph-owned array; its contents are undefined until a kernel writes them."""
    return _active("empty").new_array(_shape(shape), _dtype(dtype), zero=False)


def zeros(shape: Any, dtype: Any = np.float64) -> Array:
    """A graph-owned array set to zero by a memset node, on every replay."""
    return _active("zeros").new_array(_shape(shape), _dtype(dtype), zero=True)


def empty_like(a: Any, dtype: Any = None) -> Array:
    return _active("empty_like").new_array(_shape(a.shape), _dtype(dtype or a.dtype), zero=False)


def zeros_like(a: Any, dtype: Any = None) -> Array:
    return _active("zeros_like").new_array(_shape(a.shape), _dtype(dtype or a.dtype), zero=True)


def length() -> Any:
    """In a function compiled with dynamic=: the true length n of this call's dynamic axis
    (the arrays kernels see have the bucket's length, n rounded up). Pass it to kernels
    and guard with it: `if i < n:`. A kernel parameter the graph patches on every call."""
    tracer = _active("length")
    if tracer.length is None:
        raise TraceError("tg.length() is the true length of a dynamic axis, and this "
                         "function was compiled without dynamic=", where=user_location(2),
                         fix='declare the varying axis, e.g. tg.compile(dynamic={"x": 0}, '
                             'buckets="pow2")')
    return tracer.length


def record(event: Any, *arrays_: Array) -> None:
    """Record `event` once the launches writing `arrays_` (all earlier work if none) finish."""
    _active("record").record_event(OpKind.EVENT_RECORD, event, arrays_, "r")


def wait(event: Any, *arrays_: Array) -> None:
    """Make later work on `arrays_` (all later work if none) wait for `event`."""
    _active("wait").record_event(OpKind.EVENT_WAIT, event, arrays_, "w")


def callback(fn: Callable[[], Any], *arrays_: Array) -> None:
    """Call `fn()` on the host once the launches writing `arrays_` have finished.

    `fn` must not call CUDA (no launches, copies or synchronization): the driver runs
    it on its own thread while the graph is in flight.
    """
    tracer = _active("callback")
    if not callable(fn):
        raise TraceError(f"tg.callback expects a callable, got {type(fn).__name__}",
                         where=user_location(2), fix="pass a function taking no arguments")
    tracer.record_host(fn, arrays_)

