"""The tracer: runs the user's function once with traced arrays and records, in order,
every launch it makes. Nothing executes and no GPU is needed."""
from __future__ import annotations

import inspect
import logging
import math
import operator
from dataclasses import replace
import warnings
import weakref
from typing import Any, Callable, Iterable

import numpy as np

from . import _numba, pytree, side_effects
from .signature import arguments
from .errors import TraceError
from .traced import Array, tracer_of, view_of
from .ir import (DEVICE_INPUT, EXTERNAL, HOST_CONSTANT, HOST_INPUT, STAGING, TEMP, Access, Buffer,
                 Copy, CopyRole, EventUse, Fill, HostCall, InputKind, InputLeaf, Launch, Op,
                 OpKind, OutputKind, OutputLeaf, Program, View, contiguous_strides, op_graph)
from .location import user_location

log = logging.getLogger("tracegraph.trace")

# ---------------------------------------------------------------------------
# declared accesses

# kernel -> (reads, writes): argument positions, or ("*", k) for every argument from k on
_declared: weakref.WeakKeyDictionary[Any, tuple[frozenset, frozenset]] = \
    weakref.WeakKeyDictionary()


def access(kernel: Any, *, reads: Iterable[str | int] = (), writes: Iterable[str | int] = ()) -> Any:
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

    _declared[kernel] = (frozenset(map(index, reads)), frozenset(map(index, writes)))
    return kernel


def _declares(positions: frozenset, i: int) -> bool:
    return i in positions or any(type(p) is tuple and i >= p[1] for p in positions)


def _kernel_access(kernel: Any, ndims: tuple[int | None, ...],
                   records: frozenset[int]) -> _numba.KernelAccess:
    """What a launch touches: declared (tg.access) or inferred for its parameters, always
    inferred for the arrays the kernel names as globals or closure variables."""
    try:
        inferred = _numba.infer_kernel_access(kernel, ndims, records)
    except Exception as exc:  # noqa: BLE001 - unreadable IR: assume everything is touched
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
                                   _numba.unknown_globals(kernel))
    if inferred is None:
        return _numba.KernelAccess(tuple("rw" if nd is not None else "" for nd in ndims),
                                   frozenset(), _numba.unknown_globals(kernel))
    return inferred


# ---------------------------------------------------------------------------
# creating graph-owned arrays

def _active(fn_name: str) -> "Tracer":
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


# ---------------------------------------------------------------------------
# the tracer

