"""Where a traced function finds Python state: paths from its arguments, globals and
closure variables (and a compiled bound method's instance, or a callable object itself)
through attributes and items (`W`, `model.w`, `CFG["w"]`, `self.layers[2].w`), searched
breadth first within bounds. trace/guards.py keeps the paths that find what a graph
depends on."""
from __future__ import annotations

import enum
import functools
import inspect
import itertools
import types
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..pytree import container_shape
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
        code_fn = function_of(fn)
        try:
            if kind == "global":
                value = code_fn.__globals__[key]
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
                value = getattr(value, name) if how == "." else value[name]
        except Exception:  # the path leads nowhere now: not the array it found
            return GONE
        return value

    def describe(self) -> str:
        out = self.root[2] if self.root[0] == "leaf" else self.root[1]
        for how, name in self.steps:
            out += f".{name}" if how == "." else f"[{name!r}]"
        return out


GONE = object()


SELECTORS = (int, float, complex, str, bool, np.integer, np.floating, np.complexfloating,
             np.bool_, type(None), enum.Enum)


def is_value(value: Any) -> bool:
    """A Python value a guard compares: a number, string, None or enum member, or a tuple
    of them (a tuple passed whole to a kernel, a launch grid)."""
    return isinstance(value, SELECTORS) or (
        type(value) is tuple and len(value) <= 16 and all(isinstance(v, SELECTORS)
                                                           for v in value))


def fast_check(fn: Callable, ref: HostRef, value: Any, shape: int = 0) -> tuple:
    """What a direct replay checks itself (backends.checks_hold, and the C entry): (kind,
    a, b, steps, value) — the path's start (0: globals dict a, name b; 1: closure cell a;
    2: object a, the bound method's instance or the callable object; 3: argument b), then
    its steps ((is an item, key), ...), finding the very object `value` again (`shape`: a
    list or dict of the same length or keys)."""
    kind, name = ref.root[0], ref.root[1]
    code_fn = function_of(fn)
    if kind == "global":
        head: tuple = (0, code_fn.__globals__, name)
    elif kind == "closure":
        head = (1, code_fn.__closure__[code_fn.__code__.co_freevars.index(name)], None)
    elif kind == "self":
        head = (2, code_fn.__self__, None)
    elif kind == "object":
        head = (2, fn, None)
    else:
        head = (3, None, name)
    if shape:  # kind + 10: compare the container's shape (pytree.container_shape); + 20:
        # its items, each the very object (the slow path compares them by value)
        head = (head[0] + 10 * shape, *head[1:])
        value = tuple(value) if shape == 2 else container_shape(value)
    return (*head, tuple((how == "[]", key) for how, key in ref.steps), value)


def search(fn: Callable, leaves: list, paths: list[str], names: frozenset[str],
           also: set[int] = frozenset(),  # type: ignore[assignment]
           cut: list[str] | None = None) -> Iterator[tuple[HostRef, Any]]:
    """Breadth first from the roots, every path to a device array (up to _DEPTH steps,
    _VISITS objects looked into, _LOOKS values looked at, _BREADTH entries of each; where
    a bound stopped it, what it left is said in `cut`); an object that raises is skipped."""
    seen: dict[int, int] = {}  # object -> paths looked into it by (aliases: a few)
    queue: deque[tuple[Any, HostRef]] = deque((v, r) for r, v in roots(fn, leaves, paths,
                                                                         names))
    looked = 0
    cut = [] if cut is None else cut
    while queue and looked < _LOOKS:
        value, ref = queue.popleft()
        looked += 1
        try:
            if id(value) in also or arguments.describe(value) is not None or \
                    is_value(value):
                yield ref, value
                continue
            if container_shape(value) is not None and seen.get(id(value), 0) < _ALIASES:
                yield ref, value  # its length or keys may decide what the code launches
            if seen.get(id(value), 0) >= _ALIASES or len(ref.steps) >= _DEPTH or \
                    not _worth_looking(value):
                continue
            if len(seen) >= _VISITS:
                cut.append(f"{_VISITS} objects looked into")
                continue
            seen[id(value)] = seen.get(id(value), 0) + 1
            if isinstance(value, (dict, list, tuple)) and len(value) > _BREADTH and \
                    named(ref, names):
                cut.append(f"{ref.describe()} has more than {_BREADTH} entries")
            for step, child in children(value, names):
                if len(queue) + looked >= _LOOKS:
                    cut.append(f"{_LOOKS} values looked at")
                    break
                queue.append((child, HostRef(ref.root, (*ref.steps, step))))
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


