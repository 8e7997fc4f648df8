"""Assignment into a device array on the host (`y[:] = x`, `y[0:n] = math.nan`,
`y[...] = host`), on traced and captured arrays, as the ops Numba's
DeviceNDArray.__setitem__ does on every call.

Numba copies the value to the device (a host value as an array of its own dtype) and runs
its assignment kernel over the selected elements: the value's rank may be lower (it is
broadcast along leading axes) and each of its axes is 1 or the target's length; the
kernel converts each element to the target's dtype. Here that becomes:

- a memset node where the value is a host scalar whose conversion is exact and whose
  bytes are all alike (0, -1, False) and the target is contiguous;
- a memcpy node where the value is a device array of the target's shape, dtype and
  layout in other memory, or a host array of the target's shape and dtype and the target
  is C-contiguous (copied in from the held array on every replay, as eagerly);
- otherwise the assignment kernel (a host array copied in first), converting on the
  device as Numba's does. A device value overlapping the target is copied first, so the
  result is NumPy's (Numba's kernel would race).
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import TraceError
from ..indexing import index_view
from ..ir import Access, Fill, Op, OpKind, View, bytes_view
from ..traced import Array, view_of

if TYPE_CHECKING:
    from .tracer import Tracer


def assign(tracer: Tracer, dst: View, key: Any, value: Any, where: str) -> None:
    """dst[key] = value, recorded."""
    if dst.dtype.names is not None:
        raise TraceError("assigning into an array of records on the host inside a traced "
                         "function", where=where, fix="write the fields inside a kernel")
    if dst.readonly:
        raise TraceError("assigning into a read-only array (eagerly: 'assignment "
                         "destination is read-only')", where=where,
                         fix="pass a writable array")
    lhs = index_view(dst, key)
    src = tracer.view_or_external(value)
    if src is None:
        _from_host(tracer, lhs, value, where)
        return
    src = _broadcast(src, lhs, where)
    if lhs.size == 0:
        tracer.launches += 1  # eagerly a launch of nothing, as Numba's forall(0)
        return
    if _overlap(src, lhs):  # NumPy's result, where Numba's kernel would race
        src = _copy_out(tracer, src)
    if src.dtype == lhs.dtype and src.strides == lhs.strides and _dense(lhs):
        start, stop = lhs.byte_range()
        (s, _) = src.byte_range()
        tracer.copy(bytes_view(lhs.buffer, start, stop - start),
                    bytes_view(src.buffer, s, stop - start), "assign", where=where)
        return
    _launch(_kernel("assign", len(lhs.shape)), lhs, (Array(tracer, lhs), Array(tracer, src)))


def _from_host(tracer: Tracer, lhs: View, value: Any, where: str) -> None:
    data = np.array(value, copy=None, subok=True)
    if data.dtype.kind not in "biufc":
        raise TraceError(f"assigning a {data.dtype} value ({type(value).__name__}) into a "
                         "device array", where=where,
                         fix="assign numbers, or arrays of numbers")
    if not (data.flags.c_contiguous or data.flags.f_contiguous):
        raise TraceError("assigning a non-contiguous host array into a device array (eager "
                         "Numba refuses to copy it)", where=where,
                         fix="assign np.ascontiguousarray(value)")
    _check_shape(data.shape, lhs, where)
    if lhs.size == 0:
        tracer.launches += 1
        return
    if data.ndim == 0:
        byte = _memset_byte(data, lhs.dtype)
        if byte is not None and _dense(lhs):
            start, stop = lhs.byte_range()
            tracer.ops.append(Op(OpKind.MEMSET, "assign", (Access(lhs.buffer, start, stop,
                                                                  "w"),),
                                 where, Fill(bytes_view(lhs.buffer, start, stop - start),
                                             byte)))
            return
        _launch(_kernel("fill", len(lhs.shape)), lhs, (Array(tracer, lhs), data[()]))
        return
    held = value if isinstance(value, np.ndarray) else data  # a Python value is baked in
    if data.shape == lhs.shape and data.dtype == lhs.dtype and lhs.is_c_contiguous():
        tracer.numba_api.copy_in(held, lhs)
        return
    src = _broadcast(view_of(tracer.numba_api.copy_in(held)), lhs, where)
    _launch(_kernel("assign", len(lhs.shape)), lhs, (Array(tracer, lhs), Array(tracer, src)))


def _check_shape(shape: tuple[int, ...], lhs: View, where: str) -> tuple[int, ...]:
    """Numba's rule for a value of `shape`: its shape at lhs's rank (1s in front), each
    axis 1 or lhs's length."""
    if len(shape) > len(lhs.shape):
        raise TraceError(f"can't assign a {len(shape)}-D array to a {len(lhs.shape)}-D one "
                         "(Numba's rule)", where=where,
                         fix="index the target, or reshape the value")
    shape = (1,) * (len(lhs.shape) - len(shape)) + tuple(shape)
    for axis, (n, m) in enumerate(zip(lhs.shape, shape)):
        if m not in (1, n):
            raise TraceError(f"can't copy a sequence of size {m} to axis {axis} of length "
                             f"{n} (Numba's rule)", where=where,
                             fix="assign a value of the target's shape, or one of length 1 "
                                 "along the axes it repeats")
    return shape


