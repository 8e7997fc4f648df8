"""Where a traced function finds Python state: paths from its arguments, globals and
closure variables (and a compiled bound method's instance, or a callable object itself)
through attributes and items (`W`, `model.w`, `CFG["w"]`, `self.layers[2].w`), searched
breadth first within bounds. trace/guards.py keeps the paths that find what a graph
depends on."""
from __future__ import annotations

import array
import enum
import functools
import inspect
import itertools
import types
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..pytree import container_shape, layout
from ..signature import arguments
from ..traced import Array
from .attributes import absent, attributes, methods
from .callees import Scope
from .values import _FUNCTIONS, ABSENT, BREADTH, GONE, is_object, is_value

_DEPTH = 3       # steps from a root: self.layers[2].w
_NAMED_DEPTH = 6  # steps through names the code uses only: MODEL.layers[1].norm.gain
_VISITS = 4096   # objects looked into per trace: a large reachable dataset stays cheap
_ALIASES = 4     # paths looked into one object by (MODEL and self.model)
_LOOKS = 20_000  # values looked at per trace (each described: about 1 us)


@dataclass(frozen=True)
class HostRef:
    """A path from a root (("global", name), ("global", name, Scope) for another module's
    global a called function reads, ("closure", name) or ("leaf", k, its name)) through
    attributes (".", name) and items ("[]", key)."""
    root: tuple
    steps: tuple[tuple[str, Any], ...]

    def resolve(self, fn: Callable, leaves: list, code_fn: Any = None) -> Any:
        """What the path finds now (`code_fn`: function_of(fn), where the caller has it)."""
        kind, key = self.root[0], self.root[1]
        if code_fn is None:
            code_fn = function_of(fn)
        try:
            if kind == "global":
                value = (self.root[2].globals if len(self.root) > 2 else
                         code_fn.__globals__)[key]
            elif kind == "closure":
                cell = code_fn.__closure__[code_fn.__code__.co_freevars.index(key)]
                value = cell.cell_contents
            elif kind == "self":  # the instance of a bound method compiled as it is
                value = code_fn.__self__
            elif kind == "object":  # a callable object compiled as it is
                value = fn
            else:
                value = leaves[key]
            for how, name in self.steps:
                value = value[name] if how == "[]" else getattr(value, name)
        except Exception:  # the path leads nowhere now: not the array it found
            return GONE
        return value

    def describe(self) -> str:
        out = self.root[2] if self.root[0] == "leaf" else \
            f"{self.root[2].name}.{self.root[1]}" if len(self.root) > 2 else self.root[1]
        for how, name in self.steps:
            out += f"[{name!r}]" if how == "[]" else f".{name}"
        return out


def fast_check(fn: Callable, ref: HostRef, value: Any, shape: int = 0) -> tuple:
    """What a direct replay checks itself (backends.checks_hold, and the C entry): (kind,
    a, b, steps, value) — the path's start (0: globals dict a, name b; 1: closure cell a;
    2: object a, the bound method's instance or the callable object; 3: argument b), then
    its steps ((is an item, key), ...), finding the very object `value` again (`shape` 1: a
    list or dict of the same length or keys; 2: of the very same items; 3: the very array,
    of the same layout; 4: an object of the same type; 5: nothing)."""
    kind, name = ref.root[0], ref.root[1]
    code_fn = function_of(fn)
    if kind == "global":
        head: tuple = (0, ref.root[2].globals if len(ref.root) > 2 else code_fn.__globals__,
                       name)
    elif kind == "closure":
        head = (1, code_fn.__closure__[code_fn.__code__.co_freevars.index(name)], None)
    elif kind == "self":
        head = (2, code_fn.__self__, None)
    elif kind == "object":
        head = (2, fn, None)
    else:
        head = (3, None, name)
    if shape:  # kind + 10: compare the container's shape (pytree.container_shape); + 20:
        # its items, each the very object (the slow path compares them by value); + 30:
        # the very array, of the same layout (pytree.layout); + 40: an object of the very
        # type; + 50: nothing found there
        head = (head[0] + 10 * shape, *head[1:])
        value = None if shape == 5 else type(value) if shape == 4 else \
            layout(value) if shape == 3 else tuple(value) if shape == 2 else \
            container_shape(value)
    return (*head, tuple((how == "[]", key) for how, key in ref.steps), value)


