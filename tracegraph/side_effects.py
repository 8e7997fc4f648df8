"""Static checks on a traced function's Python bytecode, at trace time.

`side_effects(fn)` finds the obvious Python side effects of a traced function, which run
once, when it is traced, not on every replay: print(), assigning globals or nonlocals,
mutating a list/dict/set/deque defined outside it, setting an attribute of an outside
object, and values taken from the `random`/`time`/`numpy.random` modules (frozen into the
graph). Only the function's own code is scanned, not the functions it calls.
"""
from __future__ import annotations

import builtins
import collections
import dis
import types
import warnings
from collections.abc import Callable
from typing import Any

from .contract.chains import names_of

_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "add",
                       "discard", "update", "setdefault", "popitem", "appendleft",
                       "extendleft", "sort", "reverse"})
_CONTAINERS = (list, dict, set, bytearray, collections.deque)
_FROZEN_VALUE_MODULES = frozenset({"random", "time", "numpy.random", "secrets", "datetime"})
_MISSING = object()


def side_effects(fn: Callable) -> list[tuple[str, int]]:
    """(what, line) for each obvious side effect in `fn`'s own code, in order."""
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    globs = getattr(fn, "__globals__", {})
    cells = {}
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            cells[name] = cell.cell_contents
        except ValueError:  # an empty cell
            pass
    found: list[tuple[str, int]] = []
    kept = read_and_set(code)  # (warned about by the compiled function: api.py)
    line = code.co_firstlineno
    chain: tuple[str, Any] | None = None  # (dotted name, value) of a global/closure chain
    for ins in dis.get_instructions(code):
        # Python 3.13 has line_number (starts_line became a bool); before, starts_line
        lineno = getattr(ins, "line_number", None) if hasattr(ins, "line_number") \
            else ins.starts_line
        if lineno:
            line = lineno
        op, name = ins.opname, ins.argval
        if op in ("LOAD_GLOBAL", "LOAD_NAME"):
            value = globs.get(name, _MISSING)
            if value is _MISSING:
                value = getattr(builtins, name, None)
            chain = (name, value)
            if value is builtins.print:
                found.append(("calls print()", line))
            continue
        if op == "LOAD_DEREF" and name in code.co_freevars:
            chain = (name, cells.get(name))
            continue
        if op in ("LOAD_ATTR", "LOAD_METHOD") and chain is not None:
            dotted, obj = chain
            # (by type: an object's `__class__` may be a property that raises)
            if issubclass(type(obj), _CONTAINERS) and name in _MUTATORS:
                found.append((f"calls {dotted}.{name}(), changing a {type(obj).__name__} "
                              "defined outside the traced function", line))
            elif issubclass(type(obj), types.ModuleType) and \
                    obj.__name__ in _FROZEN_VALUE_MODULES:
                found.append((f"uses {dotted}.{name}: the value it gives at trace time is "
                              "baked into the graph", line))
            try:
                chain = (f"{dotted}.{name}", getattr(obj, name, None))
            except Exception:  # a property that raises: nothing further to see
                chain = None
            continue
        if op == "STORE_ATTR" and chain is not None and f"{chain[0]}.{name}" not in kept:
            found.append((f"sets {chain[0]}.{name}, an attribute of an object defined outside "
                          "the traced function", line))
        elif op == "STORE_GLOBAL" and name not in kept:
            found.append((f"assigns the global {name}", line))
        elif op == "STORE_DEREF" and name in code.co_freevars and name not in kept:
            found.append((f"assigns the nonlocal {name}", line))
        chain = None
    return found


def read_and_set(code: types.CodeType) -> frozenset[str]:
    """The chains the code both reads and sets (`STEP += 1`, `self.t = self.t + 1`)."""
    names = names_of(code, code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    return frozenset(c.describe() for c in names.loaded if any(
        s.root == c.root and s.name == c.name and c.attributes[:len(s.attributes)] ==
        s.attributes for s in names.stored))


def side_effect_message(fn_name: str, what: str) -> str:
    return (f"the traced function {fn_name} {what}: Python side effects run once, when the "
            "function is traced, not on every call or replay of the graph. Move them out of "
            "the traced function, pass changing values as arguments, or use tg.callback(fn) "
            "for host work on every replay")


def warn_side_effects(fn: Callable, fn_name: str) -> None:
    """A UserWarning at the line of each obvious side effect of `fn` (see side_effects)."""
    found = side_effects(fn)
    if not found:
        return
    code = getattr(fn, "__func__", fn).__code__
    module = getattr(fn, "__module__", None) or "tracegraph"
    for what, line in found:
        warnings.warn_explicit(side_effect_message(fn_name, what), UserWarning,
                               code.co_filename, line, module=module)
