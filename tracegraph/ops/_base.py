"""What every op shares: argument checks, output arrays, strided views, launch sizes.

Ops work on `tg.Array`s inside a traced function. A broadcast operand is a view with
stride 0 along the broadcast dimensions, so one kernel handles every broadcast pattern;
elementwise kernels see all operands as 4-D views of the output's shape after
`collapse` merged the dimensions that are contiguous for every operand.
"""
from __future__ import annotations

import linecache
from collections.abc import Sequence
from typing import Any

import numpy as np
from numba import cuda

from .. import _numba
from ..errors import TraceError
from ..ir import View
from ..location import user_location
from ..trace import empty
from ..traced import Array, DynamicScalar, like, tracer_of, view_of

SIMULATOR = _numba.SIMULATOR
RANK = 4                    # elementwise kernels see every operand as a 4-D view
MAX_BLOCK = 256             # the largest block of the reduction-style kernels (a power of two)

BOOL = np.dtype(np.bool_)
INTS = (np.dtype(np.int32), np.dtype(np.int64))
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
NUMERIC = INTS + FLOATS
SUPPORTED = (BOOL, *NUMERIC)
_NAMES = "bool, int32, int64, float32 and float64"


# ---------------------------------------------------------------------------
# errors and argument checks

def fail(op: str, what: str, fix: str) -> TraceError:
    """A TraceError naming the op and the user's line."""
    return TraceError(f"tg.ops.{op}: {what}", where=user_location(2), fix=fix)


def combines(op: str, x: Array, n: int) -> None:
    """Record that `op` combines n elements of x along an axis (dynamic.py refuses one
    whose n follows the dynamic length: the padding would count)."""
    tracer_of(x).combines.append((op, user_location(2), int(n)))


def is_scalar(x: Any) -> bool:
    return isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating))


def require_array(op: str, x: Any, name: str = "x") -> Array:
    if isinstance(x, Array):
        return x
    if isinstance(x, DynamicScalar):
        raise fail(op, f"{name} is the dynamic scalar {x.name}, whose value changes on every "
                       "call: an op would bake the traced value into the graph",
                   "pass it to a kernel as it is (the graph patches it per call), or declare "
                   "it static (not in dynamic=)")
    if isinstance(x, np.ndarray) or hasattr(x, "__cuda_array_interface__") or (
            _numba.is_simulated_device_array(x)):
        kind = type(x).__name__ if isinstance(x, np.ndarray) else "device array"
        raise fail(op, f"{name} is a {kind}, not a traced array",
                   "pass it as an argument of the @tg.compile function (it becomes a graph "
                   "input); ops work on the traced arrays inside the function")
    from ..trace.origins import what_it_is
    raise fail(op, f"{name} must be a traced array, got {what_it_is(x)}",
               "call tg.ops inside a @tg.compile function on its array arguments or on "
               "arrays made there (tg.empty, other ops)")


def require_operand(op: str, x: Any, name: str) -> Array | Any:
    """A traced array or a Python/NumPy scalar."""
    if is_scalar(x):
        return x
    return require_array(op, x, name)


def check_dtype(op: str, dtype: np.dtype, allowed: Sequence[np.dtype] = SUPPORTED,
                name: str = "x") -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype not in allowed:
        names = ", ".join(str(d) for d in allowed)
        raise fail(op, f"{name} has dtype {dtype}, which this op does not take",
                   f"use one of {names} (tg.ops.astype converts)")
    return dtype


def scalar_of(value: Any, dtype: np.dtype) -> Any:
    """A Python/NumPy scalar as a NumPy scalar of `dtype`: the kernel's argument type."""
    return np.dtype(dtype).type(value)


