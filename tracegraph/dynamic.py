"""Varying sizes: `tg.compile(dynamic={"x": 0}, buckets=...)` declares that axis 0 of x (and
of every argument named with it) varies together from call to call. A call of length n runs
the graph of the smallest bucket >= n: its dynamic arguments are padded to the bucket (with
`pad`, or, where the caller's device memory already has room and nothing needs the padding's
value, not at all), results come back at n by rules checked at compile time against traces
at other lengths (dynamic_results.py), a written padded argument is copied back, and
tg.length() is n inside the graph. Scalars declared "value" are kernel parameters patched
on every call instead of being baked into the graph.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from . import _numba, dynamic_results
from .errors import SignatureError, TraceError
from .ir import OutputKind
from .location import user_location
from .signature import DEVICE, ArrayInfo, Call, alias_groups, describe

VALUE = "value"  # dynamic={"dt": "value"}: a scalar patched per call
LENGTH = "<length>"  # the hidden last leaf of a dynamic call: its true length


@dataclass(frozen=True)
class DynamicSpec:
    """What varies: array arguments by path and axis, scalar arguments by path; the
    buckets (sorted sizes, or "pow2"); what padding holds; whether to grow past the
    largest bucket."""
    axes: dict[str, int]
    scalars: frozenset[str]
    buckets: tuple[int, ...] | str
    max_size: int | None
    pad: Any
    grow: bool

    @staticmethod
    def make(dynamic: dict[str, Any] | None, buckets: Any, max_size: int | None, pad: Any,
             grow: bool) -> DynamicSpec | None:
        if not dynamic:
            if buckets is not None:
                raise TraceError("buckets= without dynamic=", where=user_location(4),
                                 fix='name the varying axes, e.g. dynamic={"x": 0}')
            return None
        axes = {k: v for k, v in dynamic.items() if v != VALUE}
        scalars = frozenset(k for k, v in dynamic.items() if v == VALUE)
        for name, axis in axes.items():
            if not isinstance(axis, int) or isinstance(axis, bool) or axis < 0:
                raise TraceError(f"dynamic[{name!r}] is {axis!r}", where=user_location(4),
                                 fix='give the varying axis (an int >= 0), or "value" for a '
                                     'scalar')
        if axes and buckets is None:
            buckets = "pow2"
        if isinstance(buckets, str):
            if buckets != "pow2":
                raise TraceError(f"buckets={buckets!r}", where=user_location(4),
                                 fix='use a tuple of sizes or "pow2"')
        elif axes:
            buckets = tuple(sorted({int(b) for b in buckets}))
            if not buckets or buckets[0] < 1:
                raise TraceError(f"buckets={buckets!r}", where=user_location(4),
                                 fix="give sizes >= 1")
        return DynamicSpec(axes, scalars, buckets if axes else (), max_size, pad, grow)

    def sizes(self) -> tuple[int, ...]:
        """Every bucket, smallest first (pow2 up to max_size)."""
        if isinstance(self.buckets, tuple):
            return self.buckets
        top = self.max_size or 1
        return tuple(1 << k for k in range(max(top - 1, 0).bit_length() + 1))

    def bucket(self, n: int, qualname: str) -> int:
        """The smallest bucket >= n."""
        if not isinstance(self.buckets, tuple):  # "pow2"
            b = 1 << max(n - 1, 0).bit_length()
            if self.max_size is None or b <= self.max_size or self.grow:
                return b
        else:
            b = next((s for s in self.buckets if s >= n), 0)
            if b:
                return b
            if self.grow:
                return 1 << max(n - 1, 0).bit_length()
        raise SignatureError(f"{qualname}() got a dynamic length of {n}, above its largest "
                             f"bucket {self.sizes()[-1]}", where=user_location(4),
                             fix="pass at most that many, add a larger bucket, or compile with "
                                 "grow=True to compile a new bucket when one is needed")

    def pad_value(self, path: str) -> Any:
        return self.pad.get(path, 0) if isinstance(self.pad, dict) else self.pad


@dataclass
class Padded:
    """One call made to fit a bucket: its leaves (padded copies or views of the caller's
    arrays), the true length, the bucket, and what to undo after the run."""
    leaves: list[Any]
    n: int
    bucket: int
    originals: dict[int, Any]    # leaf -> the caller's array a padded copy stands for
    axes: dict[int, int]         # leaf -> its dynamic axis
    # leaf -> (pool key, (copy, pad rows)): copies to give back to the pool after the run
    pooled: dict[int, tuple] = field(default_factory=dict)


def dynamic_leaves(spec: DynamicSpec, paths: list[str], infos: list[ArrayInfo | None],
                   qualname: str) -> dict[int, int]:
    """leaf -> axis for the arrays the spec names (a name also covers the leaves under it)."""
    found: dict[int, int] = {}
    for name, axis in spec.axes.items():
        hits = [i for i, p in enumerate(paths) if p == name or p.startswith(name + ".")
                or p.startswith(name + "[")]
        if not hits:
            raise SignatureError(f"dynamic= names {name!r}, and {qualname}() got no array "
                                 f"there (None, an empty container, or no argument of that "
                                 "name)", where=user_location(5),
                                 fix=f"pass an array as {name}, or name one of the arguments "
                                     f"this call has: {sorted(set(paths))}")
        if all(infos[i] is None for i in hits):
            raise SignatureError(f"dynamic= names {name!r}, and {qualname}() got no array "
                                 f"there, only other values: its axis {axis} cannot vary",
                                 where=user_location(5),
                                 fix=f"pass an array (a device or NumPy array) as {name}")
        for i in hits:
            info = infos[i]
            if info is None:
                continue
            if axis >= len(info.shape):
                raise SignatureError(f"argument {paths[i]} has {len(info.shape)} dimensions; "
                                     f"its dynamic axis is {axis}", where=user_location(5),
                                     fix="declare an axis it has")
            found[i] = axis
    return found


def pad_call(spec: DynamicSpec, leaves: list[Any], paths: list[str],
             infos: list[ArrayInfo | None], qualname: str, written: set[int] | None,
             pool: dict | None = None, stream: Any = None) -> Padded:
    """The call's dynamic arrays padded to the bucket of their common length n. `written`:
    the leaves compiled graphs write (None: not known yet), which must be copies. `pool`:
    device copies earlier calls gave back (give_back), filled again instead of allocated.
    `stream`: where the call's graph runs, and so where device rows are copied."""
    axes = dynamic_leaves(spec, paths, infos, qualname)
    lengths = {paths[i]: infos[i].shape[a] for i, a in axes.items()}  # type: ignore[union-attr]
    if len(set(lengths.values())) > 1:
        raise SignatureError(f"{qualname}() got dynamic arguments of different lengths "
                             f"{lengths}; they vary together", where=user_location(4),
                             fix="pass arrays of one length along their dynamic axes")
    n = next(iter(lengths.values())) if lengths else 0
    b = spec.bucket(n, qualname)
    out, originals = list(leaves), {}
    pooled: dict[int, tuple] = {}
    if b != n:
        _refuse_shared_memory(axes, infos, paths, qualname)
        for i, axis in axes.items():
            out[i] = _padded(leaves[i], infos[i], axis, n, b, spec.pad_value(paths[i]),
                             written is None or i in written, pool, (pooled, i), stream)
            if out[i] is not leaves[i]:
                originals[i] = leaves[i]
    return Padded(out, n, b, originals, axes, pooled)


