"""NumPy basic indexing and reshaping of a View, as traced arrays (and assignment into
device arrays) do them."""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import TraceError
from .ir import View
from .location import user_location


def _refuse(what: str, fix: str) -> TraceError:
    return TraceError(what, where=user_location(3), fix=fix)


def resolve_shape(shape: tuple[int, ...], size: int) -> tuple[int, ...]:
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


def index_view(v: View, key: Any) -> View:
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
