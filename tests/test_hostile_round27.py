"""Hostile round 27 (methods and scalars): methods reached through a class (classmethods,
staticmethods, functions), an enum member's methods, a classmethod reached through
super(), a class redefined and named by its global, methods run by syntax (`m(x)`,
`with`, `@`), mocks patched in one after another, an object whose `__class__` is a
property, and weights made lazily while tracing."""
from __future__ import annotations

import enum
import functools
from unittest import mock

import numpy as np
import pytest
from eager import against_eager
from numba import cuda
from small_kernels import add_to, axpy

import tracegraph as tg
from tracegraph.errors import TraceError

N = 8


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

    def plain(x):  # noqa: N805 - a function held by a class, called through it
        add_to[1, 32](x, 3.0)


def _run2(cls, x):
    axpy[1, 32](x, W, -1.0)


def _srun2(x):
    add_to[1, 32](x, -5.0)


def _plain2(x):
    add_to[1, 32](x, 7.0)


def test_methods_reached_through_a_class_are_followed_when_rebound(
        backend, fixed_device_arrays):
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


ACT = Act.UP


def test_an_enum_member_s_method_is_followed_when_rebound(backend, fixed_device_arrays):
    original = Act.launch

    def launch2(self, x):
        add_to[1, 32](x, -10.0 * self.value)

    def step(x):
        ACT.launch(x)
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


def test_a_base_classmethod_reached_through_super_is_followed_when_rebound(
        backend, fixed_device_arrays):
    original = vars(CBase)["run"]

    def run2(cls, x):
        add_to[1, 32](x, -4.0)
    m = CChild()

    def step(x):
        m.run(x)
        CChild.run(x)
    try:
        against_eager(step, backend, [("rebound", _set(CBase, "run", classmethod(run2))),
                               ("restored", _set(CBase, "run", original))])
    finally:
        CBase.run = original


def _make_base(a):
    class Base:
        def forward(self, x):
            add_to[1, 32](x, a)
    return Base


Base = _make_base(1.0)


class Derived(Base):  # keeps the first Base when a cell defines Base again
    def forward(self, x):
        Base.forward(self, x)  # the class by its global name, found anew eagerly


def test_a_base_class_named_by_its_global_and_defined_again_is_followed(
        backend, fixed_device_arrays):
    global Base
    first = Base
    m = Derived()

    def step(x):
        m.forward(x)

    def define_again():
        global Base
        Base = _make_base(-6.0)
    try:
        against_eager(step, backend, [("defined again", define_again)])
    finally:
        Base = first


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


@pytest.mark.parametrize("dunder", ["__call__", "__exit__", "__matmul__"])
def test_methods_run_by_syntax_are_followed_when_rebound(backend, fixed_device_arrays, dunder):
    op = Op()
    original = vars(Op)[dunder]

    def step(x):
        op(x)
        op.x = x
        with op:
            add_to[1, 32](x, 0.25)
        op.x = None
        op @ x

    def other(self, *args):
        add_to[1, 32](args[0] if args and args[0] is not None and dunder != "__exit__"
                      else self.x, -100.0)
        return args[0] if args else None
    try:
        against_eager(step, backend, [("rebound", _set(Op, dunder, other))])
    finally:
        setattr(Op, dunder, original)


class Layer:
    def __init__(self):
        self.W = cuda.to_device(np.full(N, 2.0))

    def forward(self, x):
        axpy[1, 32](x, self.W, 1.0)


def test_mocks_patched_in_one_after_another_are_each_followed(backend, fixed_device_arrays):
    m = Layer()

    def ablate(v):
        return lambda x: add_to[1, 32](x, v)

    def step(x):
        m.forward(x)
    against_eager(step, backend, [
        ("mock a", mock.patch.object(Layer, "forward", mock.Mock(side_effect=ablate(100.0)))),
        ("mock b", mock.patch.object(Layer, "forward", mock.Mock(side_effect=ablate(-100.0)))),
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
        backend, fixed_device_arrays):
    m = Pretends()

    def step(x):
        m.forward(x)
    f = against_eager(step, backend, [], calls=6)
    assert f.cache_info().graphs == 1 and sum(f.cache_info().misses.values()) == 1


class Lazy:
    def __init__(self):
        self._W = None

    @property
    def W(self):
        if self._W is None:  # made on first use: while the first call traces
            self._W = cuda.to_device(np.full(N, 2.0))
        return self._W

    @functools.cached_property
    def V(self):
        return cuda.to_device(np.full(N, 3.0))


@pytest.mark.parametrize("name", ["W", "V"])
def test_weights_made_lazily_while_tracing_are_said_then_a_clear_error(backend, name):
    m = Lazy()

    def step(x):
        axpy[1, 32](x, getattr(m, name), 1.0)
    f = tg.compile(step, backend=backend)
    x = cuda.to_device(np.ones(N))
    with pytest.warns(UserWarning, match="keeps an array it made while tracing in m"):
        f(x)
    np.testing.assert_allclose(x.copy_to_host(), np.full(N, 3.0 if name == "W" else 4.0))
    f.clear()
    with pytest.raises(TraceError, match="made lazily while the first call traced"):
        f(x)  # traced again: the stand-in kept there is not a device array
    m = Lazy()
    x, xe = cuda.to_device(np.ones(N)), cuda.to_device(np.ones(N))
    step(xe)  # made eagerly first: then the function only reads them
    f = tg.compile(step, backend=backend)
    f(x)
    step(xe)
    f(x)
    np.testing.assert_allclose(x.copy_to_host(), xe.copy_to_host())
