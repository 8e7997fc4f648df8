"""Where the traced function found the device arrays it captured (device arrays it passed
to kernels that are not its arguments): a global, a closure variable, or an attribute or
item of one of those or of an argument (`W`, `model.w`, `CFG["w"]`, `self.layers[2].w`).

A graph holds a captured array by address. Eagerly, every call looks the name up again,
so an array rebound between calls (`model.w = new`) is used at once; a replay checks each
path still finds the array it found when traced (api.py traces again where not). An array
found by no path is named in a warning at trace time: rebinding it is not seen.
"""
from __future__ import annotations

import enum
import itertools
import types
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SignatureError
from ..signature import arguments
from ..signature.call import static_key

_DEPTH = 3       # steps from a root: self.layers[2].w
_BREADTH = 256   # entries looked at per container or object
_VISITS = 4096   # objects looked into per trace: a large reachable dataset stays cheap
_ALIASES = 4     # paths looked into one object by (MODEL and self.model)
_LOOKS = 20_000  # values looked at per trace (each described: about 1 us)


@dataclass(frozen=True)
class HostRef:
    """A path from a root (("global", name), ("closure", name) or ("leaf", k, its name))
    through attributes (".", name) and items ("[]", key)."""
    root: tuple
    steps: tuple[tuple[str, Any], ...]

    def resolve(self, fn: Callable, leaves: list) -> Any:
        kind, key = self.root[0], self.root[1]
        try:
            if kind == "global":
                value = fn.__globals__[key]
            elif kind == "closure":
                cell = fn.__closure__[fn.__code__.co_freevars.index(key)]  # type: ignore[index]
                value = cell.cell_contents
            elif kind == "self":  # the instance of a bound method compiled as it is
                value = fn.__self__  # type: ignore[attr-defined]
            else:
                value = leaves[key]
            for how, name in self.steps:
                value = getattr(value, name) if how == "." else value[name]
        except Exception:  # the path leads nowhere now: not the array it found
            return _GONE
        return value

    def describe(self) -> str:
        out = self.root[2] if self.root[0] == "leaf" else self.root[1]
        for how, name in self.steps:
            out += f".{name}" if how == "." else f"[{name!r}]"
        return out


_GONE = object()


@dataclass(frozen=True)
class Guard:
    """One captured array and a path that found it; holds it while the graph does."""
    ref: HostRef
    array: Any
    info: arguments.ArrayInfo

    def holds(self, fn: Callable, leaves: list) -> bool:
        """Does the path still find this array over the same memory? (An object whose
        storage can change in place, a torch Parameter, is described again.)"""
        now = self.ref.resolve(fn, leaves)
        if now is self.array and arguments.has_fixed_metadata(now):
            return True
        try:
            info = arguments.describe(now) if now is not _GONE else None
        except Exception:  # a path that now finds something odd: not the array
            return False
        return info is not None and (info.ptr, info.shape, info.strides, info.dtype,
                                     info.placement) == \
            (self.info.ptr, self.info.shape, self.info.strides, self.info.dtype,
             self.info.placement)


@dataclass(frozen=True)
class ValueGuard:
    """A Python value the code names (a global `IDX`, `self.mode`) that may pick which
    captured array a kernel gets (`WL[IDX]`): the graph holds while it is the same."""
    ref: HostRef
    key: tuple
    check: tuple | None = None  # as KernelGuard's: the very object a direct replay expects

    @property
    def array(self) -> Any:
        return _GONE

    def holds(self, fn: Callable, leaves: list) -> bool:
        return static_key(self.ref.resolve(fn, leaves)) == self.key


@dataclass(frozen=True)
class KernelGuard:
    """A kernel the function launched and a name its code uses that found it (`step`,
    `self.kernel`): rebinding the name (a notebook cell run again) launches the new kernel
    eagerly, so the graph holds while the name finds the same kernel object."""
    ref: HostRef
    kernel: Any
    # (scope dict, name, kernel) or (cell, None, kernel) where a global or closure variable
    # the code names found it: what a direct replay checks itself (backends.checks_hold, C)
    check: tuple | None = None

    @property
    def array(self) -> Any:
        return _GONE

    def holds(self, fn: Callable, leaves: list) -> bool:
        return self.ref.resolve(fn, leaves) is self.kernel


