"""What a graph depends on in the Python state its function reads by name (trace/paths.py
finds the paths: `W`, `model.w`, `CFG["w"]`, `self.layers[2].w`): captured device arrays
and held host arrays, launched kernels, Python values, and the length, keys or items of
containers. Eagerly every call looks the names up again; a replay checks each guard still
holds (api.py traces again where not), a direct replay by identity in C
(`fast_check`). A captured array found by no path is named in a warning at trace time.
The guards themselves are in trace/checks.py.
"""
from __future__ import annotations

import types
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..ir import BufferKind
from ..location import warn
from ..pytree import container_shape, layout
from ..signature import arguments
from ..traced import Array, tracer_of, view_of
from .bytecode import (
    changed,
    codes_of,
    kept,
    used_beyond_copies,
    walked,
)
from .checks import (
    VARIANTS,
    AbsentGuard,
    ContentsGuard,
    Guard,
    KernelGuard,
    LayoutGuard,
    ShapeGuard,
    TypeGuard,
    ValueGuard,
    contents_key,
    guarded_now,
    shape_key,
    stale_guard,
    value_key,
)
from .names import held_names, names_used, objects_read_whole
from .paths import (
    HostRef,
    fast_check,
    named,
    search,
)
from .values import ABSENT, GONE, is_object, is_value


def find_guards(fn: Callable, leaves: list, paths: list[str], captured: list[Any],
                name: str, where: str, held: list[Any], kernels: list[Any],
                callees: list[tuple[Any, dict, tuple]] = (),  # type: ignore[assignment]
                touched: list[Any] = ()) -> tuple[Any, ...]:  # type: ignore[assignment]
    """A guard for every path that finds a captured array, or an array holding it (a view
    the function took: `W[2:]`): all of them, since the code may read any one (aliases,
    tied weights). Warn about arrays no path finds. `held`: the host arrays it copied to
    the device (cuda.to_device(TABLE)), guarded where a path finds them (an array the
    function made is found by none, and is what eager makes again). `kernels`: the
    kernels it launched, guarded where a path the code names finds them. `callees`: the
    code of the user's functions it ran and their globals (trace/callees.py), whose names
    count as the function's own (their modules' globals are roots too). `touched`: the
    host arrays the graph copies or writes; other host arrays the code names are guarded
    by their contents (ContentsGuard)."""
    targets = {id(a): a for a in captured}
    held_ids = {id(h) for h in held}
    kernel_ids = {id(k) for k in kernels}
    names, stored, scopes, owned, tested, wholes = names_used(fn, callees)
    cut: list[str] = []
    guards: list[Any] = []
    holders: list[Guard] = []  # paths to other device arrays: views' bases
    host_holders: list[Guard] = []  # paths to host arrays: a held slice's base (T[:4])
    ran = frozenset(code for code, _, _ in callees)
    found = list(search(fn, leaves, paths, names, kernel_ids, cut, scopes, ran))
    keys = held_names(found, names, stored) | objects_read_whole(found, names, wholes)
    if keys:  # strings the code names that key a dict it reaches (`HP[KEY]`): look again
        names, cut = names | keys, []
        found = list(search(fn, leaves, paths, names, kernel_ids, cut, scopes, ran))
    _warn_kept(found, name, where)
    keeps: list[str] = []  # values it reads and sets itself
    # objects a constant-named global holds (a sentinel, `IDENTITY`): checked by identity
    # where other paths find them (`self.act is IDENTITY`)
    singletons = {id(v) for r, v in found if r.root[0] == "global" and not r.steps
                  and str(r.root[1]).isupper() and is_object(v)}  # (a constant's name)
    for ref, value in found:
        info = None if is_value(value) or id(value) in kernel_ids or \
            container_shape(value) is not None else arguments.describe(value)
        if info is None:
            holder = _holder(fn, leaves, ref)
            guards += _python_state(fn, ref, value, names, stored, kernel_ids, holder, owned,
                                    ran, singletons, tested)
            if is_value(value) and ref.steps and named(ref, names) and \
                    kept(ref, stored, holder, owned):
                keeps.append(ref.describe())
        elif id(value) in held_ids:
            if named(ref, names):
                guards.append(_array_guard(fn, ref, value, info))
                host_holders.append(Guard(ref, value, info))
        elif info.placement == arguments.DEVICE:
            (guards if id(value) in targets else holders).append(
                _array_guard(fn, ref, value, info))
        else:
            host_holders.append(Guard(ref, value, info))
    for h in held:  # found by no path the code names: the arrays holding its memory are
        if not any(g.array is h for g in guards):
            guards += [g for g in _holders(arguments.describe(h), host_holders)
                       if named(g.ref, names)]
    beyond = used_beyond_copies(codes_of(fn) + [c for c, _, _ in callees])
    guards += _contents(fn, host_holders, touched, names, stored, beyond,
                        lambda ref: (_holder(fn, leaves, ref), owned))
    missing = _unseen(targets, guards, holders, names)
    _warn(name, where, cut, missing, keeps)
    return tuple(guards)