class Tracer:
    def __init__(self, name: str):
        self.name = name
        self.ops: list[Op] = []
        self.buffers: list[Buffer] = []
        self.launches = 0  # launches asked for, also those that run nothing (0 elements)
        self._externals: dict[int, int] = {}  # id(device array) -> buffer
        self._external_refs: list[Any] = []
        self._warned_stream = False

    def new_buffer(self, nbytes: int, kind: str, name: str = "", *, input_index: int | None = None,
                   external: Any = None, address: int = 0) -> int:
        b = Buffer(len(self.buffers), int(nbytes), kind, name or f"{kind}{len(self.buffers)}",
                   input_index, external, address)
        self.buffers.append(b)
        return b.id

    def new_array(self, shape: tuple[int, ...], dtype: np.dtype, *, zero: bool) -> Array:
        if any(s < 0 for s in shape):
            raise TraceError(f"negative dimension in shape {shape}", where=user_location(3),
                             fix="check the shape")
        nbytes = math.prod(shape) * dtype.itemsize  # Python ints: no wrap-around
        if nbytes > MAX_BYTES:
            raise TraceError(f"an array of shape {shape} and dtype {dtype} would take "
                             f"{nbytes} bytes, more than any device can address",
                             where=user_location(3), fix="check the shape")
        buf = self.new_buffer(nbytes, TEMP)
        view = View(buf, 0, shape, contiguous_strides(shape, dtype.itemsize), dtype)
        if zero and nbytes:
            self.ops.append(Op(OpKind.MEMSET, "zeros", (Access(buf, 0, nbytes, "w"),),
                               user_location(3), Fill(view, 0)))
        return Array(self, view)

    def view_of(self, a: Array) -> View:
        if tracer_of(a) is not self:
            raise TraceError("a traced array from another trace was used",
                             where=user_location(4),
                             fix="do not keep traced arrays between calls or share them "
                                 "between compiled functions")
        return view_of(a)

    # -- launches -----------------------------------------------------------
    def record_launch(self, kernel: Any, griddim: Any, blockdim: Any, sharedmem: int,
                      args: tuple, *, stream: bool = False) -> None:
        where = user_location(3)
        name = _numba.kernel_name(kernel)
        self.launches += 1
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
        if _numba.uses_grid_sync(kernel):
            raise TraceError(f"kernel {name} synchronizes the whole grid "
                             "(cuda.cg.this_grid().sync()): that needs a cooperative launch, "
                             "which cannot be a node of an explicit CUDA graph here",
                             where=where, fix=f"split {name} at the grid sync into two kernels "
                                              "launched one after the other")
        if stream and not self._warned_stream:
            self._warned_stream = True
            warnings.warn(f"{where}: a stream given to {name} inside a traced function is "
                          "ignored; the graph orders launches by the data they touch",
                          stacklevel=4)
        traced_args = tuple(self._arg(a, name, where, i) for i, a in enumerate(args))
        ndims = tuple(_rank(a) for a in traced_args)
        records = frozenset(i for i, a in enumerate(traced_args)
                            if any(v.dtype.names for v in _views(a)))
        found = _kernel_access(kernel, ndims, records)
        accesses = []
        for i, (arg, mode) in enumerate(zip(traced_args, found.params)):
            if mode:
                for v in _views(arg):
                    if v.readonly and "w" in mode and i in found.stored:
                        raise TraceError(f"kernel {name} stores to argument {i}, a read-only "
                                         "array (eager Numba refuses to compile that)",
                                         where=where,
                                         fix="pass a writable array (e.g. a copy), or do not "
                                             "write it in the kernel")
                    start, stop = v.byte_range()
                    accesses.append(Access(v.buffer, start, stop, mode))
        accesses += self._captured_accesses(found.globals, name, where)
        self.ops.append(Op(OpKind.KERNEL, name, tuple(accesses), where,
                           Launch(kernel, _dim3(griddim), _dim3(blockdim), int(sharedmem or 0),
                                  traced_args)))

    def _captured_accesses(self, found: tuple, kernel: str, where: str) -> list[Access]:
        """Accesses to the device arrays a kernel names as globals or closure variables:
        their whole bytes, in the mode the kernel uses them."""
        out = []
        for ref, mode in found:
            for obj in _device_arrays(ref.resolve()):
                if isinstance(obj, Array):
                    raise TraceError(f"kernel {kernel} names a traced array through "
                                     f"{ref.describe()}", where=where,
                                     fix="pass traced arrays to kernels as arguments")
                info = arguments.describe(obj)
                if info is None or info.placement != arguments.DEVICE:
                    continue
                buf = self._external(obj, info).buffer
                out.append(Access(buf, 0, self.buffers[buf].nbytes, mode))
        return out

    def _arg(self, a: Any, kernel: str, where: str, i: int) -> Any:
        if isinstance(a, Array):
            return self.view_of(a)
        if isinstance(a, np.ndarray):
            raise TraceError(f"argument {i} of {kernel} is a host NumPy array: Numba would "
                             "copy it to the device and back implicitly, which cannot be "
                             "part of a graph", where=where,
                             fix="pass it as an argument of the traced function (it becomes "
                                 "a graph input), or copy it to the device once with "
                                 "cuda.to_device outside")
        if isinstance(a, tuple):
            items = [self._arg(x, kernel, where, i) for x in a]
            return type(a)(*items) if hasattr(a, "_fields") else tuple(items)
        info = arguments.describe(a)
        if info is not None:
            return self._external(a, info)
        if _numba.scalar_type(a) is not None:
            return a
        raise TraceError(f"argument {i} of {kernel} has type {type(a).__name__}, which cannot "
                         "live in a graph", where=where,
                         fix="pass traced arrays, device arrays, NumPy/Python scalars or tuples "
                             "of these")

    def _external(self, obj: Any, info: arguments.ArrayInfo) -> View:
        """A device array captured from outside: baked into the graph by address. Captured
        arrays whose bytes overlap share memory (ir.memory_regions orders them)."""
        lo, hi = info.extent
        buf = self._externals.get(id(obj))
        if buf is None:
            buf = self.new_buffer(hi - lo, EXTERNAL, f"captured{len(self._external_refs)}",
                                  external=obj, address=lo)
            self._externals[id(obj)] = buf
            self._external_refs.append(obj)
        return View(buf, info.ptr - lo, info.shape, info.strides, info.dtype, info.readonly)

    def record_event(self, kind: OpKind, event: Any, arrays_: tuple, mode: str) -> None:
        views = [self.view_of(a) for a in arrays_]
        accesses = tuple(Access(v.buffer, *v.byte_range(), mode) for v in views)
        self.ops.append(Op(kind, kind, accesses, user_location(3), EventUse(event),
                           barrier=not views))

    def record_host(self, fn: Callable, arrays_: tuple) -> None:
        views = [self.view_of(a) for a in arrays_]
        accesses = tuple(Access(v.buffer, *v.byte_range(), "r") for v in views)
        name = getattr(fn, "__name__", "callback")
        self.ops.append(Op(OpKind.HOST, name, accesses, user_location(3), HostCall(fn),
                           barrier=not views))

    # -- Numba's host API called while tracing (_numba/hooks.py) --------------
    def device_array(self, shape: Any, dtype: Any, order: str = "C") -> Array:
        """cuda.device_array inside a traced function: a graph-owned array."""
        shape = _shape(shape)
        if order == "F":
            return self.new_array(shape[::-1], _dtype(dtype), zero=False).T
        return self.new_array(shape, _dtype(dtype), zero=False)

    def host_to_device(self, host: Any, dst: View | None, where: str) -> Array | None:
        """cuda.to_device(host) (dst None: into a new graph-owned array) or a copy of host
        data into `dst`, as eager Numba does it on every call: the graph copies the held
        host array's current contents in on every replay."""
        if isinstance(host, Array):
            raise TraceError("cuda.to_device() got a traced array, which already is on the "
                             "device", where=where, fix="use it directly, or tg.ops.copy")
        data = np.asarray(host)
        problem = _numba.dtype_problem(data.dtype)
        if problem is not None:
            raise TraceError(f"cuda.to_device() of a {data.dtype} array: {problem}",
                             where=where, fix="copy numeric data")
        if dst is None:
            dst = view_of(self.new_array(tuple(data.shape), data.dtype, zero=False))
        elif dst.size != data.size or dst.dtype != data.dtype or not dst.is_c_contiguous():
            raise TraceError(f"copying a {data.dtype}{list(data.shape)} host array into a "
                             f"{dst.dtype}{list(dst.shape)} device array", where=where,
                             fix="copy into a contiguous device array of the same size and "
                                 "dtype")
        nbytes = data.size * data.dtype.itemsize
        held = self.new_buffer(nbytes, HOST_CONSTANT, "host constant", external=host)
        start, _ = dst.byte_range()
        self.copy(_bytes_view(dst.buffer, start, nbytes), _bytes_view(held, 0, nbytes),
                  "copy in a host array", CopyRole.CONSTANT, where)
        return Array(self, dst)

    def device_copy(self, dst: View, src: View, where: str) -> None:
        """One device array copied into another (copy_to_device of a device array)."""
        if dst.shape != src.shape or dst.dtype != src.dtype or not (
                dst.is_c_contiguous() and src.is_c_contiguous()):
            raise TraceError(f"copying a {src.dtype}{list(src.shape)} device array into a "
                             f"{dst.dtype}{list(dst.shape)} one", where=where,
                             fix="copy between contiguous arrays of one shape and dtype, or "
                                 "use tg.ops.copy")
        (a, b), (c, _) = dst.byte_range(), src.byte_range()
        self.copy(_bytes_view(dst.buffer, a, b - a), _bytes_view(src.buffer, c, b - a),
                  "device copy", CopyRole.USER, where)

    def view_or_external(self, obj: Any) -> View | None:
        """The view a traced array or a captured device array stands for, or None."""
        if isinstance(obj, Array):
            return self.view_of(obj)
        info = arguments.describe(obj)
        if info is not None and info.placement == arguments.DEVICE:
            return self._external(obj, info)
        return None

    def copy(self, dst: View, src: View, name: str, role: CopyRole = CopyRole.USER,
             where: str = "") -> None:
        """A memcpy op between two contiguous byte ranges of equal size; `role` says why
        (the copies tracing adds around the user's ops have their own)."""
        a, b = dst.byte_range(), src.byte_range()
        self.ops.append(Op(OpKind.MEMCPY, name, (Access(dst.buffer, *a, "w"),
                                                 Access(src.buffer, *b, "r")),
                           where, Copy(dst, src, role)))


