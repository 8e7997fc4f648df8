"""Where in the user's code something happened: the innermost frame outside tracegraph,
Numba and NumPy."""
from __future__ import annotations

import inspect
import os
import sys
import warnings
from types import FrameType
from typing import Any

import numba
import numba.cuda
import numpy

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# NumPy too: np.sum(traced) fails inside NumPy, but the user's line is the one that called it
_NUMBA_DIRS = tuple(os.path.dirname(os.path.abspath(str(m.__file__))) + os.sep
                    for m in (numba, numba.cuda, numpy))


def user_location(depth: int = 1) -> str:
    """file:line of the innermost frame outside tracegraph, Numba and NumPy."""
    frame = user_frame(depth + 1)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"


def user_frame(depth: int = 1) -> FrameType | None:
    """The innermost frame outside tracegraph, Numba and NumPy (None: there is none)."""
    frame: FrameType | None = sys._getframe(depth)
    while frame is not None:
        name = frame.f_code.co_filename
        internal = _internal.get(name)
        if internal is None:  # once per file: a trace asks at every launch
            filename = os.path.abspath(name)
            internal = _internal[name] = filename.startswith(_PACKAGE_DIR) or \
                filename.startswith(_NUMBA_DIRS) or filename.startswith("<frozen")
        if not internal:
            return frame
        frame = frame.f_back
    return None


def definition_location(fn: Any) -> str:
    """Where the traced function is defined: a partial's function, a wrapper's wrapped
    one, a callable object's __call__ (its class's line when that is not Python)."""
    target: Any = fn
    for _ in range(8):
        code = getattr(target, "__code__", None)
        if code is not None:
            return f"{code.co_filename}:{code.co_firstlineno}"
        inner = getattr(target, "func", None) or getattr(target, "__wrapped__", None) or \
            getattr(target, "__func__", None)
        if inner is None and not isinstance(target, type):
            inner = inspect.getattr_static(type(target), "__call__", None)
        if inner is None or inner is target:
            break
        target = inner
    try:
        return f"{inspect.getsourcefile(type(fn))}:{inspect.getsourcelines(type(fn))[1]}"
    except (TypeError, OSError):
        return user_location(3)


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """Warn at the user's line (user_frame), as warnings.warn does at a stack level: that
    frame's module registry, so the usual filters ("default": once per line) apply."""
    frame = user_frame(2)
    if frame is None:
        warnings.warn(message, category, stacklevel=2)
        return
    scope = frame.f_globals
    warnings.warn_explicit(message, category, frame.f_code.co_filename, frame.f_lineno,
                           module=scope.get("__name__", "<string>"),
                           registry=scope.setdefault("__warningregistry__", {}),
                           module_globals=scope)


_internal: dict[str, bool] = {}  # a code object's file name -> inside tracegraph/Numba/NumPy
