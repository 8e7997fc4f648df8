"""Shared memory of a simulated block: one array for all its threads (Numba's simulator
can hand two threads of a block different arrays)."""
from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import numpy as np


def shared_array(self: Any, shape: Any, dtype: Any, alignment: Any = None) -> np.ndarray:
    """`cuda.shared.array` of one simulated block, where all its threads get one array.

    Numba's (FakeCUDAShared.array) looks the allocation up and stores a new one in two
    steps, so two threads of a block that reach it at once can each get their own array:
    a block whose threads no longer share memory (seen as wrong matmul tiles and layer
    norms about one run in two of examples/decode_step.py). Here one atomic setdefault
    decides which array they all get."""
    from numba.core import types as numba_types
    from numba.np import numpy_support
    if alignment is not None or shape == 0:
        return _numba_shared_array()(self, shape, dtype, alignment)
    if isinstance(dtype, numba_types.Type):
        dtype = numpy_support.as_dtype(dtype)
    caller = sys._getframe(1)  # allocations are keyed by the line that asks, as Numba's
    key = (caller.f_code.co_filename, caller.f_lineno)
    found = self._allocations.get(key)
    if found is None:
        found = self._allocations.setdefault(key, np.empty(shape, dtype))
    return found


@functools.cache
def _numba_shared_array() -> Callable:
    from numba.cuda.simulator.kernelapi import FakeCUDAShared
    return FakeCUDAShared.array


def fix_eager_shared_arrays() -> None:
    """Make Numba's own simulator launches (eager references in tests and examples)
    allocate shared arrays atomically too."""
    from numba.cuda.simulator.kernelapi import FakeCUDAShared
    _numba_shared_array()
    FakeCUDAShared.array = shared_array
