"""Whether the order of a call's keyword arguments can matter to the function: named
keyword parameters never; `**kwargs` only where the function does more with that dict
than read it by name (`kw["a"]`, `kw.get("a")`, `kw.get("a", default)`, `"a" in kw`):
iterating it, passing it on or keeping it sees the caller's order. Read from the
function's bytecode; anything else it does with the dict counts as depending on the
order."""
from __future__ import annotations

import dis
import inspect
from typing import Any

_LOADS = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK"})
_SIMPLE = frozenset({"LOAD_CONST", "LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_GLOBAL",
                     "LOAD_DEREF", "LOAD_NAME", "LOAD_SMALL_INT"})
_CALLS = frozenset({"CALL", "PRECALL"})


def keyword_order_matters(fn: Any) -> bool:
    """Can the order of the keywords collected by fn's **kwargs change what it does?"""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:  # a callable object, a partial, a builtin: not known
        return True
    if not code.co_flags & inspect.CO_VARKEYWORDS:
        return False  # only named keyword parameters, bound by name
    at = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARARGS)
    name = code.co_varnames[at]
    if name in code.co_cellvars:  # a nested function uses it: not followed
        return True
    ops = list(dis.get_instructions(code))
    for i, op in enumerate(ops):
        names = op.argval if isinstance(op.argval, tuple) else (op.argval,)
        if not (op.opname.startswith(("LOAD_FAST", "STORE_FAST", "DELETE_FAST")) and
                name in names):
            continue
        if op.opname not in _LOADS or not (
                _subscripted(ops, i) or _got(ops, i) or _tested(ops, i)):
            return True
    return False


def _const_str(op: Any) -> bool:
    return op.opname == "LOAD_CONST" and isinstance(op.argval, str)


def _subscripted(ops: list, i: int) -> bool:
    """kw["a"]"""
    return i + 2 < len(ops) and _const_str(ops[i + 1]) and (
        ops[i + 2].opname == "BINARY_SUBSCR" or
        (ops[i + 2].opname == "BINARY_OP" and ops[i + 2].argrepr == "[]"))


def _got(ops: list, i: int) -> bool:
    """kw.get("a") or kw.get("a", default) with a default that is a name or a constant."""
    if not (i + 3 < len(ops) and ops[i + 1].opname in ("LOAD_METHOD", "LOAD_ATTR") and
            ops[i + 1].argval == "get" and _const_str(ops[i + 2])):
        return False
    j = i + 3
    if ops[j].opname in _SIMPLE and j + 1 < len(ops) and ops[j + 1].opname in _CALLS:
        return ops[j + 1].arg == 2
    return ops[j].opname in _CALLS and ops[j].arg == 1


def _tested(ops: list, i: int) -> bool:
    """"a" in kw, "a" not in kw"""
    return i >= 1 and i + 1 < len(ops) and _const_str(ops[i - 1]) and \
        ops[i + 1].opname == "CONTAINS_OP"
