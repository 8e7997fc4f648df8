"""tg.visualize names buffers by what the user called them: arguments by their path,
graph-owned arrays by name= (tg.empty, tg.zeros, *_like), else by the result they are,
else by the kernel and parameter that first write them (`scale.out`, `tg.ops.add.out`,
a count where two share a name); captured arrays by the name a kernel found them by.
Never `temp4`."""
from __future__ import annotations

import re

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg
from small_kernels import add, scale

N = 16
WEIGHTS = cuda.to_device(np.ones(N))


@cuda.jit
def add_weights(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + WEIGHTS[i]


def _names(program) -> set[str]:
    return {b.name for b in program.buffers}


def test_buffers_are_named_by_arguments_writers_results_and_name():
    @tg.compile(backend="sim")
    def step(x, y):
        u, v = tg.empty_like(x), tg.empty_like(y)
        scale[1, N](x, 2.0, u)
        scale[1, N](y, 3.0, v)
        total = tg.empty_like(x, name="total")
        add[1, N](u, v, total)
        w = tg.ops.add(total, total)
        out = tg.empty_like(x)
        add_weights[1, N](w, out)
        return out

    x, y = cuda.to_device(np.ones(N)), cuda.to_device(np.ones(N))
    program = step.trace(x, y)
    names = _names(program)
    assert {"x", "y", "scale.out", "scale.out (2)", "total", "tg.ops.add.out", "result",
            "WEIGHTS"} <= names, names
    assert not any(re.fullmatch(r"(temp|captured)\d+", n) for n in names), names
    dot = tg.visualize(program)
    assert "writes scale.out" in dot and "reads WEIGHTS, tg.ops.add.out" in dot
    assert "writes total" in dot and "writes result" in dot


def test_zeros_and_a_result_copied_to_the_host_keep_the_user_s_names():
    @tg.compile(backend="sim")
    def step(x):
        acc = tg.zeros(N, name="acc")
        add[1, N](x, x, acc)
        return acc

    names = _names(step.trace(np.ones(N)))
    assert {"x", "acc", "result"} <= names, names  # result: the host copy of acc


def test_a_name_that_is_no_string_is_refused():
    @tg.compile(backend="sim")
    def step(x):
        out = tg.empty(N, name=3)
        scale[1, N](x, 2.0, out)
        return out

    with pytest.raises(tg.TraceError, match="name= is a string, got int"):
        step.trace(np.ones(N))
