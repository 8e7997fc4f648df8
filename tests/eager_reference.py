"""A traced function against eager Numba when the function changes global state: the
graph gives eager's answer, or the trace is refused."""
from __future__ import annotations

import copy

import numpy as np

import tracegraph as tg


def eager_or_refused(fn, backend, reset, *args):
    """The graph's result equals the eager one, or the trace is a TraceError; `reset`
    puts back the state the function changes before each run (the eager run changes it
    too, so without it the trace would start from the changed state)."""
    reset()
    want = fn(*copy.deepcopy(args))
    reset()
    try:
        got = tg.compile(fn, backend=backend)(*copy.deepcopy(args))
    except tg.TraceError:
        return
    np.testing.assert_array_equal(np.asarray(got), want)