def _warn_kept(found: list[tuple[HostRef, Any]], name: str, where: str) -> None:
    """An array made while tracing that the function keeps in its state (weights created
    lazily on the first call: `self._W = cuda.to_device(...)`, a cached_property): only a
    stand-in is kept there, which the next trace, or an eager call, cannot use."""
    kept = sorted({ref.describe() for ref, value in found
                   if isinstance(value, Array) and _made(value)})
    if kept:
        warn(
            f"tracegraph: {name} keeps an array it made while tracing in "
            f"{', '.join(kept[:3])}: what is kept there is a stand-in for the graph's own "
            "memory, not a device array, so the next trace or an eager call fails on it. "
            "Make such arrays before the first call (in __init__, or by calling the "
            f"function once without tracegraph), or return them (traced at {where})")


def _made(a: Array) -> bool:
    """Is `a` over memory the trace made (not the caller's arrays, nor views of them)?"""
    return tracer_of(a).buffers[view_of(a).buffer].kind in (BufferKind.TEMP,
                                                             BufferKind.HOST_CONSTANT)


def _array_guard(fn: Callable, ref: HostRef, value: Any, info: arguments.ArrayInfo) -> Guard:
    """A Guard a direct replay may check by identity where the array's metadata is fixed."""
    return Guard(ref, value, info, fast_check(fn, ref, value)
                 if arguments.has_fixed_metadata(value) else None)


def _unseen(targets: dict[int, Any], guards: list[Any], holders: list[Guard],
            names: frozenset[str]) -> list[Any]:
    """The captured arrays no path the code names finds (only aliases it never names);
    adds to `guards` the paths to arrays holding the others (views' bases)."""
    missing = []
    for k, a in targets.items():
        mine = [g for g in guards if id(g.array) == k] or \
            _holders(arguments.describe(a), holders)
        selectors = [g.ref for g in guards if isinstance(g, ValueGuard)]
        if not any(named(g.ref, names) or _picked(g.ref, selectors) for g in mine):
            missing.append(a)
        guards += [g for g in mine if id(g.array) != k]
    return missing


ITEMS = 256  # a list, tuple or set of at most this many numbers is checked item by item


def _holder(fn: Callable, leaves: list, ref: HostRef) -> Any:
    """The object holding the end of `ref` (GONE for a root)."""
    return HostRef(ref.root, ref.steps[:-1]).resolve(fn, leaves) if ref.steps else GONE


