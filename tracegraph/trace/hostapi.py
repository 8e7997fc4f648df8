"""Numba's host API called while tracing (_numba/hostapi.py and _numba/ufuncs.py hand
these calls over): device arrays made, host data copied in, one array copied or assigned
into another, and the device primitives of Numba's ufunc machinery. What eager Numba does
on every call becomes ops the graph does on every replay."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _numba
from ..errors import TraceError
from ..ir import HOST_CONSTANT, CopyRole, View, bytes_view
from ..location import user_location
from ..signature import arguments
from ..traced import Array, like, view_of
from . import assign
from .functions import _dtype, _shape

if TYPE_CHECKING:
    from .tracer import Tracer


class HostAPI:
    """Numba's host API over one trace (`tracer.numba_api`)."""

    def __init__(self, tracer: Tracer):
        self.tracer = tracer

    def device_array(self, shape: Any, dtype: Any, order: str = "C") -> Array:
        """cuda.device_array inside a traced function: a graph-owned array."""
        shape = _shape(shape)
        made = self.tracer.new_array(shape[::-1] if order == "F" else shape, _dtype(dtype),
                                     zero=False)
        if order != "F":
            return made
        v = view_of(made)  # its reversed axes: an F-ordered view of the same memory
        return like(made, View(v.buffer, v.offset, shape, v.strides[::-1], v.dtype))

    def is_traced(self, obj: Any) -> bool:
        return isinstance(obj, Array)

    def is_device(self, obj: Any) -> bool:
        """A traced array, or a device array made outside (captured)."""
        if isinstance(obj, Array):
            return True
        info = arguments.describe(obj)
        return info is not None and info.placement == arguments.DEVICE

    def device_stand_in(self, obj: Any) -> Array:
        """A traced array for a traced or captured device array."""
        if isinstance(obj, Array):
            return obj
        view = self.tracer.view_or_external(obj)
        assert view is not None, "only device arrays have stand-ins"
        return Array(self.tracer, view)

    def restrided(self, a: Array, shape: Any, strides: Any) -> Array:
        """A view of `a`'s memory from its element 0 with another shape and strides (a
        broadcast: stride 0 along the axes it repeats)."""
        v = view_of(a)
        return like(a, View(v.buffer, v.offset, tuple(int(n) for n in shape),
                            tuple(int(s) for s in strides), v.dtype, v.readonly))

    def contiguous_copy(self, a: Array) -> Array:
        """A C-contiguous copy of `a` (any layout, broadcast views too)."""
        out = self.tracer.new_array(tuple(a.shape), np.dtype(a.dtype), zero=False)
        assign.assign(self.tracer, view_of(out), Ellipsis, a, user_location(2))
        return out

    def assign(self, dst: View, key: Any, value: Any) -> None:
        """`dst[key] = value` on the host (Numba's DeviceNDArray.__setitem__)."""
        assign.assign(self.tracer, dst, key, value, user_location(2))

    def copy_in(self, host: Any, dst: View | None = None) -> Array:
        """cuda.to_device(host) (dst None: into a new graph-owned array) or host data copied
        into `dst`, as eager Numba does it on every call: the graph copies the held host
        array's current contents in on every replay."""
        where = user_location(2)
        if isinstance(host, Array):
            raise TraceError("cuda.to_device() got a traced array, which already is on the "
                             "device", where=where, fix="use it directly, or tg.ops.copy")
        data = np.asarray(host)
        problem = _numba.dtype_problem(data.dtype)
        if problem is not None:
            raise TraceError(f"cuda.to_device() of a {data.dtype} array: {problem}",
                             where=where, fix="copy numeric data")
        if dst is None:
            dst = view_of(self.tracer.new_array(tuple(data.shape), data.dtype, zero=False))
        elif dst.size != data.size or dst.dtype != data.dtype or not dst.is_c_contiguous():
            raise TraceError(f"copying a {data.dtype}{list(data.shape)} host array into a "
                             f"{dst.dtype}{list(dst.shape)} device array", where=where,
                             fix="copy into a contiguous device array of the same size and "
                                 "dtype")
        nbytes = data.size * data.dtype.itemsize
        held = self.tracer.new_buffer(nbytes, HOST_CONSTANT, "host constant", external=host)
        start, _ = dst.byte_range()
        self.tracer.copy(bytes_view(dst.buffer, start, nbytes),
                         bytes_view(held, 0, nbytes), "copy in a host array",
                         CopyRole.CONSTANT, where)
        return Array(self.tracer, dst)

    def copy_into(self, dst: View, src: Any) -> None:
        """copy_to_device(src) of a traced or captured array: from another device array,
        or host data copied in on every replay."""
        view = self.tracer.view_or_external(src)
        if view is None:
            self.copy_in(src, dst)
            return
        where = user_location(2)
        if dst.shape != view.shape or dst.dtype != view.dtype or not (
                dst.is_c_contiguous() and view.is_c_contiguous()):
            raise TraceError(f"copying a {view.dtype}{list(view.shape)} device array into a "
                             f"{dst.dtype}{list(dst.shape)} one", where=where,
                             fix="copy between contiguous arrays of one shape and dtype, or "
                                 "assign (dst[...] = src), which takes any layout")
        (a, b), (c, _) = dst.byte_range(), view.byte_range()
        self.tracer.copy(bytes_view(dst.buffer, a, b - a),
                         bytes_view(view.buffer, c, b - a), "device copy",
                         CopyRole.USER, where)
