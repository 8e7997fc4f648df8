"""A check of the Python-state contract: one tuple, made by Contract.fast_checks (state.py)
and read the same way by the Python path (`holds`) and by the C direct replay
(backends/cuda/_graphlaunch.c):

    (root + 10 * compare, a, b, attributes, expected)

root 0: dict `a` at key `b` (the function's globals); 1: closure cell `a`; 2: object `a`
(a bound method's instance, a partial's argument); 3: positional argument `b` of the call;
4: `a()` (key=). compare 0: the very object `expected` (a bound method: the same instance
and function); 1: the very array, with the shape, strides and dtype in `expected`; 2:
equal to `expected` (key=); 3: the path finds nothing (a global not set)."""
from __future__ import annotations

import types
from typing import Any

IDENTITY, LAYOUT, EQUAL, ABSENT = 0, 1, 2, 3
GLOBALS, CELL, OBJECT, ARGUMENT, CALL = 0, 1, 2, 3, 4
MISSING = object()  # what a path finds when it finds nothing


def holds(checks: tuple, args: tuple) -> bool:
    """Every check finds what it expects (the Python twin of the C helper's check_holds)."""
    for check in checks:
        compare = check[0] // 10
        now = walk(check, args)
        if compare == ABSENT:
            if now is not MISSING:
                return False
        elif now is MISSING:
            return False
        elif compare == EQUAL:
            try:
                if not now == check[4]:
                    return False
            except Exception:
                return False
        elif compare == LAYOUT:
            expected = check[4]
            if now is not expected[0] or (getattr(now, "shape", None), getattr(
                    now, "strides", None), getattr(now, "dtype", None)) != expected[1:]:
                return False
        elif now is not check[4] and not _same_method(now, check[4]):
            return False
    return True


def walk(check: tuple, args: tuple) -> Any:
    """What the check's path finds now (MISSING: nothing, or an error on the way)."""
    root = check[0] % 10
    a, b = check[1], check[2]
    try:
        now = a[b] if root == GLOBALS else a.cell_contents if root == CELL else \
            a if root == OBJECT else args[b] if root == ARGUMENT else a()
        for name in check[3]:
            now = getattr(now, name)
    except Exception:
        return MISSING
    return now


def _same_method(a: Any, b: Any) -> bool:
    """Two reads of one method: a new bound-method object each time, the same instance and
    function (what `==` says of methods)."""
    return type(a) is type(b) and isinstance(a, (types.MethodType, types.BuiltinMethodType)) \
        and a.__self__ is b.__self__ and a == b