def _refuse_shared_memory(axes: dict[int, int], infos: list[ArrayInfo | None],
                          paths: list[str], qualname: str) -> None:
    """A padded call copies each dynamic array on its own: one that shares memory with
    another argument would become two memories, and a write through one would not reach
    the other (as it does eagerly and in an unpadded call)."""
    groups = alias_groups(infos)
    for i in axes:
        g = groups[i]
        shared = [paths[j] for j, h in enumerate(groups) if j != i and h is not None
                  and g is not None and h[0] == g[0]]
        if shared:
            raise SignatureError(f"{qualname}() got dynamic argument {paths[i]} sharing memory "
                                 f"with {', '.join(shared)} at a length below its bucket, "
                                 "where it is padded into a copy of its own",
                                 where=user_location(5),
                                 fix="pass arrays that do not overlap, or call at a bucket's "
                                     "length (no padding)")


def refuse_captured_overlap(padded: Padded, program: Any, paths: list[str],
                            qualname: str) -> None:
    """A dynamic device argument padded into a copy of its own while the graph captures a
    device array sharing its memory: a write through one would not reach the other (as it
    does eagerly), so this is refused as _refuse_shared_memory refuses it between
    arguments. A host one whose memory the function copies in after writing it
    (bind._refuse_constants_after_host_writes, which the copy hid from the trace) too."""
    from .ir import BufferKind
    from .trace.bind import constant_after_write, constant_after_write_error
    captured = [(b.address, b.address + b.nbytes) for b in program.buffers
                if b.kind == BufferKind.EXTERNAL]
    for i, original in padded.originals.items():
        info, now = describe(original), describe(padded.leaves[i])
        if info is None or now is None or now.extent[0] == info.extent[0]:
            continue  # padded in its own memory
        inp = program.inputs[i]
        if info.placement != DEVICE:  # a host copy the trace saw after a write to the copy
            where = inp.written and constant_after_write(program.ops, program.buffers,
                                                         inp.buffer, info.extent)
            if where:
                raise constant_after_write_error(paths[i], where)
            continue
        if not captured:
            continue
        lo, hi = info.extent
        if any(a < hi and lo < b for a, b in captured):
            raise SignatureError(f"{qualname}() got dynamic argument {paths[i]} sharing memory "
                                 "with a device array the function captures (a global, "
                                 "closure variable or attribute), at a length below its "
                                 "bucket, where it is padded into a copy of its own",
                                 where=user_location(2),
                                 fix="call at a bucket's length (no padding), or pass a dynamic "
                                     "array that does not share the captured array's memory")


