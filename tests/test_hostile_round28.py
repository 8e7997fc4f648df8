"""Hostile round 28 (regressions of the broader method checks; all older than them): an
@njit helper compiled while tracing, a class made by exec without a module name, a
__getattribute__ wrapping methods on every read, and a __class__ property that raises."""
from __future__ import annotations

import functools
import warnings

import numba
import numpy as np
from eager import against_eager
from numba import cuda
from small_kernels import add_to, axpy

N = 8


W = cuda.to_device(np.full(N, 2.0))


def test_an_njit_helper_compiled_while_tracing_is_not_the_function_s_code(
        backend, fixed_device_arrays):
    # Numba's compiler runs other packages' Python (typing hooks): none of it is the
    # traced function's, so none of its state is searched or checked on later calls
    @numba.njit
    def coef(a):
        return a * 2.0 + 1.0

    def step(x):
        add_to[1, 32](x, coef(1.5))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        f = against_eager(step, backend, [], calls=3)
    assert sum(f.cache_info().misses.values()) == 1


def test_a_class_made_by_exec_without_a_module_name_is_followed_when_rebound(
        backend, fixed_device_arrays):
    ns = {"add_to": add_to}
    exec("class Gen:\n    def run(self, x):\n        add_to[1, 32](x, 2.0)\n", ns)  # noqa: S102
    gen = ns["Gen"]()

    def step(x):
        gen.run(x)

    def rebind():
        ns["Gen"].run = lambda self, x: add_to[1, 32](x, 50.0)
    against_eager(step, backend, [("rebound", rebind)])


class Instrumented:
    def __getattribute__(self, k):  # a profiler's: a new wrapper on every read
        v = object.__getattribute__(self, k)
        if callable(v) and not k.startswith("_"):
            @functools.wraps(v)
            def wrapped(*a, **kw):
                return v(*a, **kw)
            return wrapped
        return v

    def run(self, x):
        axpy[1, 32](x, W, 1.0)


def test_methods_wrapped_anew_on_every_read_do_not_trace_every_call(
        backend, fixed_device_arrays):
    m = Instrumented()

    def step(x):
        m.run(x)
    f = against_eager(step, backend, [], calls=6)
    assert sum(f.cache_info().misses.values()) == 1


class Weird:
    @property
    def __class__(self):
        raise RuntimeError("no class")

    def go(self, x):
        add_to[1, 32](x, 2.0)


def test_an_object_whose_class_property_raises_traces(backend, fixed_device_arrays):
    w = Weird()

    def step(x):
        w.go(x)
    f = against_eager(step, backend, [], calls=3)
    assert sum(f.cache_info().misses.values()) == 1
