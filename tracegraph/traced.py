"""tg.Array: a device array inside a traced function (shape, dtype, views; no data)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np


from .errors import TraceError
from .ir import View, contiguous_strides
from .location import user_location

if TYPE_CHECKING:
    from .trace import Tracer

def _refuse(what: str, fix: str) -> TraceError:
    return TraceError(what, where=user_location(3), fix=fix)


_READ_FIX = ("tracing records launches without running them; return the array from the "
             "traced function and read it after the call, or use tg.callback for host work")


class Array:
    """A device array inside a traced function: shape and dtype, but no data yet."""

    __slots__ = ("_tracer", "_view", "__weakref__")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """NumPy ufuncs on traced arrays (np.exp(x), np.float32(2) * x) are tracegraph.ops
        launches where an op of that name exists."""
        from . import ops
        name = _UFUNC_OPS.get(ufunc.__name__, ufunc.__name__)
        op = getattr(ops, name, None)
        if method != "__call__" or op is None or set(kwargs) - {"out"}:
            raise _refuse(f"NumPy's {ufunc.__name__}.{method} on a traced array reads device "
                          "data while tracing", "use tracegraph.ops (docs/ops.md) or a kernel")
        # NumPy hands scalar operands over as 0-d arrays
        inputs = tuple(x[()] if isinstance(x, np.ndarray) and x.ndim == 0 else x
                       for x in inputs)
        out = kwargs.get("out")
        if out is not None:
            (out,) = out
            return op(*inputs, out=out)
        return op(*inputs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        raise _refuse(f"np.{func.__name__}() of a traced array reads device data while "
                      "tracing (np.asarray)", f"use tracegraph.ops (tg.ops.{func.__name__} "
                      f"where it exists) inside the traced function, or {_READ_FIX}")

    def __init__(self, tracer: "Tracer", view: View):
        self._tracer = tracer
        self._view = view

    # metadata
    shape = property(lambda self: self._view.shape)
    strides = property(lambda self: self._view.strides)
    dtype = property(lambda self: self._view.dtype)
    ndim = property(lambda self: len(self._view.shape))
    size = property(lambda self: self._view.size)
    itemsize = property(lambda self: self._view.itemsize)
    nbytes = property(lambda self: self._view.size * self._view.itemsize)

    def __len__(self) -> int:
        if not self._view.shape:
            raise TypeError("len() of a 0-d tracegraph Array")
        return self._view.shape[0]

    def __repr__(self) -> str:
        return f"tg.Array(shape={self.shape}, dtype={self.dtype})"

    @property
    def T(self) -> "Array":
        v = self._view
        return Array(self._tracer, View(v.buffer, v.offset, v.shape[::-1], v.strides[::-1], v.dtype,
                                        v.readonly))

    def __getitem__(self, key: Any) -> "Array":
        return Array(self._tracer, _index_view(self._view, key))

    def __setitem__(self, key: Any, value: Any) -> None:
        raise _refuse("assigning into a traced array on the host is not recorded",
                      "write it inside a kernel, or use tg.ops.fill / tg.ops.copy")

    # reading data on the host cannot be traced
    def __array__(self, *_: Any, **__: Any) -> Any:
        raise _refuse("np.asarray() of a traced array reads device data while tracing", _READ_FIX)

    def copy_to_host(self, *_: Any, **__: Any) -> Any:
        raise _refuse("copy_to_host() of a traced array reads device data while tracing",
                      _READ_FIX)

    def copy_to_device(self, ary: Any, stream: Any = 0) -> None:
        """Copy host data (again on every replay, as eagerly on every call) or another
        device array into this array."""
        where = user_location(2)
        src = self._tracer.view_or_external(ary)
        if src is not None:
            self._tracer.device_copy(self._view, src, where)
        else:
            self._tracer.host_to_device(ary, self._view, where)

    def __float__(self) -> float:
        raise _refuse("float() of a traced array reads device data while tracing", _READ_FIX)

    def __int__(self) -> int:
        raise _refuse("int() of a traced array reads device data while tracing", _READ_FIX)

    def __index__(self) -> int:
        raise _refuse("using a traced array as an index reads device data while tracing",
                      _READ_FIX)

    def __bool__(self) -> bool:
        raise _refuse("Python control flow on a traced array reads device data while tracing",
                      "the graph is fixed at trace time: branch inside a kernel (or pass the "
                      "condition as a Python scalar argument, which gives one graph per value)")

    def __iter__(self) -> Any:
        raise _refuse("iterating over a traced array reads device data while tracing",
                      _READ_FIX)

    def item(self, *_: Any) -> Any:
        raise _refuse("item() of a traced array reads device data while tracing", _READ_FIX)

    tolist = item

    @property
    def __cuda_array_interface__(self) -> dict:
        raise _refuse("a traced array has no device memory while tracing (another library "
                      "asked for __cuda_array_interface__)",
                      "inside a traced function, pass traced arrays only to Numba kernels "
                      "and tg.ops")

    def reshape(self, *shape: Any) -> "Array":
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        v = self._view
        shape = _resolve_shape(tuple(int(s) for s in shape), v.size)
        if not v.is_c_contiguous():
            raise _refuse(f"reshape of a non-contiguous traced array {v.shape}",
                          "copy it first with tg.ops.copy")
        strides = contiguous_strides(shape, v.itemsize)
        return Array(self._tracer, View(v.buffer, v.offset, shape, strides, v.dtype, v.readonly))

    # arithmetic is tracegraph.ops
    def _op(self, name: str, *args: Any) -> Any:
        from . import ops
        return getattr(ops, name)(*args)

    def __add__(self, o): return self._op("add", self, o)
    def __radd__(self, o): return self._op("add", o, self)
    def __sub__(self, o): return self._op("subtract", self, o)
    def __rsub__(self, o): return self._op("subtract", o, self)
    def __mul__(self, o): return self._op("multiply", self, o)
    def __rmul__(self, o): return self._op("multiply", o, self)
    def __truediv__(self, o): return self._op("divide", self, o)
    def __rtruediv__(self, o): return self._op("divide", o, self)
    def __matmul__(self, o): return self._op("matmul", self, o)
    def __rmatmul__(self, o): return self._op("matmul", o, self)
    def __neg__(self): return self._op("negative", self)
    def __abs__(self): return self._op("abs", self)
    def __lt__(self, o): return self._op("less", self, o)
    def __le__(self, o): return self._op("less_equal", self, o)
    def __gt__(self, o): return self._op("greater", self, o)
    def __ge__(self, o): return self._op("greater_equal", self, o)

    # in place, as NumPy: `x += 1` writes x (Python would otherwise rebind x to x + 1)
    def __iadd__(self, o): return self._inplace("add", o)
    def __isub__(self, o): return self._inplace("subtract", o)
    def __imul__(self, o): return self._inplace("multiply", o)
    def __itruediv__(self, o): return self._inplace("divide", o)

    def _inplace(self, name: str, o: Any) -> "Array":
        from . import ops
        getattr(ops, name)(self, o, out=self)
        return self

    # elementwise, as NumPy: `if x == 0:` then refuses through __bool__
    def __eq__(self, o):  # type: ignore[override]
        return self._op("equal", self, o) if _operand(o) else NotImplemented

    def __ne__(self, o):  # type: ignore[override]
        return self._op("not_equal", self, o) if _operand(o) else NotImplemented

    __hash__ = object.__hash__


_UFUNC_OPS = {"true_divide": "divide", "absolute": "abs"}


def _operand(o: Any) -> bool:
    return isinstance(o, (Array, int, float, complex, bool, np.number, np.bool_))


def _resolve_shape(shape: tuple[int, ...], size: int) -> tuple[int, ...]:
    if any(s < -1 for s in shape) or shape.count(-1) > 1:
        raise _refuse(f"cannot reshape into {shape}", "use non-negative sizes and at most "
                      "one -1")
    if shape.count(-1) == 1:
        known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        if known == 0:
            raise _refuse(f"cannot reshape {size} elements into {shape}: -1 is ambiguous "
                          "next to a 0", "give every size")
        shape = tuple(size // known if s == -1 else s for s in shape)
    if int(np.prod(shape, dtype=np.int64)) != size:
        raise _refuse(f"cannot reshape {size} elements into {shape}", "check the shape")
    return shape


def _index_view(v: View, key: Any) -> View:
    """NumPy basic indexing (ints, slices, Ellipsis, None) on a view."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        i = key.index(Ellipsis)
        fill = len(v.shape) - (len(key) - 1 - sum(k is None for k in key))
        key = key[:i] + (slice(None),) * fill + key[i + 1:]
    offset, shape, strides = v.offset, [], []
    dim = 0
    for k in key:
        if k is None:
            shape.append(1)
            strides.append(0)
            continue
        if dim >= len(v.shape):
            raise _refuse(f"too many indices for a traced array of shape {v.shape}",
                          "index with at most one entry per dimension")
        n, s = v.shape[dim], v.strides[dim]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            count = len(range(start, stop, step))
            offset += start * s
            shape.append(count)
            strides.append(s * step)
        elif isinstance(k, (bool, np.bool_)):
            raise _refuse("traced arrays take no boolean indices",
                          "use ints, slices, Ellipsis or None; mask inside a kernel")
        elif isinstance(k, (int, np.integer)):
            k = int(k)
            if not -n <= k < n:
                raise _refuse(f"index {k} is out of bounds for axis {dim} of size {n}",
                              "check the index")
            offset += (k % n) * s
        else:
            raise _refuse(f"traced arrays take basic indexing only, got {type(k).__name__}",
                          "use ints, slices, Ellipsis or None; gather inside a kernel")
        dim += 1
    shape.extend(v.shape[dim:])
    strides.extend(v.strides[dim:])
    if 0 in shape:  # empty: no element, so no offset outside the buffer (x[::-1][n:])
        offset = v.offset
    return View(v.buffer, offset, tuple(shape), tuple(strides), v.dtype, v.readonly)


