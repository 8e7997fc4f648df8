"""Functions, methods and classes the traced code calls or holds, replaced between calls:
a helper function (a global, a dict entry, lru_cache-wrapped, a builtin, an operator, a
ufunc, a bound builtin method), a method (on the class, on the instance, through a
subclass or `__class__`, under another name, through super(), a classmethod,
staticmethod, an enum member's, run by syntax: `m(x)`, `with`, `@`), mocks patched one
after another, a class defined again or made by exec. Each compared with eager Numba;
objects whose class is a property, or methods wrapped anew on every read, do not trace on
every call."""
from __future__ import annotations

import enum
import functools
import operator
from unittest import mock

import numpy as np
import pytest
from eager import against_eager
from numba import cuda
from small_kernels import add_to, axpy, iscale


def _ones():
    return cuda.to_device(np.ones(4))


def _by2(x):
    iscale[1, 32](x, 2.0)


def _by3(x):
    iscale[1, 32](x, 3.0)


ACT = _by2


ACTS = {"a": _by2}


class Layer:
    def __init__(self):
        self.gain = 2.0

    def forward(self, x):
        iscale[1, 32](x, self.gain)


class Damped(Layer):
    def forward(self, x):
        iscale[1, 32](x, self.gain * 0.5)


N = 8


class WeightedLayer:
    def __init__(self, k):
        self.W = cuda.to_device(np.full(N, 1.0 + k / 8))
        self.a = 0.25 + k

    def forward(self, x):
        axpy[1, 32](x, self.W, self.a)


def _zero_forward(self, x):  # an ablation
    add_to[1, 32](x, 0.0)


def _plus(self, x):
    axpy[1, 32](x, self.W, 1.0)


def _minus(self, x):
    axpy[1, 32](x, self.W, -1.0)


class Aliased:
    forward = _plus  # a method under another name than its function's

    def __init__(self):
        self.W = cuda.to_device(np.full(N, 2.0))


def test_a_method_held_under_another_name_is_followed_when_rebound(
        backend):
    m = Aliased()

    def step(x):
        m.forward(x)

    def rebind(fn):
        def change():
            Aliased.forward = fn
        return change
    try:
        against_eager(step, backend, [("minus", rebind(_minus)), ("plus", rebind(_plus))])
    finally:
        Aliased.forward = _plus


class Base:
    def __init__(self):
        self.W = cuda.to_device(np.full(N, 2.0))

    def forward(self, x):
        axpy[1, 32](x, self.W, 1.0)


class Child(Base):
    def forward(self, x):
        super().forward(x)
        add_to[1, 32](x, 0.5)


def forward(self, x):  # the same name as the method it replaces
    axpy[1, 32](x, self.W, -3.0)


def _set(owner, name, value):
    return lambda: setattr(owner, name, value)


W = cuda.to_device(np.full(N, 2.0))


class K:
    @classmethod
    def run(cls, x):
        axpy[1, 32](x, W, 1.0)

    @staticmethod
    def srun(x):
        add_to[1, 32](x, 2.0)

    def plain(x):
        add_to[1, 32](x, 3.0)


def _run2(cls, x):
    axpy[1, 32](x, W, -1.0)


def _srun2(x):
    add_to[1, 32](x, -5.0)


def _plain2(x):
    add_to[1, 32](x, 7.0)


def test_methods_reached_through_a_class_are_followed_when_rebound(
        backend):
    saved = dict(vars(K))

    def step(x):
        K.run(x)
        K.srun(x)
        K.plain(x)
    try:
        against_eager(step, backend, [("classmethod", _set(K, "run", classmethod(_run2))),
                               ("staticmethod", _set(K, "srun", staticmethod(_srun2))),
                               ("function", _set(K, "plain", _plain2))])
    finally:
        for name in ("run", "srun", "plain"):
            setattr(K, name, saved[name])


class Act(enum.Enum):
    UP = 1
    DOWN = 2

    def launch(self, x):
        add_to[1, 32](x, float(self.value))


ACT_MEMBER = Act.UP


def test_an_enum_member_s_method_is_followed_when_rebound(backend):
    original = Act.launch

    def launch2(self, x):
        add_to[1, 32](x, -10.0 * self.value)

    def step(x):
        ACT_MEMBER.launch(x)
    try:
        against_eager(step, backend, [("rebound", _set(Act, "launch", launch2))])
    finally:
        Act.launch = original


class CBase:
    @classmethod
    def run(cls, x):
        add_to[1, 32](x, 1.0)


class CChild(CBase):
    @classmethod
    def run(cls, x):
        super().run(x)
        add_to[1, 32](x, 0.5)


