"""Hostile round 35 (against fe5f0a5; baselines 2195532 and ea7815a).

REGRESSIONS (needless retracing) from fe5f0a5:
  1. A traced bound method (or callable object) whose body defines a nested helper or
     lambda that reads its OWN first parameter whole (`def show(c): return vars(c)`,
     `lambda o: vars(o)`) makes the traced method's own object read whole: codes_of(fn)
     includes the nested code, its "{@}" marker is attributed to `bound` (names.names_used),
     so a host counter on the model retraces every call (misses 5; 1 at ea7815a and
     2195532).
INCOMPLETE FIX of round 34 item 1:
  2. A callee method that reads `vars(self)` while `self` is also captured by a closure
     (`get = lambda k: getattr(self, k)`) loads `self` with LOAD_DEREF, so the "@" (only
     the objects it ran on) form is not used and "{self}" goes back into the names: the
     traced model's own counter retraces every call (misses 5; 1 at 2195532).
Both fixed: a nested function's first parameter is not the object the code runs on, and a
first parameter held in a cell counts as the code's own.
"""
from __future__ import annotations

import numpy as np
from numba import cuda
from small_kernels import axpb
from trace_counts import misses

import tracegraph as tg


class _Opt:
    def __init__(self, lr):
        self.lr = lr


# ------------------------------ (1) nested helper of the traced method reads its param
class _ModelNested:
    def __init__(self):
        self.opt = _Opt(0.1)
        self.it = 0          # host-side step counter, never read by step()

    def step(self, x):
        def show(c):
            return vars(c)
        axpb[1, 8](x, 1.0, show(self.opt)["lr"])


def test_nested_helper_reading_its_param_whole_does_not_read_the_model_whole(backend):
    m = _ModelNested()
    f = tg.compile(m.step, backend=backend)
    x = cuda.to_device(np.ones(8))
    for _ in range(5):
        f(x)
        m.it += 1
    assert misses(f) == 1   # fe5f0a5: 5 (ea7815a, 2195532: 1)


def test_nested_helper_still_follows_the_param(backend):
    m = _ModelNested()
    f = tg.compile(m.step, backend=backend)
    x = cuda.to_device(np.ones(8))
    f(x)
    m.opt.lr = 0.7
    y = cuda.to_device(np.ones(8))
    f(y)
    np.testing.assert_allclose(y.copy_to_host(), np.full(8, 1.7))


class _NetCallable:
    def __init__(self):
        self.opt = _Opt(0.1)
        self.it = 0

    def __call__(self, x):
        unpack = lambda o: vars(o)  # noqa: E731
        axpb[1, 8](x, 1.0, unpack(self.opt)["lr"])


def test_callable_object_with_a_lambda_reading_its_param_whole(backend):
    n = _NetCallable()
    f = tg.compile(n, backend=backend)
    x = cuda.to_device(np.ones(8))
    for _ in range(5):
        f(x)
        n.it += 1
    assert misses(f) == 1   # fe5f0a5: 5 (ea7815a, 2195532: 1)


# ------------------------------ (2) vars(self) with self captured by a closure
class _OptClosure:
    def __init__(self, lr):
        self.lr = lr

    def hp(self):
        get = lambda k: getattr(self, k)  # noqa: E731,F841  (self becomes a cell)
        return vars(self)


class _ModelClosure:
    def __init__(self):
        self.opt = _OptClosure(0.1)
        self.it = 0

    def step(self, x):
        axpb[1, 8](x, 1.0, self.opt.hp()["lr"])


def test_vars_self_with_self_in_a_closure_does_not_read_the_model_whole(backend):
    m = _ModelClosure()
    f = tg.compile(m.step, backend=backend)
    x = cuda.to_device(np.ones(8))
    for _ in range(5):
        f(x)
        m.it += 1
    assert misses(f) == 1   # fe5f0a5 and ea7815a: 5 (2195532: 1)