def _kernel_or_held(fn: Callable, ref: HostRef, value: Any, names: frozenset[str],
                    kernel_ids: set[int], held_ids: set[int]) -> list[Any]:
    """The guard of a path the code names to a launched kernel or a held host array."""
    if not _named(ref, names):
        return []
    if id(value) in kernel_ids:
        return [KernelGuard(ref, value, _fast_check(fn, ref, value))]
    info = arguments.describe(value) if id(value) in held_ids else None
    return [] if info is None else [Guard(ref, value, info)]


def _fast_check(fn: Callable, ref: HostRef, kernel: Any) -> tuple | None:
    if ref.steps:
        return None
    kind, name = ref.root[0], ref.root[1]
    if kind == "global":
        return (fn.__globals__, name, kernel)
    if kind == "closure":
        cell = fn.__closure__[fn.__code__.co_freevars.index(name)]  # type: ignore[index]
        return (cell, None, kernel)
    return None


_SELECTORS = (int, float, str, bool, np.integer, np.floating, np.bool_, type(None), enum.Enum)
VARIANTS = 3      # graphs kept per signature for what captured arrays' names find now
_RETRACES = 8     # traces for moved captured arrays before a warning says what to do


def stale_guard(program: Any, fn: Callable, leaves: list) -> Any:
    """The first guard of `program` whose path finds another array now (None: none)."""
    return next((g for g in program.guards if not g.holds(fn, leaves)), None)


def stale_error(stale: Any, qualname: str) -> SignatureError:
    what = ("another value than when {q} was traced, which may pick another captured "
            "device array" if isinstance(stale, ValueGuard) else
            "another kernel than when {q} was traced, and the graph launches the old one"
            if isinstance(stale, KernelGuard) else
            "another device array than when {q} was traced, and the graph holds the old "
            "one by address").format(q=qualname)
    return SignatureError(f"{stale.ref.describe()} holds {what}",
                          fix="call the function (not .replay) to trace it again")


def find_guards(fn: Callable, leaves: list, paths: list[str], captured: list[Any],
                name: str, where: str, held: list[Any], kernels: list[Any]) -> tuple[Any, ...]:
    """A guard for every path that finds a captured array, or an array holding it (a view
    the function took: `W[2:]`): all of them, since the code may read any one (aliases,
    tied weights). Warn about arrays no path finds. `held`: the host arrays it copied to
    the device (cuda.to_device(TABLE)), guarded where a path finds them (an array the
    function made is found by none, and is what eager makes again). `kernels`: the
    kernels it launched, guarded where a path the code names finds them (one a called
    function launches through its own globals is found by none: docs/sharp-edges.md)."""
    targets = {id(a): a for a in captured}
    held_ids = {id(h) for h in held}
    kernel_ids = {id(k) for k in kernels}
    names = _code_names(fn)
    guards: list[Any] = []
    holders: list[Guard] = []  # paths to other device arrays: views' bases
    for ref, value in _search(fn, leaves, paths, names, kernel_ids):
        if isinstance(value, _SELECTORS) and id(value) not in kernel_ids:
            # values that may pick a captured array, a kernel or a held host array
            # (`KS[IDX]`); an argument itself is in the signature already; no list items:
            # a counter the function keeps (`TR[0] += 1`) would retrace it on every call
            if (ref.steps or ref.root[0] != "leaf") and _named(ref, names) and \
                    all(how == "." or isinstance(key, str) for how, key in ref.steps):
                guards.append(ValueGuard(ref, static_key(value), _fast_check(fn, ref, value)))
            continue
        if id(value) in kernel_ids or not captured:  # (no view of a capture can matter)
            guards += _kernel_or_held(fn, ref, value, names, kernel_ids, held_ids)
            continue
        info = arguments.describe(value)
        if info is not None and info.placement == arguments.DEVICE:
            (guards if id(value) in targets else holders).append(Guard(ref, value, info))
        elif info is not None and id(value) in held_ids and _named(ref, names):
            guards.append(Guard(ref, value, info))
    missing = []
    for k, a in targets.items():
        mine = [g for g in guards if id(g.array) == k] or \
            _holders(arguments.describe(a), holders)
        selectors = [g.ref for g in guards if isinstance(g, ValueGuard)]
        if not any(_named(g.ref, names) or _picked(g.ref, selectors) for g in mine):
            missing.append(a)  # only aliases the code never names: its own path is unseen
        guards += [g for g in mine if id(g.array) != k]
    if missing:
        warnings.warn(f"tracegraph: {name} passed {len(missing)} device array(s) to kernels "
                      "that are neither its arguments nor found through a name its code "
                      "uses (a global, closure variable, or an attribute or item of one of "
                      "them or of an argument, at most 3 steps; e.g. an array a function it "
                      "called returned): the graph keeps them by address, and rebinding "
                      "where they come from will not be seen by replays. Pass them as "
                      f"arguments of the traced function (traced at {where})", UserWarning,
                      stacklevel=2)
    return tuple(guards)