def _padded(x: Any, info: Any, axis: int, n: int, b: int, fill: Any, written: bool,
            pool: dict | None = None, taken: tuple[dict, int] | None = None,
            stream: Any = None) -> Any:
    """x grown from n to b along `axis`: a view of the caller's own memory where it already
    has room and neither the padding's value nor a write there matters, else a copy (on the
    device, one from `pool` where there is one: its padding is copied from a device array
    of the pad value, so no copy from the host waits for the GPU)."""
    if isinstance(x, np.ndarray):
        shape = list(x.shape)
        shape[axis] = b
        padded = np.empty(shape, x.dtype)
        index = (slice(None),) * axis
        padded[(*index, slice(0, n))] = x
        padded[(*index, slice(n, b))] = 0 if fill is None else fill
        return padded
    if axis != 0:
        raise SignatureError(f"a device array's dynamic axis is {axis}; device arrays are "
                             "padded along axis 0 only", where=user_location(6),
                             fix="make the varying axis the first one, or pass a NumPy array")
    room = _numba.device_array_with_room(x, info, b)
    if room is not None and fill is None and not written:
        return room
    if not _c_contiguous(info):
        raise SignatureError(f"a device array of shape {info.shape} and strides "
                             f"{info.strides} passed as a dynamic argument is padded by "
                             "copying its rows, which needs a C-contiguous array",
                             where=user_location(6),
                             fix="pass a C-contiguous device array (a copy of the view), or "
                                 "a NumPy array")
    from numba import cuda
    value = 0 if fill is None else fill
    rows = (*info.shape[1:],)
    key = (taken[1] if taken else 0, b, rows, info.dtype.str, type(value), repr(value))
    kept = pool.pop(key, None) if pool is not None else None
    if kept is None:
        padded = cuda.device_array((b, *rows), info.dtype)
    else:
        padded = kept[0]
    if n and not _copy_rows(padded, x, 0, n, stream):
        if stream is not None:  # Numba copies on the legacy stream: x's writers first
            from .backends.cuda.handles import synchronize
            synchronize(stream)
        padded[:n].copy_to_device(cuda.as_cuda_array(x) if not hasattr(x, "copy_to_host")
                                  else x)
    if kept is None:
        tail = np.full((b - n, *rows), value, info.dtype)
        padded[n:].copy_to_device(tail)
        if pool is not None:  # the pad value in every row, for later calls' padding
            kept = (padded, cuda.to_device(np.full((b, *rows), value, info.dtype)))
    elif not _copy_rows(padded, kept[1], n, b, stream):
        padded[n:].copy_to_device(kept[1][n:])
    if kept is not None and taken is not None:
        taken[0][taken[1]] = (key, kept)
    return padded


class _LastPadded(NamedTuple):
    infos: list          # the unpadded call's infos and key (the signature memo's objects)
    key: tuple
    copies: dict[int, Any]  # leaf -> the padded copy it got (ours, not the caller's)
    n: int
    bucket: int
    axes: dict[int, int]
    parts: tuple         # (paths, tree, infos, key) of the padded Call


