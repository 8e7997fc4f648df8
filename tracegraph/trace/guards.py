"""Where the traced function found the device arrays it captured (device arrays it passed
to kernels that are not its arguments): a global, a closure variable, or an attribute or
item of one of those or of an argument (`W`, `model.w`, `CFG["w"]`, `self.layers[2].w`).

A graph holds a captured array by address. Eagerly, every call looks the name up again,
so an array rebound between calls (`model.w = new`) is used at once; a replay checks each
path still finds the array it found when traced (api.py traces again where not). An array
found by no path is named in a warning at trace time: rebinding it is not seen.
"""
from __future__ import annotations

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


def stale_guard(program: Any, fn: Callable, leaves: list) -> Guard | None:
    """The first guard of `program` whose path finds another array now (None: none)."""
    return next((g for g in program.guards if not g.holds(fn, leaves)), None)


def stale_error(stale: Guard, qualname: str) -> SignatureError:
    return SignatureError(f"{stale.ref.describe()} holds another device array than when "
                          f"{qualname} was traced, and the graph holds the old one by address",
                          fix="call the function (not .replay) to trace it again")


def find_guards(fn: Callable, leaves: list, paths: list[str], captured: list[Any],
                name: str, where: str) -> tuple[Guard, ...]:
    """A guard for every path that finds a captured array, or an array holding it (a view
    the function took: `W[2:]`): all of them, since the code may read any one (aliases,
    tied weights). Warn about arrays no path finds."""
    targets = {id(a): a for a in captured}
    guards: list[Guard] = []
    holders: list[Guard] = []  # paths to other device arrays: views' bases
    for ref, value in _search(fn, leaves, paths):
        info = arguments.describe(value)
        if info is not None and info.placement == arguments.DEVICE:
            (guards if id(value) in targets else holders).append(Guard(ref, value, info))
    found = {id(g.array) for g in guards}
    missing = []
    for k, a in targets.items():
        if k not in found:
            held = _holders(arguments.describe(a), holders)
            guards += held
            if not held:
                missing.append(a)
    if missing:
        warnings.warn(f"tracegraph: {name} passed {len(missing)} device array(s) to kernels "
                      "that are neither its arguments nor found through a global, closure "
                      "variable or argument attribute (e.g. made by a function it called): "
                      "the graph keeps them by address, and rebinding where they come from "
                      "will not be seen by replays. Pass them as arguments of the traced "
                      f"function (traced at {where})", UserWarning, stacklevel=2)
    return tuple(guards)


def _search(fn: Callable, leaves: list, paths: list[str]) -> Iterator[tuple[HostRef, Any]]:
    """Breadth first from the roots, every path to a device array (up to _DEPTH steps,
    _VISITS objects looked into, _LOOKS values looked at); an object that raises is
    skipped."""
    names = _code_names(fn)
    seen: dict[int, int] = {}  # object -> paths looked into it by (aliases: a few)
    queue: deque[tuple[Any, HostRef]] = deque((v, r) for r, v in _roots(fn, leaves, paths,
                                                                         names))
    looked = 0
    while queue and looked < _LOOKS:
        value, ref = queue.popleft()
        looked += 1
        try:
            if arguments.describe(value) is not None:
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
    """Every name fn's code (and the code nested in it) loads: globals and attributes."""
    names: set[str] = set()
    stack = [getattr(fn, "__code__", None)]
    while stack:
        code = stack.pop()
        if code is None:
            continue
        names.update(code.co_names)
        stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return frozenset(names)


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