def _search(fn: Callable, leaves: list, paths: list[str], names: frozenset[str],
            also: set[int] = frozenset()) -> Iterator[tuple[HostRef, Any]]:  # type: ignore[assignment]
    """Breadth first from the roots, every path to a device array (up to _DEPTH steps,
    _VISITS objects looked into, _LOOKS values looked at); an object that raises is
    skipped."""
    seen: dict[int, int] = {}  # object -> paths looked into it by (aliases: a few)
    queue: deque[tuple[Any, HostRef]] = deque((v, r) for r, v in _roots(fn, leaves, paths,
                                                                         names))
    looked = 0
    while queue and looked < _LOOKS:
        value, ref = queue.popleft()
        looked += 1
        try:
            if id(value) in also or arguments.describe(value) is not None or (
                    isinstance(value, _SELECTORS) and len(ref.steps) <= 2):
                yield ref, value
                continue
            if seen.get(id(value), 0) >= _ALIASES or len(ref.steps) >= _DEPTH or \
                    len(seen) >= _VISITS or not _worth_looking(value):
                continue
            seen[id(value)] = seen.get(id(value), 0) + 1
            for step, child in _children(value, names):
                if len(queue) + looked >= _LOOKS:
                    break
                queue.append((child, HostRef(ref.root, (*ref.steps, step))))
        except Exception:  # a __getattr__ or property that raises: nothing found there
            continue


def _picked(ref: HostRef, selectors: list[HostRef]) -> bool:
    """Is a value the code names an attribute of the object holding the array there
    (`getattr(e, e.which)`: the array at e.w_a, the selector at e.which)?"""
    return any(r.root == ref.root and r.steps[:-1] == ref.steps[:-1] for r in selectors
               if ref.steps)


def _holders(info: Any, holders: list[Guard]) -> list[Guard]:
    """The paths to arrays whose memory holds all of `info`'s."""
    lo, hi = info.extent
    return [g for g in holders if g.info.extent[0] <= lo and hi <= g.info.extent[1]]


def _roots(fn: Callable, leaves: list, paths: list[str],
           names: frozenset[str]) -> Iterator[tuple[HostRef, Any]]:
    for k, value in enumerate(leaves[:len(paths)]):
        if arguments.describe(value) is None:
            yield HostRef(("leaf", k, paths[k]), ()), value
    code = getattr(fn, "__code__", None)
    if code is None:
        return
    if getattr(fn, "__self__", None) is not None and not isinstance(fn.__self__,  # type: ignore[attr-defined]
                                                                      types.ModuleType):
        yield HostRef(("self", "self"), ()), fn.__self__  # type: ignore[attr-defined]
    scope = getattr(fn, "__globals__", {})
    for name in sorted(names):
        if name in scope:
            yield HostRef(("global", name), ()), scope[name]
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            yield HostRef(("closure", name), ()), cell.cell_contents
        except ValueError:  # an empty cell
            continue


def _code_names(fn: Callable) -> frozenset[str]:
    """Every name fn's code (and the code nested in it) loads, globals and attributes, and
    the strings it holds (dict keys: `CFG["w"]`)."""
    names: set[str] = set()
    stack = [getattr(fn, "__code__", None)]
    while stack:
        code = stack.pop()
        if code is None:
            continue
        names.update(code.co_names)
        names.update(c for c in code.co_consts if isinstance(c, str))
        stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return frozenset(names)


