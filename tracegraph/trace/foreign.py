"""What a traced function runs that is not a Numba kernel: kernels compiled elsewhere
(tg.launch: a cuda.core Kernel, a CuPy RawKernel), stream-capturable library work
(tg.library: cuBLAS, PyTorch, CuPy), and the kernel-node attributes of the launches in a
`with tg.node_attributes(...)` block.

Nothing here can look inside foreign code, so what it reads and writes is what the caller
declares, and by default every array it is given is read and written."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .. import pytree
from ..errors import TraceError
from ..ir import Access, ForeignKernel, LibraryCall, NodeAttributes, Op, OpKind, View
from ..ir import Launch as LaunchData
from ..location import user_location
from ..traced import Array, DynamicScalar
from .functions import _active
from .launch_config import checked_dims


def launch(kernel: Any, grid: Any, block: Any, *args: Any, shared_mem: int = 0,
           reads: Iterable[Any] | None = None, writes: Iterable[Any] | None = None,
           sim: Callable | None = None, name: str | None = None) -> None:
    """Launch a kernel compiled outside Numba (a cuda.core `Kernel`, e.g. from NVRTC or a
    cubin, or a CuPy `RawKernel`) as a kernel node.

    Array arguments (traced arrays or captured device arrays) are passed as a pointer to
    their element 0; scalars must be NumPy scalars (`np.int32(n)`, `np.float32(x)`), which
    fix the C type of the parameter. `reads` and `writes` name the arrays it touches (the
    arrays themselves or their argument positions); without them every array argument is
    taken as read and written. `sim(*args)` runs in its place on the simulator, with NumPy
    arrays (read-only for arrays it only reads).
    """
    tracer = _active("launch")
    where = user_location(2)
    label = name or _kernel_name(kernel)
    if not (hasattr(kernel, "handle") or hasattr(getattr(kernel, "kernel", None), "ptr")):
        raise TraceError(f"tg.launch expects a cuda.core Kernel or a CuPy RawKernel, got "
                         f"{type(kernel).__name__}", where=where,
                         fix="launch @cuda.jit kernels as kernel[grid, block](...); compile "
                             "other code to a cuda.core Kernel (cuda.core.Program)")
    if sim is not None and not callable(sim):
        raise TraceError(f"tg.launch: sim= must be a function, got {type(sim).__name__}",
                         where=where, fix="pass a function taking the launch's arguments")
    traced = tuple(_foreign_arg(tracer, a, i, label, where) for i, a in enumerate(args))
    for i, v in enumerate(traced):
        if isinstance(v, View) and not v.is_c_contiguous():
            raise TraceError(f"argument {i} of {label} is a strided view (shape {v.shape}, "
                             f"strides {v.strides}): a foreign kernel gets only a pointer to "
                             "element 0, and would read the memory as contiguous",
                             where=where, fix="pass a contiguous array (tg.ops.copy(view) "
                                              "makes one), or pass the strides yourself")
    accesses = _accesses(tracer, traced, reads, writes, label, where)
    # (a foreign kernel may have opted in to more shared memory than Numba's)
    grid3, block3, shared = checked_dims(label, _dim3(grid, where), _dim3(block, where),
                                         shared_mem, where, opt_in=True)
    data = LaunchData(ForeignKernel(kernel, label, sim), grid3, block3, shared, traced,
                      attributes=tracer.node_attributes)
    tracer.ops.append(Op(OpKind.KERNEL, label, accesses, where, data))
    tracer.launches += 1


def library(fn: Callable, *args: Any, reads: Iterable[Any] | None = None,
            writes: Iterable[Any] | None = None, sim: Callable | None = None,
            name: str | None = None, may_be_empty: bool = False) -> None:
    """Run stream-capturable library work as one node: `fn(stream, *args)` must enqueue it
    on `stream` (a cuda.core Stream; `int(stream.handle)` is the CUstream), with array
    arguments as device arrays (`__cuda_array_interface__`) over graph memory.

    It is called once uncaptured on scratch arrays of the same shapes (so libraries can
    create handles, pick algorithms and allocate), then captured into a child graph that
    every replay runs; it must not synchronize, allocate inside the capture, or launch on
    another stream. `reads`/`writes` and `sim` as for tg.launch. A capture holding no work
    is refused (work enqueued on another stream would run once, now, and never in the
    graph) unless `may_be_empty=True` says that doing nothing is right (NCCL on one rank,
    in place, enqueues nothing).
    """
    tracer = _active("library")
    where = user_location(2)
    label = str(name or getattr(fn, "__name__", "library"))
    if not callable(fn):
        raise TraceError(f"tg.library expects a function, got {type(fn).__name__}",
                         where=where, fix="pass fn(stream, *arrays) that enqueues the work")
    if sim is not None and not callable(sim):
        raise TraceError(f"tg.library: sim= must be a function, got {type(sim).__name__}",
                         where=where, fix="pass a function taking the call's arguments")
    traced = tuple(_foreign_arg(tracer, a, i, label, where, scalars="any")
                   for i, a in enumerate(args))
    accesses = _accesses(tracer, traced, reads, writes, label, where)
    tracer.ops.append(Op(OpKind.LIBRARY, label, accesses, where,
                         LibraryCall(fn, traced, sim, bool(may_be_empty))))
    tracer.launches += 1


class node_attributes:
    """`with tg.node_attributes(priority=-1, persist=x, hit_ratio=0.6):` sets kernel-node
    attributes on the launches inside the block: a scheduling priority (lower runs first,
    the range of CUDA stream priorities, clamped by the driver), and an L2 access-policy
    window keeping array `persist` in L2 (`hit_ratio` of its accesses persisting)."""

    def __init__(self, priority: int | None = None, persist: Any = None,
                 hit_ratio: float = 1.0):
        self._where = user_location(2)
        self._tracer = _active("node_attributes")
        if priority is not None and not isinstance(priority, (int, np.integer)):
            raise TraceError(f"tg.node_attributes: priority must be an int, got "
                             f"{type(priority).__name__}", where=self._where,
                             fix="pass e.g. priority=-1 (lower is more urgent)")
        if not 0.0 <= float(hit_ratio) <= 1.0:
            raise TraceError(f"tg.node_attributes: hit_ratio {hit_ratio} is not in [0, 1]",
                             where=self._where, fix="pass a fraction, e.g. hit_ratio=0.6")
        view = None
        if persist is not None:
            view = self._tracer.view_or_external(persist)
            if view is None:
                raise TraceError("tg.node_attributes: persist= must be a traced or device "
                                 f"array, got {type(persist).__name__}", where=self._where,
                                 fix="pass the array the launches reuse")
        self._persist_given = persist is not None
        self._attributes = NodeAttributes(None if priority is None else int(priority), view,
                                          float(hit_ratio))

    def __enter__(self) -> node_attributes:
        self._previous = outer = self._tracer.node_attributes
        mine = self._attributes
        if outer is not None:  # inside another block: what this one leaves unset is kept
            mine = NodeAttributes(outer.priority if mine.priority is None else mine.priority,
                                  outer.persist if mine.persist is None else mine.persist,
                                  outer.hit_ratio if self._persist_given is False
                                  else mine.hit_ratio)
        self._tracer.node_attributes = mine
        return self

    def __exit__(self, *exc: Any) -> None:
        self._tracer.node_attributes = self._previous


# ---------------------------------------------------------------------------

def _kernel_name(kernel: Any) -> str:
    for attr in ("name", "__name__"):
        value = getattr(kernel, attr, None)
        if isinstance(value, str):
            return value
    return type(kernel).__name__


def _dim3(d: Any, where: str) -> tuple[int, int, int]:
    dims = tuple(d) if isinstance(d, (tuple, list)) else (d,)
    if not 1 <= len(dims) <= 3 or not all(isinstance(x, (int, np.integer)) for x in dims):
        raise TraceError(f"tg.launch: grid and block are 1 to 3 ints, got {d!r}", where=where,
                         fix="pass e.g. grid=(blocks,), block=(256,)")
    full = tuple(int(x) for x in dims) + (1,) * (3 - len(dims))
    return (full[0], full[1], full[2])


def _foreign_arg(tracer: Any, a: Any, i: int, label: str, where: str,
                 scalars: str = "numpy") -> Any:
    view = tracer.view_or_external(a)
    if view is not None:
        return view
    if isinstance(a, DynamicScalar):
        raise TraceError(f"argument {i} of {label} is the dynamic scalar {a.name}, which "
                         "foreign code cannot take as a patched parameter", where=where,
                         fix="pass it as a 1-element device array the kernel reads")
    if isinstance(a, np.ndarray):
        raise TraceError(f"argument {i} of {label} is a host NumPy array", where=where,
                         fix="pass it as an argument of the traced function (it becomes "
                             "a graph input), or copy it to the device outside")
    if scalars == "numpy":
        if isinstance(a, np.generic) and a.dtype.kind in "biuf":
            return a
        raise TraceError(f"argument {i} of {label} has type {type(a).__name__}: a foreign "
                         "kernel's parameter types are not known, so scalars must say their "
                         "C type", where=where,
                         fix="pass a NumPy scalar, e.g. np.int32(n) or np.float32(x)")
    if isinstance(a, (tuple, list, dict)) and any(
            isinstance(x, (Array, np.ndarray)) or hasattr(x, "__cuda_array_interface__")
            for x in pytree.flatten(a)[0]):
        raise TraceError(f"argument {i} of {label} is a {type(a).__name__} holding arrays, "
                         "whose reads and writes tracegraph cannot order", where=where,
                         fix="pass each array as an argument of its own")
    return a


def _accesses(tracer: Any, traced: tuple, reads: Iterable[Any] | None,
              writes: Iterable[Any] | None, label: str, where: str) -> tuple[Access, ...]:
    """Declared accesses, or every array argument read and written."""
    arrays = [(i, v) for i, v in enumerate(traced) if isinstance(v, View)]
    if reads is None and writes is None:
        # a caller's read-only array is only read: its memory never changes, as eagerly
        return tuple(Access(v.buffer, *v.byte_range(), "r" if v.readonly else "rw")
                     for _, v in arrays)

    def views(declared: Iterable[Any] | None, what: str) -> list[View]:
        out = []
        for d in _one_or_many(tracer, declared):
            if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
                if not 0 <= d < len(traced) or not isinstance(traced[d], View):
                    raise TraceError(f"{label}: {what}={d} is not the position of an array "
                                     "argument", where=where,
                                     fix="name array arguments by position or pass them")
                out.append(traced[d])
                continue
            v = tracer.view_or_external(d)
            if v is None:
                raise TraceError(f"{label}: {what} lists a {type(d).__name__}, not an array",
                                 where=where, fix="list the arrays it reads / writes")
            if not any(v == a for _, a in arrays):
                raise TraceError(f"{label}: {what} lists an array that is not one of its "
                                 "arguments", where=where,
                                 fix="list the arguments it reads / writes (or their "
                                     "positions); pass any other array it touches too")
            out.append(v)
        return out

    read_views, write_views = views(reads, "reads"), views(writes, "writes")
    for v in write_views:
        if v.readonly:
            raise TraceError(f"{label} is declared to write a read-only array (a caller's "
                             "array with writeable=False, np.frombuffer of bytes, a read-only "
                             "memmap); eager code could not write it either", where=where,
                             fix="pass a writable array (e.g. a copy), or do not list it in "
                                 "writes=")
    declared = {id(v) for v in read_views + write_views}
    for _, v in arrays:
        if id(v) not in declared and not any(v == d for d in read_views + write_views):
            read_views.append(v)  # an array argument in neither list: read, as tg.access
    # a declared write may be partial or read first: read and written
    return tuple([Access(v.buffer, *v.byte_range(), "r") for v in read_views] +
                 [Access(v.buffer, *v.byte_range(), "rw") for v in write_views])


__all__ = ["launch", "library", "node_attributes"]


def _one_or_many(tracer: Any, declared: Any) -> Iterable[Any]:
    """reads=/writes= as given: several, or one array (or position), not its rows."""
    if declared is None:
        return ()
    if isinstance(declared, (int, np.integer)) or tracer.view_or_external(declared) is not None:
        return (declared,)
    return declared
