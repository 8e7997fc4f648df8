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
    Access,
    OpKind,
    View,
)
from ..location import user_location
from ..traced import Array

log = logging.getLogger("tracegraph.trace")

# ---------------------------------------------------------------------------
# declared accesses

# kernel -> (reads, writes): argument positions, or ("*", k) for every argument from k on
_declared: weakref.WeakKeyDictionary[Any, tuple[frozenset, frozenset]] = \
    weakref.WeakKeyDictionary()
# [how many declarations tg.access made]: a tracer's memo of a loop's launches keys on it,
# cheaper than looking the kernel up in _declared at every launch
DECLARATIONS = [0]


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
    DECLARATIONS[0] += 1
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
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TraceError(f"dtype {dtype!r} is not a NumPy dtype ({exc})",
                         where=user_location(3),
                         fix="pass a NumPy dtype, e.g. np.float32 or 'float32'") from None
    problem = _numba.dtype_problem(dt)
    if problem is not None:
        raise TraceError(f"dtype {dt} cannot live in a graph-owned array: {problem}",
                         where=user_location(3),
                         fix="use a numeric, boolean, datetime or record dtype")
    return dt


def empty(shape: Any, dtype: Any = np.float64, *, name: str | None = None) -> Array:
    """A graph-owned array; its contents are undefined until a kernel writes them.
    `name`: what tg.visualize and messages call it (else the result it is, or the kernel
    parameter that first writes it)."""
    return _active("empty").new_array(_shape(shape), _dtype(dtype), zero=False,
                                      name=_name(name))


def zeros(shape: Any, dtype: Any = np.float64, *, name: str | None = None) -> Array:
    """A graph-owned array set to zero by a memset node, on every replay (`name`: as
    tg.empty's)."""
    return _active("zeros").new_array(_shape(shape), _dtype(dtype), zero=True,
                                      name=_name(name))


def empty_like(a: Any, dtype: Any = None, *, name: str | None = None) -> Array:
    """A graph-owned array of `a`'s shape and dtype (or `dtype`), contents undefined."""
    tracer = _active("empty_like")
    shape, like = _like("empty_like", a)
    return tracer.new_array(shape, _dtype(dtype or like), zero=False, name=_name(name))


def zeros_like(a: Any, dtype: Any = None, *, name: str | None = None) -> Array:
    """A graph-owned array of `a`'s shape and dtype (or `dtype`), set to zero."""
    tracer = _active("zeros_like")
    shape, like = _like("zeros_like", a)
    return tracer.new_array(shape, _dtype(dtype or like), zero=True, name=_name(name))


def _name(name: Any) -> str | None:
    if name is not None and not isinstance(name, str):
        raise TraceError(f"name= is a string, got {type(name).__name__}",
                         where=user_location(3), fix="pass name='what it holds'")
    return name


def _like(fn_name: str, a: Any) -> tuple[tuple[int, ...], Any]:
    """The shape and dtype of `a`, an array of any kind (traced, device, NumPy)."""
    shape, dtype = getattr(a, "shape", None), getattr(a, "dtype", None)
    if shape is None or dtype is None:
        from .origins import what_it_is
        raise TraceError(f"tg.{fn_name}(a) makes an array like the array `a`, and got "
                         f"{what_it_is(a)}", where=user_location(3),
                         fix=f"pass an array (a traced, device or NumPy array), or use "
                             f"tg.{fn_name.removesuffix('_like')}(shape, dtype)")
    return _shape(shape), dtype


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


def _check_launchable(kernel: Any, name: str, where: str) -> None:
    """Refuse what cannot be a node of a graph, at the launch's line."""
    if _numba.is_device_function(kernel):
        raise TraceError(f"{name} is a device function (@cuda.jit(device=True)), which "
                         "cannot be launched", where=where,
                         fix=f"call {name} from a kernel, or define it without device=True")
    if _numba.kernel_extensions(kernel):
        raise TraceError(f"kernel {name} has argument extensions (kernel.extensions), "
                         "which convert arguments at each eager launch in ways a graph "
                         "cannot replay", where=where,
                         fix=f"launch {name} without extensions inside a traced function")
    if _numba.kernel_is_debug(kernel):
        raise TraceError(f"kernel {name} was compiled with debug=True: it reads back an "
                         "error code after every launch, so it cannot live in a graph",
                         where=where, fix=f"define {name} with @cuda.jit (debug=False) for "
                                          "use in a tracegraph function")


def _parameter_accesses(kernel: Any, traced_args: tuple, name: str,
                        where: str) -> tuple[tuple[Access, ...], tuple, tuple, bool]:
    """(accesses through its parameters, the globals and closure arrays it names, the names
    of functions it calls, whether it synchronizes the grid) of a launch of `kernel` with
    these arguments."""
    _check_launchable(kernel, name, where)
    ndims = tuple(_rank(a) for a in traced_args)
    records = frozenset(i for i, a in enumerate(traced_args)
                        if any(v.dtype.names for v in _views(a)))
    found = _kernel_access(kernel, ndims, records)
    return (tuple(_argument_accesses(traced_args, found, name, where)), found.globals,
            found.depends, _numba.uses_grid_sync(kernel))


def _argument_accesses(traced_args: tuple, found: Any, name: str, where: str) -> list[Access]:
    """One Access per array argument the kernel touches, in the mode it uses it; a store
    to a read-only one is refused (eager Numba refuses to compile it)."""
    accesses = []
    for i, (arg, mode) in enumerate(zip(traced_args, found.params)):
        if not mode:
            continue
        for v in _views(arg):
            if v.readonly and "w" in mode and i in found.stored:
                raise TraceError(f"kernel {name} stores to argument {i}, a read-only array "
                                 "(eager Numba refuses to compile that)", where=where,
                                 fix="pass a writable array (e.g. a copy), or do not write it "
                                     "in the kernel")
            start, stop = v.byte_range()
            accesses.append(Access(v.buffer, start, stop, mode))
    return accesses

def _views(arg: Any) -> list[View]:
    if isinstance(arg, View):
        return [arg]
    if isinstance(arg, tuple):
        return [v for x in arg for v in _views(x)]
    return []


def _rank(arg: Any) -> int | None:
    if isinstance(arg, View):
        return len(arg.shape)
    if isinstance(arg, tuple):  # of arrays; or of numbers, which as an index take len(t)
        return -1 if _views(arg) else _numba.OPAQUE
    return None
