"""Hostile round 29 (a helper with no knowledge of the code, 2026-12-06): class attributes
and other Python state read in ways the guard search did not walk: a class's dict, its MRO,
super(), a metaclass registry, NamedTuple fields, a list mixing a kernel and a scalar, an
object's type or None-ness (`isinstance(self.norm, LN)`, an optional submodule), and
attributes that appear later (`hasattr`, `getattr(..., None)`). Each compares a compiled
function with eager Numba before and after the change; each was a silent wrong answer
(the graph traced for the old state replayed). The simulator's kernels bind to an
instance here as CUDADispatcher's do on a GPU (conftest.py)."""
from __future__ import annotations

import typing

import numpy as np
import pytest
from eager import against_eager
from numba import cuda
from small_kernels import add_to, mul_by

N = 8


# ---------------------------------------------------------------- class attributes


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


class _Dense:
    pass


class _Sparse:
    pass


DISPATCH = {_Dense: add_to, _Sparse: mul_by}


def test_a_kernel_picked_by_the_class_of_an_attribute_follows_the_class(
        backend, fixed_device_arrays):
    # type-keyed dispatch: the selector is a class, not a number or string
    class Model:
        def __init__(self):
            self.layer = _Dense()

        def run(self, x):
            DISPATCH[type(self.layer)][1, 32](x, 3.0)
    m = Model()
    against_eager(lambda x: m.run(x), backend,
                  [("swapped", lambda: setattr(m, "layer", _Sparse()))])


# ---------------------------------------------------------------- other Python state


class _Op(typing.NamedTuple):
    kernel: typing.Any
    coef: float


def test_a_namedtuple_field_beside_a_kernel_follows_replace(backend, fixed_device_arrays):
    # `OP.coef` is an attribute the code names; the tuple holds a kernel, so it is not a
    # tuple of numbers and its items are not compared
    state = {"op": _Op(add_to, 2.0)}

    def step(x):
        op = state["op"]
        op.kernel[1, 32](x, op.coef)

    def change():
        state["op"] = state["op"]._replace(coef=3.0)
    against_eager(step, backend, [("replaced", change)])


def test_a_class_attribute_namedtuple_field_follows_replace(backend, fixed_device_arrays):
    class Block:
        op = _Op(add_to, 2.0)

        def run(self, x):
            self.op.kernel[1, 32](x, self.op.coef)
    blk = Block()
    against_eager(lambda x: blk.run(x), backend,
                  [("replaced", lambda: setattr(Block, "op", Block.op._replace(coef=3.0)))])


class _LayerNorm:
    pass


class _RMSNorm:
    pass


def test_a_branch_on_isinstance_of_an_attribute_follows_the_object(
        backend, fixed_device_arrays):
    class Model:
        def __init__(self):
            self.norm = _LayerNorm()

        def run(self, x):
            if isinstance(self.norm, _LayerNorm):
                add_to[1, 32](x, 2.0)
            else:
                mul_by[1, 32](x, 5.0)
    m = Model()
    against_eager(lambda x: m.run(x), backend,
                  [("swapped", lambda: setattr(m, "norm", _RMSNorm()))])


def test_an_optional_submodule_set_to_none_is_seen(backend, fixed_device_arrays):
    class Model:
        def __init__(self):
            self.norm = _LayerNorm()

        def run(self, x):
            add_to[1, 32](x, 2.0)
            if self.norm is not None:
                mul_by[1, 32](x, 3.0)
    m = Model()
    against_eager(lambda x: m.run(x), backend, [
        ("removed", lambda: setattr(m, "norm", None)),
        ("back", lambda: setattr(m, "norm", _LayerNorm()))])


def test_an_attribute_that_appears_later_is_seen_by_hasattr(backend, fixed_device_arrays):
    class Model:
        def run(self, x):
            add_to[1, 32](x, 2.0)
            if hasattr(self, "bias"):
                add_to[1, 32](x, self.bias)
    m = Model()
    against_eager(lambda x: m.run(x), backend, [
        ("added", lambda: setattr(m, "bias", 5.0)),
        ("deleted", lambda: delattr(m, "bias"))])


def test_an_attribute_that_appears_later_is_seen_by_getattr_with_a_default(
        backend, fixed_device_arrays):
    class Opt:
        pass
    opt = Opt()

    def step(x):
        add_to[1, 32](x, 2.0)
        extra = getattr(opt, "extra", None)
        if extra is not None:
            add_to[1, 32](x, extra)
    against_eager(step, backend, [("set", lambda: setattr(opt, "extra", 4.0))])


def _hook():
    pass


HOOKS = {"post": _hook}


def test_a_function_tested_only_for_none_is_seen_going_to_none(backend, fixed_device_arrays):
    def step(x):
        add_to[1, 32](x, 2.0)
        if HOOKS["post"] is not None:
            add_to[1, 32](x, 1.0)

    def unset():
        HOOKS["post"] = None
    try:
        against_eager(step, backend, [("unset", unset)])
    finally:
        HOOKS["post"] = _hook


def test_a_scalar_in_a_list_beside_a_kernel_follows_item_assignment(
        backend, fixed_device_arrays):
    spec = [add_to, 2.0]

    def step(x):
        spec[0][1, 32](x, spec[1])
    against_eager(step, backend, [("set", lambda: spec.__setitem__(1, 3.0))])


@pytest.mark.parametrize("direct", [False, True])
def test_replay_refuses_a_graph_traced_with_another_optional_module(backend, direct, request):
    # f.replay must raise SignatureError, not replay the stale graph
    import tracegraph as tg
    if direct:
        request.getfixturevalue("fixed_device_arrays")

    class Model:
        def __init__(self):
            self.norm = _LayerNorm()

        def run(self, x):
            add_to[1, 32](x, 2.0)
            if self.norm is not None:
                mul_by[1, 32](x, 3.0)
    m = Model()
    f = tg.compile(m.run, backend=backend)
    x = cuda.to_device(np.ones(N))
    f(x)
    m.norm = None
    with pytest.raises(tg.SignatureError):
        f.replay(x)