def out_array(op: str, out: Any, shape: tuple[int, ...], dtype: np.dtype) -> tuple[Array, bool]:
    """The result array: a new graph-owned one, or `out` after checking it.

    Returns (array, user_gave_out).
    """
    if out is None:
        return empty(shape, dtype), False
    out = require_array(op, out, "out")
    if tuple(out.shape) != tuple(shape):
        raise fail(op, f"out has shape {out.shape}, the result has shape {tuple(shape)}",
                   "pass an out array of the result's shape, or leave out=None")
    if not np.can_cast(dtype, out.dtype, "same_kind"):
        raise fail(op, f"the result is {dtype}; writing it into out of dtype {out.dtype} "
                   "would change its kind", f"pass an out array of dtype {dtype}")
    if not distinct_elements(out):
        raise fail(op, f"the elements of out (shape {tuple(out.shape)}, strides "
                   f"{tuple(out.strides)}: a broadcast view?) overlap one another: several "
                   "results would be written to one element, in no set order",
                   "pass an out array whose elements are distinct (NumPy refuses a "
                   "broadcast out as read-only)")
    return out, True


def distinct_elements(a: Array) -> bool:
    """Whether no two elements of `a` share a byte: ordered by |stride|, each dimension
    of more than one element steps past all the ones inside it. (Sufficient; every
    slice of a C- or Fortran-ordered array passes; a stride 0 of a broadcast fails.)"""
    if 0 in a.shape:
        return True
    extent = a.itemsize
    for s, n in sorted((abs(s), n) for n, s in zip(a.shape, a.strides) if n > 1):
        if s < extent:
            return False
        extent += s * (n - 1)
    return True


# ---------------------------------------------------------------------------
# views

def view(a: Array, shape: Sequence[int], strides: Sequence[int], offset: int | None = None,
         dtype: Any = None) -> Array:
    v = view_of(a)
    return like(a, View(v.buffer, v.offset if offset is None else offset,
                                 tuple(int(s) for s in shape), tuple(int(s) for s in strides),
                                 v.dtype if dtype is None else np.dtype(dtype)))


def broadcast_strides(a: Array, shape: tuple[int, ...]) -> tuple[int, ...]:
    """`a`'s strides when broadcast to `shape` (0 along the broadcast dimensions)."""
    pad = len(shape) - a.ndim
    strides = [0] * pad
    for n, (m, s) in zip(shape[pad:], zip(a.shape, a.strides)):
        strides.append(0 if m == 1 and n != 1 else s)
    return tuple(strides)


def broadcast_to(a: Array, shape: Sequence[int]) -> Array:
    """A view of `a` with NumPy's broadcasting to `shape` (stride 0 where it repeats)."""
    shape = tuple(int(s) for s in shape)
    try:
        if np.broadcast_shapes(tuple(a.shape), shape) != shape:
            raise ValueError
    except ValueError:
        raise fail("broadcast_to", f"cannot broadcast shape {a.shape} to {shape}",
                   "dimensions must match or be 1, aligned from the right") from None
    return view(a, shape, broadcast_strides(a, shape))


