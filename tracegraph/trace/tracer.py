"""The Tracer: what one trace records, launch by launch (buffers, views, accesses, ops),
including the arrays kernels capture by address and Numba's host API called while tracing."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _numba
from ..contract.compiled_in import CompiledIn
from ..errors import TraceError
from ..ir import (
    EXTERNAL,
    TEMP,
    Access,
    Buffer,
    BufferKind,
    Conditional,
    Copy,
    CopyRole,
    EventUse,
    Fill,
    HostCall,
    Launch,
    Op,
    OpKind,
    ScalarArg,
    View,
    args_key,
    contiguous_strides,
)
from ..location import user_location, warn
from ..signature import arguments
from ..traced import Array, DynamicScalar, tracer_of, view_of
from .functions import (
    DECLARATIONS,
    MAX_BYTES,
    _parameter_accesses,
    declared_access,
)
from .hostapi import HostAPI
from .launch_config import check_numba_form, checked_dims
from .origins import kernel_argument, what_it_is

# ---------------------------------------------------------------------------
# the tracer

class Tracer:
    def __init__(self, name: str):
        self.name = name
        self.ops: list[Op] = []
        self.buffers: list[Buffer] = []
        self.launches = 0  # launches asked for, also those that run nothing (0 elements)
        self.length: Any = None  # what tg.length() gives, in a dynamic function
        # (op, user's line, elements) of each op combining elements along an axis
        self.combines: list[tuple[str, str, int]] = []
        self._frames: list[list[Op]] = []  # the enclosing op lists, inside control flow
        self._externals: dict[int, int] = {}  # id(device array) -> buffer
        self._external_refs: list[Any] = []
        self._warned_stream = False
        self.node_attributes: Any = None  # what tg.node_attributes sets on launches now
        self._launches_seen: dict[tuple, tuple] = {}  # record_launch's memo
        self._same_launch: dict[tuple, tuple] = {}  # and of the very same launch
        # a global or closure variable kernels name -> (its GlobalRef, what it held, the
        # kernel, where first seen)
        self._bindings: dict[tuple, tuple[Any, Any, str, str]] = {}
        self.compiled_in = CompiledIn()  # what each specialization compiles in, then
        self.call: tuple | None = None  # (fn, args, kwargs) traced: where values came from
        self.given_names: set[int] = set()  # buffers made with name= (buffer_names.py)
        self.result_paths: list[str] = []  # the results' paths, once bound
        self.numba_api = HostAPI(self)  # Numba's host API called while tracing

    def new_buffer(self, nbytes: int, kind: BufferKind, name: str = "", *,
                   input_index: int | None = None,
                   external: Any = None, address: int = 0) -> int:
        b = Buffer(len(self.buffers), int(nbytes), kind, name or f"{kind}{len(self.buffers)}",
                   input_index, external, address)
        self.buffers.append(b)
        return b.id

    def new_array(self, shape: tuple[int, ...], dtype: np.dtype, *, zero: bool,
                  name: str | None = None) -> Array:
        if any(s < 0 for s in shape):
            raise TraceError(f"negative dimension in shape {shape}", where=user_location(3),
                             fix="check the shape")
        nbytes = math.prod(shape) * dtype.itemsize  # Python ints: no wrap-around
        if nbytes > MAX_BYTES:
            raise TraceError(f"an array of shape {shape} and dtype {dtype} would take "
                             f"{nbytes} bytes, more than any device can address",
                             where=user_location(3), fix="check the shape")
        buf = self.new_buffer(nbytes, TEMP, name or "")
        if name:
            self.given_names.add(buf)
        view = View(buf, 0, shape, contiguous_strides(shape, dtype.itemsize), dtype)
        if zero and nbytes:
            self.ops.append(Op(OpKind.MEMSET, "zeros", (Access(buf, 0, nbytes, "w"),),
                               user_location(3), Fill(view, 0)))
        return Array(self, view)

    def view_of(self, a: Array) -> View:
        if not isinstance(a, Array):
            raise TraceError(f"expected a traced array (an array argument of the traced "
                             f"function, or one made in it), got {what_it_is(a)}",
                             where=user_location(3),
                             fix="pass the traced function's arrays, or arrays made with "
                                 "tg.empty, tg.zeros or tg.ops")
        if tracer_of(a) is not self:
            raise TraceError("a traced array from another trace was used",
                             where=user_location(4),
                             fix="do not keep traced arrays between calls or share them "
                                 "between compiled functions (weights made lazily while "
                                 "the first call traced: make them before it)")
        return view_of(a)

    # -- launches -----------------------------------------------------------
    def record_launch(self, kernel: Any, griddim: Any, blockdim: Any, sharedmem: int,
                      args: tuple, *, stream: bool = False) -> None:
        where = user_location(3)
        self.launches += 1
        # a loop's launch again, with the very argument objects (kept alive with it, so no
        # other object takes their ids) and no globals to look up: its op but the line
        same = (id(kernel), griddim, blockdim, sharedmem, stream, id(self.node_attributes),
                DECLARATIONS[0], *map(id, args)) \
            if _PLAIN.issuperset(map(type, args)) else None
        try:
            hit = self._same_launch.get(same) if same is not None else None
        except TypeError:  # a configuration given as lists
            same = hit = None
        if hit is not None:
            self.ops.append(Op(OpKind.KERNEL, hit[1].name, hit[1].accesses, where,
                               hit[1].data))
            return
        name = _numba.kernel_name(kernel)
        if stream and not self._warned_stream:
            self._warned_stream = True
            warn(f"{where}: a stream given to {name} inside a traced function is ignored; the "
                 "graph orders launches by the data they touch (give the graph's stream to "
                 "the call instead)")
        grid, block, shared = checked_dims(name, griddim, blockdim, sharedmem, where)
        traced_args = tuple(self._arg(a, name, where, i, kernel) for i, a in enumerate(args))
        # a loop launches one kernel with the same arguments again: what its parameters
        # touch is known then (the arrays it names as globals are looked up every time)
        key = (id(kernel), args_key(traced_args), declared_access(kernel))
        known = self._launches_seen.get(key)
        if known is None:
            known = self._launches_seen[key] = _parameter_accesses(kernel, traced_args,
                                                                   name, where)
        param_accesses, found_globals, depends, cooperative = known
        accesses = param_accesses + self._captured_accesses(found_globals, name, where)
        for ref, _ in depends:  # the device functions it calls through names, too
            self._check_still_bound(ref, ref.resolve(), name, where)
        self.ops.append(Op(OpKind.KERNEL, name, accesses, where,
                           Launch(kernel, grid, block, shared, traced_args, cooperative,
                                  self.node_attributes)))
        self.compiled_in.record(kernel, name, where, traced_args, args, self.ops[-1])
        if same is not None and not found_globals and not depends:
            self._same_launch[same] = (args, self.ops[-1])

    def check_configuration(self, kernel: Any, griddim: Any, blockdim: Any) -> None:
        """What Numba's kernel[griddim, blockdim] refuses, as a TraceError at that line."""
        check_numba_form(_numba.kernel_name(kernel), griddim, blockdim, user_location(3))

    def _captured_accesses(self, found: tuple, kernel: str, where: str) -> tuple[Access, ...]:
        """Accesses to the device arrays a kernel names as globals or closure variables:
        their whole bytes, in the mode the kernel uses them."""
        out = []
        for ref, mode in found:
            value = ref.resolve()
            self._check_still_bound(ref, value, kernel, where)
            for obj in _device_arrays(value):
                if isinstance(obj, Array):
                    raise TraceError(f"kernel {kernel} names a traced array through "
                                     f"{ref.describe()}", where=where,
                                     fix="pass traced arrays to kernels as arguments")
                info = arguments.describe(obj)
                if info is None or info.placement != arguments.DEVICE:
                    continue
                buf = self._external(obj, info, name=ref.short()).buffer
                out.append(Access(buf, 0, self.buffers[buf].nbytes, mode))
        return tuple(out)

    def _check_still_bound(self, ref: Any, value: Any, kernel: str, where: str) -> None:
        """A global (or closure variable) a kernel names holds the same arrays at every
        launch of the trace: Numba compiles the arrays it holds into the kernel once."""
        first = self._bindings.setdefault(ref.site(), (ref, value, kernel, where))
        if not _numba.same_binding(first[1], value):
            raise _rebound(ref, kernel, where, f"since a launch at {first[3]}")

    def check_bindings(self, where: str) -> None:
        """After the function returned: the names kernels use hold what they held at their
        launches (a rebinding undone, or made after the last launch, is one too)."""
        for ref, value, kernel, launched in self._bindings.values():
            if not _numba.same_binding(ref.resolve(), value):
                raise _rebound(ref, kernel, where, f"after its launch at {launched}")
        self.compiled_in.check(where)

    @property
    def bindings(self) -> tuple[tuple[Any, Any], ...]:
        """(GlobalRef, what it held) of every global or closure variable kernels name."""
        return tuple((ref, value) for ref, value, _, _ in self._bindings.values())

    def _arg(self, a: Any, kernel: str, where: str, i: int, launched: Any = None) -> Any:
        if isinstance(a, Array):
            return self.view_of(a)
        if isinstance(a, DynamicScalar):
            if self._frames:
                raise TraceError(f"the dynamic scalar {a.name} is passed to {kernel} inside "
                                 "a tg.while_/tg.if_/tg.switch body, whose kernels the graph "
                                 "cannot patch per call", where=where,
                                 fix="pass it as a 1-element device array the kernel reads")
            return ScalarArg(a.leaf)
        if isinstance(a, np.ndarray):
            raise TraceError(f"argument {i} of {kernel} is a host NumPy array "
                             f"({kernel_argument(launched, i, a)}): Numba would "
                             "copy it to the device and back implicitly, which cannot be "
                             "part of a graph", where=where,
                             fix="pass it as an argument of the traced function (it becomes "
                                 "a graph input), or copy it to the device once with "
                                 "cuda.to_device outside")
        if isinstance(a, tuple):
            items = [self._arg(x, kernel, where, i, launched) for x in a]
            return type(a)(*items) if hasattr(a, "_fields") else tuple(items)
        info = arguments.describe(a)
        if info is not None:
            return self._external(a, info)
        if _numba.scalar_type(a) is not None:
            return a
        raise TraceError(f"argument {i} of {kernel} has type {type(a).__name__} "
                         f"({kernel_argument(launched, i, a)}), which a kernel cannot take: "
                         "it takes arrays, numbers, and tuples of these", where=where,
                         fix="pass a device array (cuda.to_device(np.asarray(value)), or pass "
                             "an array to the traced function), a traced array, a number or a "
                             "tuple of these")

    def _external(self, obj: Any, info: arguments.ArrayInfo, name: str = "") -> View:
        """A device array captured from outside: baked into the graph by address. Captured
        arrays whose bytes overlap share memory (ir.memory_regions orders them)."""
        lo, hi = info.extent
        buf = self._externals.get(id(obj))
        if buf is None:
            buf = self.new_buffer(hi - lo, EXTERNAL,
                                  name or f"captured{len(self._external_refs)}",
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

    # -- device-side control flow (trace/control.py) ------------------------------
    def begin_body(self) -> None:
        """Record the next ops into a body of their own."""
        self._frames.append(self.ops)
        self.ops = []

    def end_body(self) -> tuple[Op, ...]:
        body, self.ops = tuple(self.ops), self._frames.pop()
        return body

    @property
    def in_body(self) -> bool:
        return bool(self._frames)

    def add_conditional(self, data: Conditional, where: str) -> None:
        """The construct as one op: it touches whatever its bodies touch (a body may not
        run, or run many times: read and written), plus its flag and counter."""
        accesses = [Access(data.flag.buffer, *data.flag.byte_range(), "r")]
        if data.counter is not None:
            accesses.append(Access(data.counter.buffer, *data.counter.byte_range(), "rw"))
        for body in data.bodies:
            for op in body:
                accesses.extend(op.accesses)
        name = {"while": "while", "if": "if", "switch": "switch"}[data.kind]
        self.ops.append(Op(OpKind.CONDITIONAL, name, tuple(accesses), where, data))

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



def _rebound(ref: Any, kernel: str, where: str, when: str) -> TraceError:
    what = "array" if _numba.holds_arrays(ref.resolve()) else "function"
    return TraceError(f"kernel {kernel} names {ref.describe()}, which the traced function "
                      f"bound to another {what} {when}; Numba compiles one {what} into a "
                      "kernel, so the graph cannot follow the rebinding", where=where,
                      fix="pass the arrays to the kernel as arguments instead of rebinding "
                          "a global or closure variable it names")


# arguments whose object fixes what a launch records (immutable, or a traced array)
_PLAIN = frozenset({Array, bool, int, float, np.float32, np.float64, np.int32, np.int64,
                    np.uint32, np.uint64, np.bool_, np.float16, np.int8, np.int16, np.uint8,
                    np.uint16, np.complex64, np.complex128})


def _device_arrays(value: Any) -> list[Any]:
    """The arrays a captured global holds (itself, or the members of a tuple)."""
    if isinstance(value, tuple):  # namedtuples too
        return [a for v in value for a in _device_arrays(v)]
    return [value] if value is not None and not isinstance(value, (int, float, complex, str)) \
        else []