def _broadcast(src: View, lhs: View, where: str) -> View:
    """The value as Numba reads it: lhs's shape, stride 0 along the axes it repeats."""
    shape = _check_shape(src.shape, lhs, where)
    strides = (0,) * (len(shape) - len(src.shape)) + src.strides
    strides = tuple(0 if m == 1 and n != 1 else s
                    for n, m, s in zip(lhs.shape, shape, strides))
    return View(src.buffer, src.offset, lhs.shape, strides, src.dtype, src.readonly)


def _memset_byte(data: np.ndarray, dtype: np.dtype) -> int | None:
    """The byte a memset writes for this scalar, where converting it to `dtype` is exact
    (so the device converts it alike) and gives one byte repeated; else None."""
    if data.dtype.kind not in "biuf" or dtype.kind not in "biuf":
        return None
    with np.errstate(all="ignore"):
        converted = data.astype(dtype)
        exact = bool(converted.astype(data.dtype) == data)
    raw = converted.tobytes()
    return raw[0] if exact and raw.count(raw[:1]) == len(raw) else None


def _dense(v: View) -> bool:
    """Its elements are exactly the bytes of its byte range."""
    return v.is_c_contiguous() or v.is_f_contiguous()


def _overlap(a: View, b: View) -> bool:
    if a.buffer != b.buffer:
        return False
    (s, e), (t, f) = a.byte_range(), b.byte_range()
    return s < f and t < e


def _copy_out(tracer: Tracer, src: View) -> View:
    tmp = tracer.new_array(src.shape, src.dtype, zero=False)
    _launch(_kernel("assign", len(src.shape)), src, (tmp, Array(tracer, src)))
    return view_of(tmp)


def _launch(kernel: Any, lhs: View, args: tuple) -> None:
    from ..ops._base import launch_1d
    grid, block = launch_1d(lhs.size)
    kernel[grid, block](*args)


_TEMPLATE = '''
def {name}(lhs, {source}):
    for i in range(cuda.grid(1), lhs.size, cuda.gridsize(1)):
{unravel}
        lhs[{index}] = {value}
'''


@functools.cache
def _kernel(kind: str, ndim: int) -> Any:
    """Numba's assignment kernel for `ndim` axes: lhs[k] = rhs[k] (`assign`, rhs already
    broadcast to lhs's shape) or lhs[k] = value (`fill`), converting on the device."""
    from numba import cuda

    from ..ops._base import make_kernel
    from .functions import access
    index = ", ".join(f"k{d}" for d in range(ndim)) or "()"
    lines = ["        r = i"] if ndim > 1 else []
    for d in range(ndim - 1, 0, -1):
        lines += [f"        k{d} = r % lhs.shape[{d}]", f"        r //= lhs.shape[{d}]"]
    if ndim:
        lines.append("        k0 = " + ("r" if ndim > 1 else "i"))
    source, value = ("rhs", f"rhs[{index}]") if kind == "assign" else ("value", "value")
    kernel = make_kernel(f"{kind}_{ndim}d", _TEMPLATE, {"__name__": __name__, "cuda": cuda},
                         source=source, unravel="\n".join(lines) or "        pass",
                         index=index, value=value)
    return access(kernel, writes=["lhs"])