class Padder:
    """One function's padding of its calls: the device copies kept for later calls (on
    the default stream), and the last call's padded signature, reused where the call's
    arrays are the signature memo's very lists and its copies the same again."""

    def __init__(self, spec: DynamicSpec, qualname: str):
        self.spec, self.qualname = spec, qualname
        self.pool: dict = {}
        self._last: _LastPadded | None = None

    def forget(self) -> None:
        self.pool, self._last = {}, None

    def pad(self, call: Call, calls: Any, written: set[int] | None,
            reuse: bool, stream: Any = None) -> tuple[Call, Padded]:
        """The call padded to its bucket, with its true length as the last leaf
        (`calls`: the function's CallAnalyzer). `reuse`: kept copies may be filled again."""
        last = self._last
        if last is not None and (last.infos is not call.infos or last.key is not call.key):
            last = None
        if last is not None and not last.copies:  # no padding: nothing to copy
            leaves = list(call.leaves)
            return Call([*leaves, last.n], *last.parts), \
                Padded(leaves, last.n, last.bucket, {}, last.axes)
        padded = pad_call(self.spec, call.leaves, call.paths, call.infos, self.qualname,
                          written, self.pool if reuse else None, stream)
        copies = {i: padded.leaves[i] for i in padded.originals}
        if last is not None and copies.keys() == last.copies.keys() and \
                all(c is last.copies[i] for i, c in copies.items()):
            return Call([*padded.leaves, padded.n], *last.parts), padded
        out = calls.from_leaves([*padded.leaves, padded.n], [*call.paths, LENGTH],
                                call.tree, call.orders)
        self._last = _LastPadded(call.infos, call.key, copies, padded.n, padded.bucket,
                                 padded.axes, (out.paths, out.tree, out.infos, out.key))
        return out, padded

    def give_back(self, padded: Padded, program: Any) -> None:
        """The call's kept copies back for the next call, once its run is enqueued and its
        rows copied back (the next call on the default stream fills them after that); not
        one a result views (the caller holds it)."""
        if not padded.pooled:
            return
        viewed = {o.input_index for o in program.outputs if o.kind == OutputKind.INPUT_VIEW}
        for i, (key, kept) in padded.pooled.items():
            if i not in viewed:
                self.pool[key] = kept


def copy_back(padded: Padded, written: set[int], stream: Any = None) -> None:
    """The first n rows of each written padded copy back into the caller's array, on
    `stream` after the graph; a copy through Numba (the simulator's) waits for it."""
    synchronized = False
    for i, original in padded.originals.items():
        if i not in written:
            continue
        axis = padded.axes[i]
        index = (*(slice(None),) * axis, slice(0, padded.n))
        copy = padded.leaves[i]
        if 0 in original.shape:
            continue  # nothing to copy (and Numba refuses a 0-length copy's strides)
        if isinstance(original, np.ndarray):
            original[...] = copy[index]
        else:
            from numba import cuda
            if _copy_rows(original, copy, 0, padded.n, stream):
                continue
            if stream is not None and not synchronized:  # Numba copies on the legacy stream
                from .backends.cuda.handles import synchronize
                synchronize(stream)
                synchronized = True
            target = original if hasattr(original, "copy_to_device") else \
                cuda.as_cuda_array(original)
            target.copy_to_device(copy[index])


def _copy_rows(dst: Any, src: Any, start: int, stop: int, stream: Any) -> bool:
    """Rows start..stop of device array src into dst's as one copy enqueued on `stream`
    (where the call's graph runs), without waiting for the GPU as Numba's copy_to_device
    does; False where both are not C-contiguous alike on a GPU (then the caller copies
    through Numba)."""
    if _numba.SIMULATOR:
        return False
    to, of = describe(dst), describe(src)
    if to is None or of is None or to.placement != DEVICE or of.placement != DEVICE or \
            to.dtype != of.dtype or to.shape[1:] != of.shape[1:] or \
            not (_c_contiguous(to) and _c_contiguous(of)):
        return False
    row = to.dtype.itemsize * math.prod(to.shape[1:])
    if stop > start:
        from .backends.cuda.handles import copy_on_stream
        copy_on_stream(to.ptr + start * row, of.ptr + start * row, (stop - start) * row,
                       stream)
    return True


def _c_contiguous(info: ArrayInfo) -> bool:
    step = info.dtype.itemsize
    for size, stride in zip(reversed(info.shape), reversed(info.strides)):
        if size > 1 and stride != step:
            return False
        step *= size
    return True


def bucket_of(spec: DynamicSpec, call: Any) -> int:
    """The bucket a padded call (its last leaf the true length) runs."""
    return spec.bucket(int(call.leaves[-1]), "")