def _contents(fn: Callable, host_holders: list[Guard], touched: list[Any],
              names: frozenset[str], stored: frozenset[str], beyond: frozenset[str],
              whose: Callable) -> list[Any]:
    """For each host array the code names (not an argument itself) and does not change: a
    ContentsGuard where the code reads it beyond copies and its layout (`T.max()`,
    `COEF[0]`, even with `cuda.to_device(T)`: the copy follows T's contents, the value read
    at trace time does not); else, where the graph does not copy it, a check that the name
    finds the very array (`H.shape`, `len(H)`: its layout is then the same)."""
    extents = [i.extent for i in map(arguments.describe, touched) if i is not None]
    out: list[Any] = []
    for g in host_holders:
        if not (g.ref.steps or g.ref.root[0] != "leaf") or not named(g.ref, names) or \
                kept(g.ref, stored, *whose(g.ref)) or changed(g.ref, stored, *whose(g.ref)):
            continue
        if _array_name(g.ref) in beyond:
            out.append(ContentsGuard(g.ref, contents_key(g.array)))  # type: ignore[arg-type]
        elif not any(lo < g.info.extent[1] and g.info.extent[0] < hi for lo, hi in extents):
            out.append(LayoutGuard(g.ref, layout(g.array), fast_check(fn, g.ref, g.array, 3)))
    return out


def _array_name(ref: HostRef) -> str:
    """The last attribute or variable name on the path (`T` of `TABLES[IDX]`... `TABLES`)."""
    for how, key in reversed(ref.steps):
        if how == "." and isinstance(key, str):
            return key
    return str(ref.root[2] if ref.root[0] == "leaf" else ref.root[1])


def _warn(name: str, where: str, cut: list[str], missing: list[Any],
          keeps: list[str]) -> None:
    if cut:
        warn(f"tracegraph: looking for what {name} reaches by name (to see it "
             f"change between calls) stopped where {cut[0]}: a change past that "
             "point is not seen by replays. Pass what changes as arguments "
             f"(traced at {where})")
    if missing:
        warn(f"tracegraph: {name} passed {len(missing)} device array(s) to kernels "
             "that are neither its arguments nor found through a name its code "
             "uses (a global, closure variable, or an attribute or item of one of "
             "them or of an argument, at most 3 steps; e.g. an array a function it "
             "called returned): the graph keeps them by address, and rebinding "
             "where they come from will not be seen by replays. Pass them as "
             f"arguments of the traced function (traced at {where})")
    if keeps:
        warn(f"tracegraph: {name} names {', '.join(sorted(set(keeps))[:3])}, which it "
             "(or a function it calls) also sets: that Python runs only when it "
             "traces, so replays keep the value the trace left, and repeat what the "
             "trace did with any value it read there (a flag cleared after a reset "
             "resets on every replay). Keep such state outside the traced function, or "
             f"pass it as an argument (traced at {where})")