def _named(ref: HostRef, names: frozenset[str]) -> bool:
    """Could the code have read the array by this path? Every attribute and string key on
    it is a name the code uses (`model.head`, an alias the code never names, is not)."""
    return all(isinstance(key, int) or key in names for _, key in ref.steps)


_LEAVES = (str, bytes, int, float, complex, bool, type(None), type, types.FunctionType,
           types.BuiltinFunctionType, types.MethodType)


def _worth_looking(value: Any) -> bool:
    # NumPy arrays hold no device arrays
    return not isinstance(value, _LEAVES) and not isinstance(value, np.ndarray)


def _children(value: Any, names: frozenset[str]) -> Iterator[tuple[tuple[str, Any], Any]]:
    if isinstance(value, types.ModuleType):  # only the names the code uses
        scope = vars(value)
        for name in sorted(names & scope.keys()):
            yield (".", name), scope[name]
        return
    if isinstance(value, dict):
        for k, v in itertools.islice(value.items(), _BREADTH):
            if isinstance(k, (str, int)):
                yield ("[]", k), v
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(itertools.islice(value, _BREADTH)):
            yield ("[]", i), v
        return
    attrs = getattr(value, "__dict__", None)
    own = attrs.keys() if isinstance(attrs, dict) else ()
    if isinstance(attrs, dict):
        for k, v in itertools.islice(attrs.items(), _BREADTH):
            yield (".", k), v
    for k in getattr(type(value), "__slots__", ()):
        if isinstance(k, str) and hasattr(value, k):
            yield (".", k), getattr(value, k)
    # attributes the code names that the object computes (properties, __getattr__): a
    # replay evaluates them again, as the call would
    for k in sorted(names - set(own)):
        if not k.startswith("__"):
            try:
                child = getattr(value, k)
            except Exception:
                continue
            if not callable(child):
                yield (".", k), child


def guarded_now(program: Any, fn: Callable, leaves: list) -> tuple:
    """What each guard's path finds now (a value, or an array's memory and layout, so a
    fresh view over the same memory is the same): the key of the graph for them."""
    return tuple(_value_key(g.ref.resolve(fn, leaves)) if isinstance(g, ValueGuard) else
                 ("kernel", id(g.ref.resolve(fn, leaves))) if isinstance(g, KernelGuard) else
                 _memory(g.ref.resolve(fn, leaves)) for g in program.guards)


def _value_key(value: Any) -> Any:
    """A selector's value as a key (it may find an object now: `OVERRIDE = array`)."""
    return static_key(value) if isinstance(value, _SELECTORS) else \
        ("object", _memory(value) or id(value))


def _memory(value: Any) -> tuple | None:
    try:
        info = arguments.describe(value) if value is not _GONE else None
    except Exception:
        return None
    return None if info is None else (info.ptr, info.shape, info.strides, str(info.dtype))


def retraced(qualname: str, stale: Any, count: int) -> int:
    """Say once, at _RETRACES, that moved captured arrays keep tracing the function;
    returns the count."""
    if count == _RETRACES:
        warnings.warn(f"tracegraph: {qualname} was traced again {count} times because "
                      f"{stale.ref.describe()} (and the like) found another array or value "
                      "than its graphs were traced with: each trace builds a graph. Pass "
                      "arrays that change between calls as arguments (a moved argument "
                      "costs a re-point, not a trace), and values as arguments or "
                      "dynamic={...: 'value'}", UserWarning, stacklevel=4)
    return count


def overlap_said(program: Any, call: Any) -> str:
    """How the call's device inputs overlap the captured arrays unlike the compiled call's."""
    from .bind import aliased_inputs  # bind imports this module
    pairs = aliased_inputs(program.buffers, list(program.inputs), call.infos)
    changed = sorted(pairs ^ program.aliased_inputs)
    said = []
    for device_input, captured in changed:
        arg = next((i.path for i in program.inputs if i.kind == "array"
                    and i.buffer == device_input), "?")
        now = (device_input, captured) in pairs
        said.append(f"argument {arg} {'overlaps' if now else 'no longer overlaps'} the "
                    f"device array {program.buffers[captured].name} that a kernel captures "
                    "(a global or closure variable), unlike in the compiled call")
    return "; ".join(said) or "a device argument overlaps a captured array differently"