def search(fn: Callable, leaves: list, paths: list[str], names: frozenset[str],
           also: set[int] = frozenset(),  # type: ignore[assignment]
           cut: list[str] | None = None, scopes: tuple[Scope, ...] = (),
           ran: frozenset = frozenset()) -> Iterator[tuple[HostRef, Any]]:
    """Breadth first from the roots, every path to a device array (up to _DEPTH steps, or
    _NAMED_DEPTH through names the code uses; _VISITS objects looked into, _LOOKS values
    looked at, BREADTH entries of each; where a bound stopped it, what it left is said in
    `cut`); an object that raises is skipped.
    `scopes`: other modules' globals that called functions read; `ran`: the code of the
    functions that ran while it traced (a function kept as a value is looked into, its
    closure or bound instance, only where it ran: a callback's own state is its own)."""
    seen: dict[int, int] = {}  # object -> paths looked into it by (aliases: a few)
    queue: deque[tuple[Any, HostRef]] = deque((v, r) for r, v in roots(fn, leaves, paths,
                                                                         names, scopes))
    looked = 0
    cut = [] if cut is None else cut
    while queue and looked < _LOOKS:
        value, ref = queue.popleft()
        looked += 1
        try:
            if isinstance(value, Array):  # made while tracing, kept in the user's state
                yield ref, value
                continue
            if id(value) in also or arguments.describe(value) is not None or \
                    is_value(value):
                yield ref, value
                if not isinstance(value, enum.Enum):  # (a member's methods may have run)
                    continue
            if container_shape(value) is not None and seen.get(id(value), 0) < _ALIASES:
                yield ref, value  # its length or keys may decide what the code launches
            if isinstance(value, types.FunctionType) and value.__code__ in ran:
                yield ref, value  # a function that ran: rebinding it runs other code
            elif value is ABSENT or is_object(value) or isinstance(value, enum.EnumMeta):
                # an object (or nothing) the code may test (`isinstance(self.norm, LN)`,
                # `self.norm is None`, `hasattr(self, "bias")`): its type is guarded
                if named(ref, names) and (ref.steps or ref.root[0] != "leaf"):
                    yield ref, value
                if value is ABSENT:
                    continue
            deep = depth(ref.steps) >= _DEPTH
            if seen.get(id(value), 0) >= _ALIASES or not _worth_looking(value) or (
                    deep and (depth(ref.steps) >= _NAMED_DEPTH or not named(ref, names))):
                continue
            if len(seen) >= _VISITS:
                cut.append(f"{_VISITS} objects looked into")
                continue
            seen[id(value)] = seen.get(id(value), 0) + 1
            if isinstance(value, (dict, list, tuple)) and len(value) > BREADTH and \
                    named(ref, names):
                cut.append(f"{ref.describe()} has more than {BREADTH} entries")
            for step, child in children(value, names, ran):
                steps = step if isinstance(step[0], tuple) else (step,)
                if deep and not named(HostRef(ref.root, steps), names):
                    continue  # past _DEPTH: only names the code uses
                if len(queue) + looked >= _LOOKS:
                    cut.append(f"{_LOOKS} values looked at")
                    break
                queue.append((child, HostRef(ref.root, (*ref.steps, *steps))))
        except Exception:  # a __getattr__ or property that raises: nothing found there
            continue


def function_of(fn: Any) -> Any:
    """The function whose code, globals and closure a compiled callable runs: itself (a
    function or bound method), or its type's `__call__` (a callable object)."""
    while True:  # functools.partial and functools.wraps wrappers: the function they run
        inner = fn.func if isinstance(fn, functools.partial) else getattr(fn, "__wrapped__", None)
        if inner is None:
            break
        fn = inner
    if hasattr(fn, "__code__"):
        return fn
    call = inspect.getattr_static(type(fn), "__call__", None)
    return call if isinstance(call, types.FunctionType) else fn


def roots(fn: Callable, leaves: list, paths: list[str], names: frozenset[str],
          scopes: tuple[Scope, ...] = ()) -> Iterator[tuple[HostRef, Any]]:
    for k, value in enumerate(leaves[:len(paths)]):
        if arguments.describe(value) is None:
            yield HostRef(("leaf", k, paths[k]), ()), value
    for scope in scopes:  # another module's globals a called function reads
        for name in sorted(scope.names & scope.globals.keys()):
            yield HostRef(("global", name, scope), ()), scope.globals[name]
    code_fn = function_of(fn)
    code = getattr(code_fn, "__code__", None)
    if code is None:
        return
    if code_fn is inspect.getattr_static(type(fn), "__call__", None):  # a callable object
        yield HostRef(("object", "self"), ()), fn
    elif getattr(code_fn, "__self__", None) is not None and not isinstance(
            code_fn.__self__, types.ModuleType):
        yield HostRef(("self", "self"), ()), code_fn.__self__
    own = getattr(code_fn, "__globals__", {})
    for name in sorted(names):
        if name in own:
            yield HostRef(("global", name), ()), own[name]
    for name, cell in zip(code.co_freevars, getattr(code_fn, "__closure__", None) or ()):
        try:
            yield HostRef(("closure", name), ()), cell.cell_contents
        except ValueError:  # an empty cell
            continue


