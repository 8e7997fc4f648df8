"""Varying sizes: `tg.compile(dynamic={"x": 0}, buckets=...)` declares that axis 0 of x (and
of every argument named with it) varies together from call to call. A call of length n runs
the graph of the smallest bucket >= n: its dynamic arguments are padded to the bucket
(padding.py), results come back at n by rules checked at compile time against traces at
other lengths (here, fitted and checked by dynamic_results.py), and tg.length() is n inside
the graph. Scalars declared "value" are kernel parameters patched on every call instead of
being baked into the graph.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from . import dynamic_results
from .errors import SignatureError, TraceError
from .location import user_location
from .signature import ArrayInfo

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