def _dim3(d: Any) -> tuple[int, int, int]:
    if isinstance(d, (int, np.integer)):
        return (int(d), 1, 1)
    d = tuple(int(x) for x in d)
    return d + (1,) * (3 - len(d))


def _device_arrays(value: Any) -> list[Any]:
    """The arrays a captured global holds (itself, or the members of a tuple)."""
    if type(value) is tuple:
        return [a for v in value for a in _device_arrays(v)]
    return [value] if value is not None and not isinstance(value, (int, float, complex, str)) \
        else []


def _views(arg: Any) -> list[View]:
    if isinstance(arg, View):
        return [arg]
    if isinstance(arg, tuple):
        return [v for x in arg for v in _views(x)]
    return []


def _rank(arg: Any) -> int | None:
    if isinstance(arg, View):
        return len(arg.shape)
    if isinstance(arg, tuple):
        return -1 if _views(arg) else None
    return None


def _bytes_view(buffer: int, offset: int, nbytes: int) -> View:
    return View(buffer, offset, (nbytes,), (1,), np.dtype(np.uint8))


# ---------------------------------------------------------------------------
# tracing a whole function

def trace_function(fn: Callable, leaves: list[Any], paths: list[str], tree: Any,
                   infos: list[arguments.ArrayInfo | None],
                   groups: list[tuple[int, int] | None]) -> Program:
    """Run `fn` once on traced stand-ins for its array arguments; return the Program.

    `leaves` are the flattened arguments (tree rebuilds (args, kwargs)), `infos` their
    ArrayInfo (None for static values) and `groups` which of them share memory.
    """
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", "fn"))
    tracer = Tracer(name)
    inputs, stand_ins = _bind_inputs(tracer, leaves, paths, infos, groups)
    n_prologue = len(tracer.ops)
    side_effects.warn_side_effects(fn, name)
    previous = _numba.set_tracer(tracer)
    try:
        args, kwargs = pytree.unflatten(tree, stand_ins)
        result = fn(*args, **kwargs)
    finally:
        _numba.set_tracer(previous)
    if len(tracer.ops) == n_prologue and not tracer.launches:
        raise TraceError(f"the traced function {name} launched nothing",
                         where=_def_location(fn),
                         fix="launch at least one kernel (or tg.ops call) inside it, or call "
                             "it without @tg.compile")
    device_mode = any(i is not None and i.placement == arguments.DEVICE for i in infos)
    outputs, out_tree = _bind_outputs(tracer, result, inputs, device_mode, name, fn, stand_ins)
    inputs = _mark_written_and_write_back(tracer, inputs)
    ops = tuple(tracer.ops)
    return Program(name, ops, tuple(tracer.buffers), tuple(inputs), tree, tuple(outputs),
                   out_tree, op_graph(ops), device_mode,
                   aliased_inputs(tracer.buffers, inputs, infos))


