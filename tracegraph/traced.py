"""tg.Array: a device array inside a traced function (shape, dtype, views; no data)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import _numba
from .errors import TraceError
from .indexing import index_view, resolve_shape
from .ir import View, contiguous_strides
from .location import user_location

if TYPE_CHECKING:
    from .trace import Tracer

class _MissingAttribute(TraceError, AttributeError):
    """A device-array attribute tg.Array does not have: hasattr() still answers False."""


class _NeedsCopy(TraceError, NotImplementedError):
    """A reshape or ravel that would need a copy: NotImplementedError, as Numba's device
    arrays raise (its ufunc machinery catches it and copies)."""


def _c_order_only(method: str, order: str) -> None:
    if order != "C":
        raise _refuse(f"{method}(order={order!r}) of a traced array",
                      "use order='C' (the default)")


def _refuse(what: str, fix: str) -> TraceError:
    return TraceError(what, where=user_location(3), fix=fix)


_READ_FIX = ("tracing records launches without running them; return the array from the "
             "traced function and read it after the call, or use tg.callback for host work")


class Array:
    """A device array inside a traced function: shape and dtype, but no data yet."""

    __slots__ = ("__weakref__", "_tracer", "_view")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """NumPy ufuncs on traced arrays (np.exp(x), np.float32(2) * x) are tracegraph.ops
        launches where an op of that name exists."""
        op = _OPS.get(_UFUNC_OPS.get(ufunc.__name__, ufunc.__name__))
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

    def __init__(self, tracer: Tracer, view: View):
        self._tracer = tracer
        self._view = view

    # code written for Numba's device arrays takes its device path for a traced array:
    # isinstance(x, DeviceNDArray) (the simulator's FakeCUDAArray there) and
    # cuda.devicearray.is_cuda_ndarray(x) are True (tracegraph tells them apart by type())
    __class__ = property(lambda _: _numba.traced_array_class())
    __cuda_ndarray__ = True

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

    def __getitem__(self, key: Any) -> Array:
        view = index_view(self._view, key)
        # eagerly an element read on the host (a NumPy scalar, now); a record stays on
        # the device (Numba's DeviceRecord)
        if not view.shape and view.dtype.names is None:
            raise _refuse("an element of a traced array (x[i]) reads device data while "
                          "tracing: eagerly it is a NumPy scalar read on the host, so int(), "
                          "float(), comparisons and Python control flow on it would run once",
                          "branch inside a kernel (pass it the array and the index), keep a "
                          "1-element view (x[i:i+1]), or return the array from the traced "
                          "function and read it after the call")
        return Array(self._tracer, view)

    def __setitem__(self, key: Any, value: Any) -> None:
        """A copy, memset or assignment kernel node (trace/assign.py), as Numba's."""
        self._tracer.numba_api.assign(self._view, key, value)

    def setitem(self, key: Any, value: Any, stream: Any = 0) -> None:  # noqa: ARG002
        self._tracer.numba_api.assign(self._view, key, value)

    # reading data on the host cannot be traced
    def __array__(self, *_: Any, **__: Any) -> Any:
        raise _refuse("np.asarray() of a traced array reads device data while tracing", _READ_FIX)

    def copy_to_host(self, *_: Any, **__: Any) -> Any:
        raise _refuse("copy_to_host() of a traced array reads device data while tracing",
                      _READ_FIX)

    def copy_to_device(self, ary: Any, stream: Any = 0) -> None:  # noqa: ARG002
        """Copy host data (again on every replay, as eagerly on every call) or another
        device array into this array."""
        self._tracer.numba_api.copy_into(self._view, ary)

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

    def tolist(self) -> Any:
        raise _refuse("tolist() of a traced array reads device data while tracing", _READ_FIX)

    @property
    def __cuda_array_interface__(self) -> dict:
        raise _refuse("a traced array has no device memory while tracing (another library "
                      "asked for __cuda_array_interface__)",
                      "inside a traced function, pass traced arrays only to Numba kernels "
                      "and tg.ops")

    def reshape(self, *shape: Any, order: str = "C") -> Array:
        _c_order_only("reshape", order)
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        v = self._view
        shape = resolve_shape(tuple(int(s) for s in shape), v.size)
        if not v.is_c_contiguous():
            raise _NeedsCopy(f"reshape of a non-contiguous traced array {v.shape} (Numba's "
                             "device arrays refuse it too: the operation requires copying)",
                             where=user_location(2), fix="copy it first with tg.ops.copy")
        strides = contiguous_strides(shape, v.itemsize)
        return Array(self._tracer, View(v.buffer, v.offset, shape, strides, v.dtype, v.readonly))

    def ravel(self, order: str = "C") -> Array:
        _c_order_only("ravel", order)
        return self.reshape(-1)

    @property
    def T(self) -> Array:
        return self.transpose()

    def transpose(self, *axes: Any) -> Array:
        """A transposed copy, as Numba's device arrays make (a view would let a kernel's
        stores reach the caller's array, and later stores to it reach the copy, where eager
        Numba on a GPU does neither); the same array for the identity permutation."""
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        ndim = len(self._view.shape)
        if axes and [int(a) for a in axes] == list(range(ndim)):
            return self
        return _OPS["transpose"](self, tuple(axes) if axes else None)

    def squeeze(self, axis: Any = None) -> Array:
        v = self._view
        axes = () if axis is None else (axis,) if isinstance(axis, int) else tuple(axis)
        if any(not -len(v.shape) <= a < len(v.shape) for a in axes):
            raise _refuse(f"squeeze axis {axis} of a {len(v.shape)}-d traced array",
                          "name existing axes of length 1")
        drop = {a % len(v.shape) for a in axes} if axis is not None else \
            {a for a, n in enumerate(v.shape) if n == 1}
        if any(v.shape[a] != 1 for a in drop):
            raise _refuse("squeeze of an axis whose length is not 1", "name axes of length 1")
        keep = [a for a in range(len(v.shape)) if a not in drop]
        return like(self, View(v.buffer, v.offset, tuple(v.shape[a] for a in keep),
                               tuple(v.strides[a] for a in keep), v.dtype, v.readonly))

    def view(self, dtype: Any) -> Array:
        """The same bytes as another dtype, as Numba's view: any layout for a dtype of the
        same size, a C-contiguous one (the last axis rescaled) for another size."""
        v, dtype = self._view, np.dtype(dtype)
        if dtype.itemsize == v.itemsize:
            return like(self, View(v.buffer, v.offset, v.shape, v.strides, dtype, v.readonly))
        if not v.shape or not v.is_c_contiguous() or (v.shape[-1] * v.itemsize) % dtype.itemsize:
            raise _refuse(f"view as {dtype} of a traced array {v.shape} {v.dtype}",
                          "to change the item size, view a C-contiguous array whose last "
                          "axis holds whole elements")
        shape = (*v.shape[:-1], v.shape[-1] * v.itemsize // dtype.itemsize)
        strides = (*v.strides[:-1], dtype.itemsize)
        return like(self, View(v.buffer, v.offset, shape, strides, dtype, v.readonly))

    def split(self, section: int, stream: Any = 0) -> list[Array]:  # noqa: ARG002
        """Views of `section` elements each (the last may be shorter), as Numba's."""
        if self.ndim != 1:
            raise _refuse("split() of a traced array of more than one axis",
                          "split a 1-D array (Numba's split takes only those)")
        return [self[i:i + section] for i in range(0, self.shape[0], section)]

    def bind(self, stream: Any = 0) -> Array:  # noqa: ARG002
        """The same array: a graph orders its work by the data it touches, not streams."""
        return self

    def is_c_contiguous(self) -> bool:
        return self._view.is_c_contiguous()

    def is_f_contiguous(self) -> bool:
        return self._view.is_f_contiguous()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in Array.__slots__:  # protocol probes: plain
            raise AttributeError(name)
        if name in _NO_MEMORY:
            raise _MissingAttribute(f"a traced array has no attribute {name!r}: it has no "
                                    "device memory while tracing (the graph allocates it)",
                                    where=user_location(2), fix=_READ_FIX)
        raise _MissingAttribute(f"a traced array has no attribute {name!r} (tracegraph "
                                "supports the shape, dtype, view and reshape methods of a "
                                "device array inside a traced function)",
                                where=user_location(2),
                                fix="do this outside the traced function, or pass the array "
                                    "to a kernel that does it")

    # operators (+ - * / @ < ... +=) are installed by tracegraph.ops (install_operators);
    # comparisons with == are elementwise, as in NumPy, so `if x == 0:` refuses in __bool__


# DeviceNDArray attributes that are its memory (each refused with its name)
_NO_MEMORY = frozenset({"gpu_data", "device_ctypes_pointer", "get_ipc_handle", "as_cuda_arg",
                        "alloc_size", "_numba_type_"})
_UFUNC_OPS = {"true_divide": "divide", "absolute": "abs"}
_OPS: dict[str, Any] = {}  # op name -> function, filled by install_operators

# method -> (op, how): "binary" op(self, o), "reflected" op(o, self), "unary" op(self),
# "inplace" op(self, o, out=self), "compare" like binary but only with arrays and scalars
OPERATORS = {
    "__add__": ("add", "binary"), "__radd__": ("add", "reflected"),
    "__sub__": ("subtract", "binary"), "__rsub__": ("subtract", "reflected"),
    "__mul__": ("multiply", "binary"), "__rmul__": ("multiply", "reflected"),
    "__truediv__": ("divide", "binary"), "__rtruediv__": ("divide", "reflected"),
    "__matmul__": ("matmul", "binary"), "__rmatmul__": ("matmul", "reflected"),
    "__neg__": ("negative", "unary"), "__abs__": ("abs", "unary"),
    "__lt__": ("less", "binary"), "__le__": ("less_equal", "binary"),
    "__gt__": ("greater", "binary"), "__ge__": ("greater_equal", "binary"),
    "__eq__": ("equal", "compare"), "__ne__": ("not_equal", "compare"),
    "__iadd__": ("add", "inplace"), "__isub__": ("subtract", "inplace"),
    "__imul__": ("multiply", "inplace"), "__itruediv__": ("divide", "inplace"),
}


def install_operators(ops: dict[str, Any]) -> None:
    """Give Array its operators, calling these op functions (the ops layer does this on
    import, so this module never imports it)."""
    _OPS.update(ops)
    for method, (name, how) in OPERATORS.items():
        setattr(Array, method, _operator(ops[name], how))
    Array.__hash__ = object.__hash__  # type: ignore[method-assign]  # __eq__ must not unhash


def _operator(op: Any, how: str) -> Any:
    if how == "binary":
        return lambda self, o: op(self, o)
    if how == "reflected":
        return lambda self, o: op(o, self)
    if how == "unary":
        return lambda self: op(self)
    if how == "compare":
        return lambda self, o: op(self, o) if _operand(o) else NotImplemented

    def inplace(self: Array, o: Any) -> Array:
        op(self, o, out=self)
        return self
    return inplace


def _operand(o: Any) -> bool:
    return isinstance(o, (Array, int, float, complex, bool, np.number, np.bool_))


def view_of(a: Array) -> View:
    """The IR view a traced array stands for."""
    return a._view


def tracer_of(a: Array) -> Tracer:
    return a._tracer


def like(a: Array, view: View) -> Array:
    """A traced array of `a`'s trace over another view."""
    return Array(a._tracer, view)


class DynamicScalar:
    """A Python number declared dynamic (tg.compile(dynamic={"name": "value"})) inside a
    traced function: pass it to kernels, where the graph patches each call's value in. Any
    other use would bake one value into the graph, so it is refused."""

    __slots__ = ("leaf", "name", "value")

    def __init__(self, leaf: int, name: str, value: Any):
        self.leaf, self.name, self.value = leaf, name, value

    def __repr__(self) -> str:
        return f"tg.DynamicScalar({self.name}, traced with {self.value!r})"

    def _refuse(self, *_: Any) -> Any:
        raise TraceError(f"the dynamic scalar {self.name} was used in a Python expression: "
                         "its value changes on every call, but Python code runs only once, "
                         "when the function is traced", where=user_location(3),
                         fix=f"pass {self.name} to kernels as it is and compute with it there, "
                             "or declare it static (not in dynamic=)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = _refuse
    __mod__ = __rmod__ = __pow__ = __rpow__ = __divmod__ = __rdivmod__ = _refuse
    __matmul__ = __rmatmul__ = _refuse
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _refuse
    __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = _refuse
    __neg__ = __pos__ = __abs__ = __invert__ = _refuse
    __float__ = __int__ = __index__ = __bool__ = __complex__ = _refuse
    __round__ = __trunc__ = __floor__ = __ceil__ = _refuse
    # == would otherwise compare identities (`if step == 0:` silently never true), and a
    # hash would look it up by identity (`TABLE.get(step)`, `step in {1}`)
    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = __hash__ = _refuse
    # str() and f-strings would bake the traced value's text (repr stays, for messages)
    __str__ = __format__ = _refuse
    __array__ = _refuse