def broadcast_shapes(op: str, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        listed = " ".join(str(tuple(s)) for s in shapes)
        raise fail(op, f"operands could not be broadcast together with shapes {listed}",
                   "dimensions must match or be 1, aligned from the right (index with None "
                   "or reshape to add an axis)") from None


def collapse(shape: Sequence[int], strides: Sequence[Sequence[int]]
             ) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Merge dimensions that are contiguous for every operand; drop size-1 dimensions.

    `strides[k]` are operand k's strides over `shape`. Returns the shorter shape and each
    operand's strides over it; the elements are visited in the same order.
    """
    dims = [(n, [s[d] for s in strides]) for d, n in enumerate(shape) if n != 1]
    merged: list[tuple[int, list[int]]] = []
    for n, ss in reversed(dims):
        if merged:
            m, inner = merged[-1]
            if all(s == t * m for s, t in zip(ss, inner)):
                merged[-1] = (n * m, inner)
                continue
        merged.append((n, ss))
    merged.reverse()
    new_shape = tuple(n for n, _ in merged)
    new_strides = [tuple(ss[k] for _, ss in merged) for k in range(len(strides))]
    return new_shape, new_strides


def as_rank(a: Array, shape: Sequence[int], strides: Sequence[int], rank: int = RANK) -> Array:
    """A view of `a` with `shape`/`strides` left-padded with size-1 dimensions to `rank`."""
    pad = rank - len(shape)
    return view(a, (1,) * pad + tuple(shape), (0,) * pad + tuple(strides))


def overlaps(a: Array, b: Array) -> bool:
    va, vb = view_of(a), view_of(b)
    if va.buffer != vb.buffer or va.size == 0 or vb.size == 0:
        return False
    (a0, a1), (b0, b1) = va.byte_range(), vb.byte_range()
    return a0 < b1 and b0 < a1


def same_elements(x: Array, out: Array) -> bool:
    """Whether `x`, broadcast to out's shape, is at every index the element that `out`
    is there: same buffer, offset and item size, and the same strides along every
    dimension of more than one element."""
    vx, vo = view_of(x), view_of(out)
    shape = tuple(vo.shape)
    if (vx.buffer, vx.offset, vx.itemsize) != (vo.buffer, vo.offset, vo.itemsize):
        return False
    try:
        if np.broadcast_shapes(tuple(vx.shape), shape) != shape:
            return False
    except ValueError:
        return False
    return all(n == 1 or s == t
               for n, s, t in zip(shape, broadcast_strides(x, shape), vo.strides))


def must_copy(x: Any, out: Array, *, in_place: bool = True) -> bool:
    """NumPy's rule for an input `x` of an op that writes `out`: copy x first when it
    overlaps out, unless x and out are the same elements (`same_elements`) and the op
    runs in place (`in_place`: each element of x is read only for the element of out at
    the same index, by the thread that writes it, after any other reads of it).

    Scalars need no copy. Every op that takes `out=` checks each of its array inputs.
    """
    if not isinstance(x, Array) or not overlaps(x, out):
        return False
    return not (in_place and same_elements(x, out))


def normalize_axis(op: str, axis: Any, ndim: int) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise fail(op, f"axis must be an int or None, got {axis!r}",
                   "reduce one axis at a time (or all of them with axis=None)")
    if not -ndim <= axis < max(ndim, 1):
        raise fail(op, f"axis {axis} is out of bounds for an array of {ndim} dimensions",
                   f"use an axis in [{-ndim}, {ndim - 1}]")
    return int(axis) % max(ndim, 1)


# ---------------------------------------------------------------------------
# launch sizes (chosen at trace time; the simulator runs one Python thread per CUDA
# thread, so it gets few threads that loop over the elements)

def next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def launch_1d(n: int) -> tuple[int, int]:
    """(grid, block) for a grid-stride loop over n elements."""
    n = max(int(n), 1)
    if SIMULATOR:
        return min(4, -(-n // 8)), min(8, n)
    block = min(256, -(-n // 32) * 32)
    return min(-(-n // block), 1024), block


def block_for(n: int) -> int:
    """Threads of one block that reduces n values (a power of two)."""
    if SIMULATOR:
        return min(8, next_pow2(n))
    return max(32, min(MAX_BLOCK, next_pow2(n)))


def grid_for(rows: int) -> int:
    """Blocks for `rows` independent block-sized jobs (each block loops over its share)."""
    return max(1, min(rows, 8 if SIMULATOR else 65535))


# ---------------------------------------------------------------------------
# kernels made from a template (one kernel per op, named after it)

def make_kernel(name: str, template: str, env: dict[str, Any], **fields: str) -> Any:
    """`cuda.jit` of `template` filled in with `fields`, defining a function `name`.

    `env` is the kernel's global namespace (modules and device functions it calls). The
    source is registered with linecache so tracebacks and Numba's messages show it.
    """
    source = template.format(name=name, **fields)
    filename = f"<tracegraph.ops.{name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = dict(env)
    exec(compile(source, filename, "exec"), namespace)
    fn = namespace.pop(name)
    fn.__module__ = env.get("__name__", __name__)
    return cuda.jit(fn)


def launched_nothing(result: Array) -> Array:
    """An op on 0 elements launches nothing; the trace still counts it as a launch (a
    function that works for every size must not fail for size 0)."""
    tracer_of(result).launches += 1
    return result