def roots(fn: Callable, leaves: list, paths: list[str],
          names: frozenset[str]) -> Iterator[tuple[HostRef, Any]]:
    for k, value in enumerate(leaves[:len(paths)]):
        if arguments.describe(value) is None:
            yield HostRef(("leaf", k, paths[k]), ()), value
    code_fn = function_of(fn)
    code = getattr(code_fn, "__code__", None)
    if code is None:
        return
    if code_fn is inspect.getattr_static(type(fn), "__call__", None):  # a callable object
        yield HostRef(("object", "self"), ()), fn
    elif getattr(code_fn, "__self__", None) is not None and not isinstance(
            code_fn.__self__, types.ModuleType):
        yield HostRef(("self", "self"), ()), code_fn.__self__
    scope = getattr(code_fn, "__globals__", {})
    for name in sorted(names):
        if name in scope:
            yield HostRef(("global", name), ()), scope[name]
    for name, cell in zip(code.co_freevars, getattr(code_fn, "__closure__", None) or ()):
        try:
            yield HostRef(("closure", name), ()), cell.cell_contents
        except ValueError:  # an empty cell
            continue


def code_names(fn: Callable) -> frozenset[str]:
    """Every name fn's code (and the code nested in it) loads, globals and attributes, and
    the strings it holds (dict keys: `CFG["w"]`)."""
    names: set[str] = set()
    for code in _codes(fn):
        names.update(code.co_names)
        # a string the code holds may be a key it looks up (`CFG["w"]`): kept as "[w]", so
        # a method name (`opt.step()`) does not name the key STATE["step"]
        names.update(f"[{c}]" for c in code.co_consts if isinstance(c, str))
        if {"items", "values"} & set(code.co_names):  # it may read every entry of a dict
            names.add("[*]")
    return frozenset(names)


def _codes(fn: Callable) -> Iterator[types.CodeType]:
    """fn's code and the code nested in it (comprehensions, inner functions)."""
    stack = [getattr(function_of(fn), "__code__", None)]
    while stack:
        code = stack.pop()
        if code is not None:
            yield code
            stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]


def stored_names(fn: Callable) -> frozenset[str]:
    """The attributes and globals fn's code (and the code nested in it) assigns or deletes
    (`self.calls += 1`, `global STEP; STEP += 1`; globals as "global NAME")."""
    import dis
    stored: set[str] = set()
    for code in _codes(fn):
        ops = [i for i in dis.get_instructions(code) if i.opname not in _NOISE]
        for k, i in enumerate(ops):
            if i.opname in ("STORE_ATTR", "DELETE_ATTR"):
                stored.add(i.argval)
            elif i.opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
                stored.add(f"global {i.argval}")
            # a container it changes (`log.append(...)`, `self.cache[k] = v`): "mutated NAME"
            # for the name it was loaded by (the load just before the method, or before
            # the key)
            # (before a key only when the key is one instruction: `D[k] = v`, not D[len(L)])
            at = k - 1 if i.argval in _MUTATORS and k else \
                k - 2 if i.opname in ("STORE_SUBSCR", "DELETE_SUBSCR") and k > 1 and \
                ops[k - 1].opname.startswith("LOAD_") else -1
            # (not a local: no path ends in one, and a local copy, `ls = list(self.ls)`,
            # changed is not the container)
            name = _loaded(ops, at) if at >= 0 and \
                not ops[at].opname.startswith("LOAD_FAST") else None
            if name:
                # with the name of what holds it, where it is loaded from something
                # (`self.kv`, `STATS["layers"]`): "mutated self>kv", else "mutated LOG"
                parent = at - 2 if ops[at].opname in ("BINARY_SUBSCR", "BINARY_OP") else \
                    at - 1 if ops[at].opname in ("LOAD_ATTR", "LOAD_METHOD") else -1
                holder = _loaded(ops, parent) if parent >= 0 else None
                stored.add(f"mutated {holder}>{name}" if holder else f"mutated {name}")
            # a container it walks or looks in (`for g in LAYERS`, `"wd" in OPT`,
            # `D["bufs"].values()`, `len(T)`): "iterated NAME"
            # (what feeds the walk: the load just before, or every load since a walker
            # function or a slice, `zip(A, B)`, `sorted(A, reverse=True)`, `A[1:]`; more
            # names than walked is only more checks)
            feeds: range = range(0)
            if k and (i.opname in ("GET_ITER", "CONTAINS_OP", "UNPACK_SEQUENCE", "UNPACK_EX")
                      or (i.opname.startswith("LOAD_") and i.argval in _WALKS)):
                feeds = range(k - 1, k)
                if ops[k - 1].opname == "BINARY_SUBSCR" and k > 1 and \
                        ops[k - 2].opname == "BUILD_SLICE":
                    feeds = range(max(0, k - 7), k - 1)
            if i.opname.startswith("CALL"):
                walker = next((j for j in range(k - 1, max(-1, k - 9), -1)
                               if ops[j].argval in _WALKERS and ops[j].opname in _NAMES), None)
                if walker is not None:  # len(T), list(self.layers), zip(A, B)
                    feeds = range(walker + 1, k)
            for j in feeds:
                if _loaded(ops, j):
                    stored.add(f"iterated {_loaded(ops, j)}")
    return frozenset(stored)


