"""Where in the user's code something happened: the innermost frame outside tracegraph,
Numba and NumPy."""
from __future__ import annotations

import os
import sys
from types import FrameType

import numba
import numba.cuda
import numpy

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# NumPy too: np.sum(traced) fails inside NumPy, but the user's line is the one that called it
_NUMBA_DIRS = tuple(os.path.dirname(os.path.abspath(str(m.__file__))) + os.sep
                    for m in (numba, numba.cuda, numpy))


def user_location(depth: int = 1) -> str:
    """file:line of the innermost frame outside tracegraph, Numba and NumPy."""
    frame: FrameType | None = sys._getframe(depth)
    while frame is not None:
        name = frame.f_code.co_filename
        internal = _internal.get(name)
        if internal is None:  # once per file: a trace asks at every launch
            filename = os.path.abspath(name)
            internal = _internal[name] = filename.startswith(_PACKAGE_DIR) or \
                filename.startswith(_NUMBA_DIRS) or filename.startswith("<frozen")
        if not internal:
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


_internal: dict[str, bool] = {}  # a code object's file name -> inside tracegraph/Numba/NumPy