def _python_state(fn: Callable, ref: HostRef, value: Any, names: frozenset[str],
                  stored: frozenset[str], kernel_ids: set[int], holder: Any,
                  owned: dict[str, set[int]], ran: frozenset,
                  singletons: set[int], tested: dict[str, set[int] | None]) -> list[Any]:
    """The guard of a value, kernel, container or other object found at `ref` (or of
    nothing found there), if it needs one. An argument itself is in the signature
    already; so is an argument's own structure."""
    if id(value) in kernel_ids or (isinstance(value, types.FunctionType) and
                                   value.__code__ in ran) or _library_function(value) or \
            _wraps_one_that_ran(value, ran):
        return [KernelGuard(ref, value, fast_check(fn, ref, value))] \
            if named(ref, names) else []
    if not (ref.steps or ref.root[0] != "leaf") or not named(ref, names) or \
            kept(ref, stored, holder, owned):
        return []
    if value is ABSENT:  # (not a name the code sets somewhere: a lazily made cache; one a
        # method asks of its own object, only on the objects it ran on)
        name = ref.steps[-1][1]
        on = tested.get(name)  # (None: any object; a name a held string gave too)
        return [] if changed(ref, stored, holder, owned) or name in owned or \
            name in stored or (on is not None and id(holder) not in on) else \
            [AbsentGuard(ref, fast_check(fn, ref, value, shape=5))]
    if is_object(value):
        if changed(ref, stored, holder, owned):
            return []
        if id(value) in singletons and ref.steps:
            return [KernelGuard(ref, value, fast_check(fn, ref, value))]
        if isinstance(value, weakref.ProxyTypes):  # (its type is the proxy's: the C check
            # finds its referent's class by identity)
            by_class = HostRef(ref.root, (*ref.steps, ("()", "__class__")))
            return [TypeGuard(ref, value.__class__, fast_check(fn, by_class, value.__class__))]
        return [TypeGuard(ref, type(value), fast_check(fn, ref, value, shape=4))]
    # a container the code names: its length or keys may decide what the trace launched
    # (`for g in LAYERS`, `if "wd" in OPT`, `len(T)`, however it reads them), unless the
    # function changes it itself (its length follows the traces); a list, tuple or set of
    # at most ITEMS numbers by its values too (`for s in SCALES`)
    if container_shape(value) is not None and not is_value(value):
        if changed(ref, stored, holder, owned):
            return []
        # (its items: a few numbers, however the code reads them: walked by a helper under
        # another name, through a local alias, np.prod(C), C[IDX])
        values = not isinstance(value, dict) and len(value) <= ITEMS \
            and all(is_value(v) or id(v) in kernel_ids for v in value)
        return [ShapeGuard(ref, shape_key(value, values),
                           fast_check(fn, ref, value, shape=2 if values else 1), values)]
    # a value that may pick a captured array, a kernel or a held host array (`KS[IDX]`), or
    # that a kernel gets; no list item: a counter the function keeps (`TR[0] += 1`) would
    # trace it on every call; an entry only `.items()`/`.values()` name, of a dict the
    # code walks
    last = ref.steps[-1:]
    walk = bool(last) and walked(HostRef(ref.root, ref.steps[:-1]), stored)
    partial = any(how == "()" for how, _ in ref.steps)  # what a functools.partial passes
    keyed = isinstance(holder, Mapping) and not isinstance(last[0][1], str) if last else False
    if is_value(value) and (not last or last[0][0] == "." or walk or partial or keyed or (
            isinstance(last[0][1], str) and f"[{last[0][1]}]" in names)):
        return [ValueGuard(ref, value_key(value), fast_check(fn, ref, value))]
    return []


def _wraps_one_that_ran(value: Any, ran: frozenset) -> bool:
    """A functools wrapper (lru_cache, wraps) of a function that ran: checked by identity,
    as the function is."""
    try:
        return getattr(getattr(value, "__wrapped__", None), "__code__", None) in ran
    except Exception:  # (a __getattr__ raising KeyError)
        return False


def _library_function(value: Any) -> bool:
    """A builtin or NumPy function held as a value (`m.combine = operator.add`, `np.add`,
    `m.lookup = TABLE.get`): what calling it computes changes with it, so it is checked by
    identity."""
    # (a bound builtin method is found only where it is kept: a class's is made anew on
    # every read, and the search does not compute those)
    return isinstance(value, (np.ufunc, types.BuiltinFunctionType))


def _picked(ref: HostRef, selectors: list[HostRef]) -> bool:
    """Is a value the code names an attribute of the object holding the array there
    (`getattr(e, e.which)`: the array at e.w_a, the selector at e.which)?"""
    return any(r.root == ref.root and r.steps[:-1] == ref.steps[:-1] for r in selectors
               if ref.steps)


def _holders(info: Any, holders: list[Guard]) -> list[Guard]:
    """The paths to arrays whose memory holds all of `info`'s."""
    lo, hi = info.extent
    return [g for g in holders if g.info.extent[0] <= lo and hi <= g.info.extent[1]]


__all__ = ["VARIANTS", "AbsentGuard", "ContentsGuard", "Guard", "KernelGuard", "LayoutGuard",
           "ShapeGuard", "TypeGuard", "ValueGuard", "find_guards", "guarded_now",
           "stale_guard"]