def _loaded(ops: list, k: int) -> str | None:
    """The name ops[k] loads a container by: an attribute or variable, or "[key]" for an
    item with a constant key; None for anything else."""
    i = ops[k]
    if i.opname.startswith("LOAD_") and i.opname != "LOAD_CONST" and isinstance(i.argval, str):
        return i.argval
    if i.opname in ("BINARY_SUBSCR", "BINARY_OP") and k and ops[k - 1].opname == "LOAD_CONST" \
            and isinstance(ops[k - 1].argval, str):
        return f"[{ops[k - 1].argval}]"
    return None


_WALKS = frozenset({"items", "values", "keys", "index", "count"})
_WALKERS = frozenset({"len", "list", "tuple", "set", "sorted", "enumerate", "zip", "sum",
                      "min", "max", "any", "all", "dict", "reversed", "iter", "map"})


_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update",
                       "setdefault", "popitem", "__setitem__", "__delitem__"})
_NAMES = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF"})
_NOISE = frozenset({"CACHE", "PRECALL", "PUSH_NULL", "RESUME", "NOP", "EXTENDED_ARG"})


def named(ref: HostRef, names: frozenset[str]) -> bool:
    """Could the code have read the array by this path? Every attribute on it is a name
    the code uses and every string key a string it holds (`model.head`, an alias the code
    never names, is not)."""
    return all(not isinstance(key, str) or f"[{key}]" in names or (how == "." and key in names)
               or (how == "[]" and "[*]" in names) for how, key in ref.steps)


def walked(ref: HostRef, stored: frozenset[str]) -> bool:
    """Does the function walk or look in this path's container (stored_names)?"""
    return f"iterated {_last_name(ref)}" in stored


def changed(ref: HostRef, stored: frozenset[str]) -> bool:
    """Does the function change this path's container itself (stored_names: by its name
    and the name of what holds it)? Its length then follows the traces, not the caller."""
    if not ref.steps:
        return f"mutated {ref.root[1]}" in stored
    if len(ref.steps) == 1:
        holder = ref.root[2] if ref.root[0] == "leaf" else ref.root[1]
    else:
        how, key = ref.steps[-2]
        holder = key if how == "." else f"[{key}]"
    return f"mutated {holder}>{_last_name(ref)}" in stored


def _last_name(ref: HostRef) -> str:
    how, last = ref.steps[-1] if ref.steps else (".", ref.root[1])
    return last if how == "." else f"[{last}]"


def kept(ref: HostRef, stored: frozenset[str]) -> bool:
    """Is this path's value state the function keeps (it assigns it: a counter), not a
    value that picks what it launches? A global it assigns, or an attribute it assigns on
    the object it works on (`self.calls += 1`, an argument's)."""
    if not ref.steps:
        return f"global {ref.root[1]}" in stored
    how, key = ref.steps[0]
    return ref.root[0] in ("self", "object", "leaf") and len(ref.steps) == 1 and how == "." \
        and key in stored


_LEAVES = (str, bytes, int, float, complex, bool, type(None), types.FunctionType,
           types.BuiltinFunctionType, types.MethodType)
# callables that are made anew on every attribute read (a bound method): never a kernel
_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
              types.BuiltinMethodType, types.MethodWrapperType)


def _worth_looking(value: Any) -> bool:
    # NumPy arrays hold no device arrays
    return not isinstance(value, _LEAVES) and not isinstance(value, np.ndarray)


def children(value: Any, names: frozenset[str]) -> Iterator[tuple[tuple[str, Any], Any]]:
    if isinstance(value, types.ModuleType):  # only the names the code uses
        scope = vars(value)
        for name in sorted(names & scope.keys()):
            yield (".", name), scope[name]
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
        return
    if isinstance(value, dict):
        # the keys the code holds first (`CFG["act"]` in a large config), then the others
        first = [n[1:-1] for n in names if n.startswith("[") and n[1:-1] in value]
        for k in first:
            yield ("[]", k), value[k]
        for k, v in itertools.islice(value.items(), _BREADTH):
            if k not in first:
                yield ("[]", k), v
        if type(value) is dict:  # a subclass may give attributes too (CFG.lr of an EasyDict)
            return
    if isinstance(value, (list, tuple, deque)):
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
        if not k.startswith(("__", "[")):
            try:
                child = getattr(value, k)
            except Exception:
                continue
            if not isinstance(child, _FUNCTIONS):  # a kernel the class holds, too
                yield (".", k), child