def aliased_inputs(buffers: list[Buffer], inputs: list[InputLeaf],
                   infos: list[arguments.ArrayInfo | None]) -> frozenset[tuple[int, int]]:
    """(device input buffer, captured buffer) pairs whose bytes overlap in this call."""
    captured = [(b.address, b.address + b.nbytes, b.id) for b in buffers
                if b.kind == EXTERNAL and b.nbytes]
    if not captured:
        return frozenset()
    pairs = set()
    for inp in inputs:
        if inp.kind != "array" or inp.staging is not None:
            continue
        lo, hi = infos[inp.index].extent
        pairs.update((inp.buffer, b) for x, y, b in captured if x < hi and lo < y)
    return frozenset(pairs)


def _def_location(fn: Callable) -> str:
    code = getattr(fn, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code else "?"


def _bind_inputs(tracer: Tracer, leaves: list, paths: list[str], infos: list,
                 groups: list) -> tuple[list[InputLeaf], list[Any]]:
    inputs: list[InputLeaf] = []
    stand_ins: list[Any] = []
    group_buffers: dict[int, tuple[int, int | None]] = {}
    # a group's buffer spans the union of its members' bytes
    spans: dict[int, int] = {}
    for info, g in zip(infos, groups):
        if info is not None:
            lo, hi = info.extent
            spans[g[0]] = max(spans.get(g[0], 0), g[1] + hi - lo)
    for i, (leaf, path, info, g) in enumerate(zip(leaves, paths, infos, groups)):
        if info is None:
            if isinstance(leaf, Array):
                raise TraceError(f"argument {path} is a traced array from another trace",
                                 where=user_location(4), fix="pass real arrays to compiled functions")
            inputs.append(InputLeaf(i, path, InputKind.STATIC, value=leaf))
            stand_ins.append(leaf)
            continue
        problem = _numba.dtype_problem(info.dtype)
        if problem is not None:
            raise TraceError(f"argument {path} is an array of dtype {info.dtype}, which cannot "
                             f"be passed to a CUDA kernel: {problem}", where=user_location(4),
                             fix="pass an array of a numeric, boolean, datetime or record dtype")
        first, delta = g
        if first not in group_buffers:
            nbytes = spans[first]
            if info.placement == arguments.HOST:
                staging = tracer.new_buffer(nbytes, STAGING, f"{path} (pinned)", input_index=i)
                buf = tracer.new_buffer(nbytes, HOST_INPUT, path, input_index=i)
                tracer.copy(_bytes_view(buf, 0, nbytes), _bytes_view(staging, 0, nbytes),
                            f"copy in {path}", CopyRole.INPUT)
            else:
                staging = None
                buf = tracer.new_buffer(nbytes, DEVICE_INPUT, path, input_index=i)
            group_buffers[first] = (buf, staging)
        buf, staging = group_buffers[first]
        lo, _ = info.extent
        view = View(buf, delta + info.ptr - lo, tuple(info.shape), tuple(info.strides), info.dtype,
                    info.readonly)
        inputs.append(InputLeaf(i, path, InputKind.ARRAY, info.placement, view.shape, info.dtype,
                                view.strides, buf, staging, view))
        stand_ins.append(Array(tracer, view))
    return inputs, stand_ins


def _bind_outputs(tracer: Tracer, result: Any, inputs: list[InputLeaf], device_mode: bool,
                  name: str, fn: Callable, stand_ins: list[Any]) -> tuple[list[OutputLeaf], Any]:
    leaves, paths, tree = pytree.flatten(result, "result")
    # an input handed back is that input (two arguments may be the same memory)
    by_id = {id(a): i for i, a in enumerate(stand_ins) if isinstance(a, Array)}
    by_view: dict[View, int] = {}
    for inp in inputs:
        if inp.kind == "array":
            by_view.setdefault(inp.view, inp.index)
    outputs: list[OutputLeaf] = []
    for leaf, path in zip(leaves, paths):
        if isinstance(leaf, Array):
            view = tracer.view_of(leaf)
            index = by_id.get(id(leaf), by_view.get(view))
            if index is not None:
                outputs.append(OutputLeaf(OutputKind.INPUT, input_index=index))
                continue
            buffer = tracer.buffers[view.buffer]
            if device_mode and buffer.kind in (TEMP, EXTERNAL):
                outputs.append(OutputLeaf(OutputKind.DEVICE, view=view))
                continue
            # a copy: into pinned memory for NumPy results, into fresh device memory for a
            # view of a caller's array (which the caller may reuse)
            start, stop = view.byte_range()
            kind = STAGING if not device_mode else TEMP
            dst = tracer.new_buffer(stop - start, kind, f"{path}")
            tracer.copy(_bytes_view(dst, 0, stop - start),
                        _bytes_view(view.buffer, start, stop - start), f"copy out {path}",
                        CopyRole.OUTPUT, _def_location(fn))
            out_view = View(dst, view.offset - start, view.shape, view.strides, view.dtype)
            outputs.append(OutputLeaf(OutputKind.DEVICE if device_mode else OutputKind.HOST, view=out_view))
        elif isinstance(leaf, (np.ndarray,)) or arguments.describe(leaf) is not None:
            raise TraceError(f"{name} returned a {type(leaf).__name__} at {path} that is not "
                             "a traced array", where=_def_location(fn),
                             fix="return arrays made inside the traced function (tg.empty, "
                                 "tg.ops) or its array arguments")
        else:
            outputs.append(OutputLeaf(OutputKind.STATIC, value=leaf))
    return outputs, tree


def _mark_written_and_write_back(tracer: Tracer, inputs: list[InputLeaf]) -> list[InputLeaf]:
    """Flag the inputs whose bytes some op writes; copy written NumPy input buffers back to
    pinned staging (the backends copy a written leaf's own elements from there into the
    caller's array: never the bytes between a strided view's elements)."""
    writes: dict[int, list[tuple[int, int]]] = {}
    for op in tracer.ops:
        if isinstance(op.data, Copy) and op.data.role == CopyRole.INPUT:
            continue
        for a in op.accesses:
            if a.writes and a.stop > a.start:
                writes.setdefault(a.buffer, []).append((a.start, a.stop))
    copied_back = set()
    out = []
    for inp in inputs:
        if inp.kind != "array":
            out.append(inp)
            continue
        lo, hi = inp.view.byte_range()
        is_written = any(s < hi and lo < e for s, e in writes.get(inp.buffer, ()))
        if is_written and not inp.view.readonly and inp.placement == arguments.HOST and \
                inp.buffer not in copied_back:
            copied_back.add(inp.buffer)
            n = tracer.buffers[inp.buffer].nbytes
            tracer.copy(_bytes_view(inp.staging, 0, n), _bytes_view(inp.buffer, 0, n),
                        f"write back {inp.path}", CopyRole.WRITE_BACK)
        out.append(replace(inp, written=is_written))
    return out