def named(ref: HostRef, names: frozenset[str]) -> bool:
    """Could the code have read the array by this path? Every attribute on it is a name
    the code uses, or one of an object the code reads whole (`astuple(cfg)`: "{cfg}"), and
    every string key a string it holds (`model.head`, an alias the code never names, is
    not)."""
    holder = ref.root[2] if ref.root[0] == "leaf" else ref.root[1]
    deep = False  # past an object read whole with what it holds (`astuple(cfg)`)
    for how, key in ref.steps:
        if how == "()":  # into a functools.partial: calling it uses all it holds
            return True
        deep = deep or f"{{{holder}*}}" in names
        if isinstance(key, str) and f"[{key}]" not in names and not (
                how == "." and (deep or key in names or f"?{key}" in names or
                                f"?self:{key}" in names or f"{{{holder}}}" in names)) and \
                not (how == "[]" and "[*]" in names):
            return False
        if isinstance(key, str):
            holder = key
    return True


_LEAVES = (str, bytes, int, float, complex, bool, type(None), types.BuiltinFunctionType)
def _worth_looking(value: Any) -> bool:
    # NumPy arrays hold no device arrays
    return not isinstance(value, _LEAVES) and not isinstance(value, np.ndarray)


def depth(steps: tuple) -> int:
    """Steps from a root, not counting those into a partial, bound method or closure cell
    (what calling it uses): `ACT.__self__.gain` is 1."""
    return sum(how != "()" for how, _ in steps) - sum(
        step == ("()", "__closure__") for step in steps)


def children(value: Any, names: frozenset[str],
             ran: frozenset = frozenset()) -> Iterator[tuple[tuple, Any]]:
    if isinstance(value, types.ModuleType):  # only the names the code uses
        scope = vars(value)
        for name in sorted(names & scope.keys()):
            yield (".", name), scope[name]
        yield from absent(value, names, scope)
        return
    if isinstance(value, type):  # a class: the names the code uses, inherited ones too
        for name in sorted(names):
            if not name.startswith(("__", "[")):
                try:
                    child = getattr(value, name)
                except Exception:
                    continue
                if not isinstance(child, _FUNCTIONS):
                    yield (".", name), child
        yield from methods(value, ran)  # its functions that ran (`K.run(x)`)
        yield from absent(value, names, ())
        return
    if isinstance(value, types.MethodType):  # a bound method kept as a value: its instance
        if getattr(value.__func__, "__code__", None) in ran:
            yield ("()", "__self__"), value.__self__
        value = value.__func__
    if isinstance(value, types.FunctionType):  # a function of the user's: its closure
        if value.__closure__ and value.__code__ in ran:
            for i, cell in enumerate(value.__closure__):
                try:
                    contents = cell.cell_contents
                except ValueError:  # an empty cell
                    continue
                yield (("()", "__closure__"), ("[]", i), ("()", "cell_contents")), contents
        return
    if isinstance(value, functools.partial):  # what calling it runs and passes: "()"
        yield ("()", "func"), value.func
        yield ("()", "args"), value.args
        yield ("()", "keywords"), value.keywords
        return
    if isinstance(value, Mapping) and not isinstance(value, dict):  # ChainMap, a proxy
        for k in itertools.islice(value, BREADTH):
            yield ("[]", k), value[k]
        return
    if isinstance(value, dict):
        # the keys the code holds first (`CFG["act"]` in a large config), then the others
        first = [n[1:-1] for n in names if n.startswith("[") and n[1:-1] in value]
        for k in first:
            yield ("[]", k), value[k]
        for k, v in itertools.islice(value.items(), BREADTH):
            if k not in first:
                yield ("[]", k), v
        if type(value) is dict:  # a subclass may give attributes too (CFG.lr of an EasyDict)
            return
    if isinstance(value, (list, tuple, deque, array.array)):
        for i, v in enumerate(itertools.islice(value, BREADTH)):
            yield ("[]", i), v
        fields = getattr(type(value), "_fields", None)  # a NamedTuple's, by name too
        if isinstance(value, tuple) and isinstance(fields, tuple):
            for k in fields[:BREADTH]:
                if isinstance(k, str) and k in names:
                    yield (".", k), getattr(value, k, None)
        return
    yield from attributes(value, names, ran)