def _make_base(a):
    class RedefinedBase:
        def forward(self, x):
            add_to[1, 32](x, a)
    return RedefinedBase


RedefinedBase = _make_base(1.0)


class Derived(RedefinedBase):  # keeps the first Base when a cell defines Base again
    def forward(self, x):
        RedefinedBase.forward(self, x)  # the class by its global name, found anew eagerly


class Op:
    def __init__(self):
        self.W = cuda.to_device(np.full(N, 2.0))
        self.x = None

    def __call__(self, x):
        axpy[1, 32](x, self.W, 1.0)

    def __enter__(self):
        add_to[1, 32](self.x, 1.0)
        return self

    def __exit__(self, *exc):
        add_to[1, 32](self.x, 3.0)

    def __matmul__(self, x):
        axpy[1, 32](x, self.W, 0.5)
        return x


class MockedLayer:
    def __init__(self):
        self.W = cuda.to_device(np.full(N, 2.0))

    def forward(self, x):
        axpy[1, 32](x, self.W, 1.0)


def test_mocks_patched_in_one_after_another_are_each_followed(backend):
    m = MockedLayer()

    def ablate(v):
        return lambda x: add_to[1, 32](x, v)

    def step(x):
        m.forward(x)
    against_eager(step, backend, [
        ("mock a", mock.patch.object(MockedLayer, "forward", mock.Mock(side_effect=ablate(100.0)))),
        ("mock b", mock.patch.object(MockedLayer, "forward",
                                     mock.Mock(side_effect=ablate(-100.0)))),
        ("restored", lambda: None),
        ("on the instance", mock.patch.object(m, "forward", side_effect=ablate(7.0))),
        ("another on the instance", mock.patch.object(m, "forward",
                                                      side_effect=ablate(-7.0)))])


class PBase:
    def __init__(self):
        self.W = cuda.to_device(np.full(N, 2.0))

    def forward(self, x):
        axpy[1, 32](x, self.W, 1.0)


class Pretends(PBase):
    @property
    def __class__(self):  # a proxy pretending to be its base
        return PBase

    def forward(self, x):
        super().forward(x)
        add_to[1, 32](x, 0.5)


def test_an_object_whose_class_is_a_property_does_not_trace_every_call(
        backend):
    m = Pretends()

    def step(x):
        m.forward(x)
    f = against_eager(step, backend, [], calls=6)
    assert f.cache_info().graphs == 1 and sum(f.cache_info().misses.values()) == 1


def test_a_class_made_by_exec_without_a_module_name_is_followed_when_rebound(
        backend):
    ns = {"add_to": add_to}
    exec("class Gen:\n    def run(self, x):\n        add_to[1, 32](x, 2.0)\n", ns)
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


class Weird:
    @property
    def __class__(self):
        raise RuntimeError("no class")

    def go(self, x):
        add_to[1, 32](x, 2.0)


@pytest.mark.parametrize("first, then", [(operator.add, operator.mul), (max, min),
                                         (np.add, np.multiply)],
                         ids=["operator", "builtin", "ufunc"])
def test_a_builtin_function_held_as_an_attribute_is_seen_rebound(backend, first, then):
    # not a FunctionType that ran: guarded by type only (all builtins share one)
    class Model:
        pass
    m = Model()
    m.combine = first

    def step(x):
        add_to[1, 32](x, float(m.combine(2.0, 3.0)))
    against_eager(step, backend, [("rebound", lambda: setattr(m, "combine", then))])


def test_an_lru_cache_wrapped_function_rebound_is_seen(backend):
    # functools.lru_cache wraps with functools.update_wrapper (a __wrapped__), yet the
    # wrapper is only TypeGuarded: another lru_cache'd function passes
    @functools.lru_cache(None)
    def two():
        return 2.0

    @functools.lru_cache(None)
    def five():
        return 5.0

    class Model:
        pass
    m = Model()
    m.scale = two

    def step(x):
        add_to[1, 32](x, m.scale())
    against_eager(step, backend, [("rebound", lambda: setattr(m, "scale", five))])


def test_a_bound_builtin_method_rebound_is_seen(backend):
    # `self.lookup = TABLE.get`: a builtin_function_or_method bound to a dict; another
    # dict's .get has the same type, and its __self__ is never looked at
    first, then = {"s": 2.0}, {"s": 5.0}

    class Model:
        pass
    m = Model()
    m.lookup = first.get

    def step(x):
        add_to[1, 32](x, m.lookup("s"))
    against_eager(step, backend, [("rebound", lambda: setattr(m, "lookup", then.get))])
