"""Padding a call to its bucket: a dynamic argument of length n below the bucket b runs as
a copy b long (or, where the caller's device memory already has room and nothing needs
the padding's value, as a view of it); after the run a written copy's first n rows go
back into the caller's array and results are cut to n (dynamic_results.cut). A function's
device copies are kept for its next calls (Padder); on a GPU their rows are copied on the
stream the graph runs on, so a call that reuses them does not wait for the GPU.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from . import _numba, dynamic_results
from .dynamic import LENGTH, DynamicSpec, dynamic_leaves
from .errors import SignatureError
from .ir import OutputKind
from .location import user_location
from .signature import DEVICE, ArrayInfo, Call, alias_groups, describe


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
    # the last call's arrays and copies again (Padder): checks of them still hold
    repeat: bool = False


def pad_call(spec: DynamicSpec, leaves: list[Any], paths: list[str],
             infos: list[ArrayInfo | None], qualname: str, written: set[int] | None,
             pool: dict | None = None, stream: Any = None,
             known: tuple[dict[int, int], int, int] | None = None) -> Padded:
    """The call's dynamic arrays padded to the bucket of their common length n. `written`:
    the leaves compiled graphs write (None: not known yet), which must be copies. `pool`:
    device copies earlier calls gave back (give_back), filled again instead of allocated.
    `stream`: where the call's graph runs, and so where device rows are copied. `known`:
    (axes, n, bucket) of an earlier call of these very arrays (the same `infos` list of
    the signature memo), whose lengths and memory were checked then."""
    if known is None:
        axes, n, b = _checked_lengths(spec, paths, infos, qualname)
    else:
        axes, n, b = known
    out, originals = list(leaves), {}
    pooled: dict[int, tuple] = {}
    if b != n:
        for i, axis in axes.items():
            out[i] = _padded(leaves[i], infos[i], axis, n, b, spec.pad_value(paths[i]),
                             written is None or i in written, pool, (pooled, i), stream)
            if out[i] is not leaves[i]:
                originals[i] = leaves[i]
    return Padded(out, n, b, originals, axes, pooled)


def _checked_lengths(spec: DynamicSpec, paths: list[str], infos: list[ArrayInfo | None],
                     qualname: str) -> tuple[dict[int, int], int, int]:
    """(axes, n, bucket) of a call: the dynamic arrays' common length n and its bucket;
    one sharing memory with another argument is refused where it would be padded."""
    axes = dynamic_leaves(spec, paths, infos, qualname)
    lengths = {paths[i]: infos[i].shape[a] for i, a in axes.items()}  # type: ignore[union-attr]
    if len(set(lengths.values())) > 1:
        raise SignatureError(f"{qualname}() got dynamic arguments of different lengths "
                             f"{lengths}; they vary together", where=user_location(5),
                             fix="pass arrays of one length along their dynamic axes")
    n = next(iter(lengths.values())) if lengths else 0
    b = spec.bucket(n, qualname)
    if b != n:
        _refuse_shared_memory(axes, infos, paths, qualname)
    return axes, n, b


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
        self._checked: Any = None  # the program the last padded arrays were checked against

    def forget(self) -> None:
        self.pool, self._last, self._checked = {}, None, None

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
        known = (last.axes, last.n, last.bucket) if last is not None else None
        padded = pad_call(self.spec, call.leaves, call.paths, call.infos, self.qualname,
                          written, self.pool if reuse else None, stream, known)
        copies = {i: padded.leaves[i] for i in padded.originals}
        if last is not None and copies.keys() == last.copies.keys() and \
                all(c is last.copies[i] for i, c in copies.items()):
            padded.repeat = True
            return Call([*padded.leaves, padded.n], *last.parts), padded
        out = calls.from_leaves([*padded.leaves, padded.n], [*call.paths, LENGTH],
                                call.tree, call.orders)
        self._checked = None
        self._last = _LastPadded(call.infos, call.key, copies, padded.n, padded.bucket,
                                 padded.axes, (out.paths, out.tree, out.infos, out.key))
        return out, padded

    def refuse_captured_overlap(self, padded: Padded, program: Any, paths: list[str]) -> None:
        """refuse_captured_overlap, once for the same arrays and copies run by the same
        program."""
        if padded.repeat and program is self._checked:
            return
        refuse_captured_overlap(padded, program, paths, self.qualname)
        self._checked = program

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


def copy_back(padded: Padded, written: frozenset[int] | set[int], stream: Any = None) -> None:
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


def finish(entry: Any, padded: Padded, result: Any, stream: Any = None) -> Any:
    """After a padded run: written copies back into the caller's arrays, results cut to
    the true length (dynamic_results.cut), an argument handed back as the caller's own
    object. A length the function does not trace at raises before anything is copied."""
    rules = entry.dynamic_axes
    dynamic_results.refuse_failed(rules, padded.n)
    if padded.originals:
        copy_back(padded, entry.program.written_inputs, stream)
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


