"""Kernels, values and host arrays a class holds, read through the class (`type(self).k`,
`self.__class__.W`, `vars(cls)`, `type(self).__dict__`, the MRO, super(), a metaclass
__getattr__, a class attribute namedtuple), rebound on the class: the next call runs what
eager runs. On a GPU a kernel a class holds binds to an instance
(CUDADispatcher.__get__), so `self.k` is a bound method, not the kernel (the simulator's
kernels do the same here: conftest.py); an instance attribute of the same name hides the
class's from `self.k` altogether."""
from __future__ import annotations

import typing

import numpy as np
import pytest
from eager import against_eager
from numba import cuda
from small_kernels import add_to, mul_by

import tracegraph as tg

N = 4


@cuda.jit
def _times_two(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = 2 * x[i]


@cuda.jit
def _negate(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = -x[i]


@cuda.jit
def _mul(x, w, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] * w[i]


def _blocks():
    class Plain:
        act = _times_two
        W = np.full(N, 3.0)

        def step(self, x, out):
            type(self).act[1, 32](x, out)

        def scale(self, x, out):
            _mul[1, 32](x, cuda.to_device(self.__class__.W), out)

    class Hiding(Plain):
        def __init__(self):  # instance attributes of the same names hide the class's
            self.act = _negate
            self.W = np.ones(N)
    return Plain, Hiding


@pytest.mark.parametrize("kind", ["plain", "hidden by the instance"])
def test_class_attributes_read_through_the_instance_s_class_follow_rebinding(backend, kind):
    Plain, Hiding = _blocks()
    blk = Plain() if kind == "plain" else Hiding()
    x, out = cuda.to_device(np.arange(float(N))), cuda.device_array(N)
    ar = np.arange(float(N))
    f = tg.compile(blk.step, backend=backend)
    g = tg.compile(blk.scale, backend=backend)
    for _ in range(2):
        f(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), 2 * ar)
        g(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), 3 * ar)
    Plain.act, Plain.W = _negate, np.full(N, 5.0)
    for _ in range(2):
        f(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), -ar)
        g(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), 5 * ar)
    assert f.cache_info().graphs == 2 and g.cache_info().graphs == 2


def test_kernel_read_from_the_class_dict_through_vars_follows_rebinding(
        backend, fixed_device_arrays):
    # vars(cls)["k"]: the plain kernel, without the binding `type(self).k` would do
    class Block:
        k = add_to

        def run(self, x):
            vars(type(self))["k"][1, 32](x, 2.0)
    blk = Block()
    # eager after the change: 1 * 2 = 2; the graph still adds: 1 + 2 = 3
    against_eager(lambda x: blk.run(x), backend,
                  [("rebound", lambda: setattr(Block, "k", mul_by))])


def test_kernel_read_from_type_self_dunder_dict_follows_rebinding(
        backend, fixed_device_arrays):
    class Block:
        k = add_to

        def run(self, x):
            type(self).__dict__["k"][1, 32](x, 2.0)
    blk = Block()
    against_eager(lambda x: blk.run(x), backend,
                  [("rebound", lambda: setattr(Block, "k", mul_by))])


def test_base_class_kernel_read_through_the_mro_follows_rebinding(
        backend, fixed_device_arrays):
    # the base's kernel where the subclass overrides the name
    class Base:
        k = add_to

    class Sub(Base):
        k = mul_by

        def run(self, x):
            type(self).__mro__[1].k[1, 32](x, 2.0)
    s = Sub()
    against_eager(lambda x: s.run(x), backend,
                  [("base rebound", lambda: setattr(Base, "k", mul_by))])


def test_a_base_class_value_read_through_super_follows_rebinding(
        backend, fixed_device_arrays):
    class Base:
        scale = 2.0

    class Sub(Base):
        scale = 10.0

        def run(self, x):
            add_to[1, 32](x, super().scale)
    s = Sub()
    against_eager(lambda x: s.run(x), backend,
                  [("base rebound", lambda: setattr(Base, "scale", 3.0))])


def test_a_class_value_read_from_the_class_dict_follows_rebinding(
        backend, fixed_device_arrays):
    class Block:
        scale = 2.0

        def run(self, x):
            add_to[1, 32](x, self.__class__.__dict__["scale"])
    blk = Block()
    against_eager(lambda x: blk.run(x), backend,
                  [("rebound", lambda: setattr(Block, "scale", 3.0))])


REGISTRY = {"k": add_to}


class _RegistryMeta(type):
    def __getattr__(cls, name):  # class attributes served from a registry
        return REGISTRY[name]


class _Served(metaclass=_RegistryMeta):
    def run(self, x):
        type(self).k[1, 32](x, 2.0)


def test_a_kernel_a_metaclass_getattr_serves_follows_the_registry(
        backend, fixed_device_arrays):
    s = _Served()

    def swap():
        REGISTRY["k"] = mul_by
    try:
        against_eager(lambda x: s.run(x), backend, [("registry", swap)])
    finally:
        REGISTRY["k"] = add_to


class _Op(typing.NamedTuple):
    kernel: typing.Any
    coef: float


def test_a_class_attribute_namedtuple_field_follows_replace(backend, fixed_device_arrays):
    class Block:
        op = _Op(add_to, 2.0)

        def run(self, x):
            self.op.kernel[1, 32](x, self.op.coef)
    blk = Block()
    against_eager(lambda x: blk.run(x), backend,
                  [("replaced", lambda: setattr(Block, "op", Block.op._replace(coef=3.0)))])