def served_from(spec: DynamicSpec, b: int) -> int:
    """The smallest length the bucket b serves: every length from it to b runs b's graph."""
    lo, hi = 0, b
    while lo < hi:
        mid = (lo + hi) // 2
        if spec.bucket(mid, "") >= b:
            hi = mid
        else:
            lo = mid + 1
    return lo


def result_axes(spec: DynamicSpec, call: Any, program: Any,
                trace: Any) -> dynamic_results.ResultRules:
    """Per result leaf, its axes that follow the dynamic length, as (axis, a, b): max(0,
    a * length + b) elements; with the Python int results that follow the length, and the
    lengths the function does not trace at (dynamic_results.ResultRules). Found by tracing
    the function again at other lengths (only traced, nothing is compiled): at L + 1 and
    L + 2 (or 2 L and 3 L where those cannot be traced) to fit the rules, then at the
    smallest lengths the bucket serves and where a rule reaches 0 to check them. A result
    that breaks them cannot be cut back to a call's length: a TraceError. So is a function
    that traces at neither pair of lengths: what follows the length could not be found."""
    bucket = bucket_of(spec, call)
    traced_at = _tracer(spec, call, trace)
    lengths, probes = _probes(program, traced_at, bucket)
    dynamic_results.check_combines(program, probes[0])
    dynamic_results.check_launches(program, probes[0])
    dynamic_results.check_structure(program, probes)
    return dynamic_results.fit(program, bucket, served_from(spec, bucket), lengths, probes,
                               traced_at)


def _tracer(spec: DynamicSpec, call: Any, trace: Any) -> Any:
    """A function tracing the call with its dynamic arguments `length` long."""
    axes = dynamic_leaves(spec, call.paths, call.infos, "")

    def traced_at(length: int) -> Any:
        infos = list(call.infos)
        for i, axis in axes.items():
            info = infos[i]
            grown = list(info.shape)
            grown[axis] = length
            infos[i] = info._replace(shape=tuple(grown))
        return trace(call.__class__(call.leaves, call.paths, call.tree, infos, call.key))
    return traced_at


def _probes(program: Any, traced_at: Any, bucket: int) -> tuple[tuple[int, int], list]:
    """The function traced at two other lengths: L + 1 and L + 2, else 2 L and 3 L."""
    failure: Exception | None = None
    for lengths in ((bucket + 1, bucket + 2), (2 * bucket, 3 * bucket)):
        try:
            return lengths, [traced_at(n) for n in lengths]
        except Exception as exc:  # try the other lengths, then say why
            failure = failure or exc
    raise TraceError(f"{program.name} traces at its bucket's length {bucket} but not at "
                     f"{bucket + 1} (nor at {2 * bucket}): {type(failure).__name__}: "
                     f"{failure}. tracegraph traces a dynamic function at other lengths "
                     "to find which results and reductions follow the length",
                     fix="make the traced function work for any length along its dynamic "
                         "axes (kernels may assume nothing of it but what tg.length() "
                         "says)") from failure


def finish(entry: Any, padded: Padded, result: Any, stream: Any = None) -> Any:
    """After a padded run: written copies back into the caller's arrays, results cut to
    the true length (dynamic_results.cut), an argument handed back as the caller's own
    object. A length the function does not trace at raises before anything is copied."""
    rules = entry.dynamic_axes
    dynamic_results.refuse_failed(rules, padded.n)
    copy_back(padded, {i.index for i in entry.program.inputs if i.written}, stream)
    def argument(i: int) -> Any:  # the leaf past the arguments is tg.length(): n
        return padded.originals.get(i, padded.leaves[i] if i < len(padded.leaves) else
                                    padded.n)
    return dynamic_results.cut(entry.program, rules, padded.n, result, argument)


def resized_call(spec: DynamicSpec, call: Any, b: int, qualname: str) -> tuple:
    """(leaves, paths, tree) of example arguments made b long along their dynamic axes."""
    axes = dynamic_leaves(spec, call.paths, call.infos, qualname)
    leaves = list(call.leaves)
    for i, axis in axes.items():
        x, info = leaves[i], call.infos[i]
        n = info.shape[axis]
        if b <= n:
            leaves[i] = x[(*(slice(None),) * axis, slice(0, b))]
        else:
            leaves[i] = _padded(x, info, axis, n, b, 0, True)
    return leaves, call.paths, call.tree


def progress(items: list, what: str) -> Any:
    """A progress bar on a terminal (tqdm, where installed) over the buckets a warmup
    compiles; the items as they are else."""
    if not sys.stderr.isatty():
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=what, unit="graph")
