"""A twenty-third hostile round, on following what called functions change (each case
gave a silent wrong answer, a crash, or a trace on every call, before its fix): a target
network of the same class syncing its own attribute; a plain function setting an
attribute of another object; a profiling helper appending to a dict of lists; dicts keyed
by ints, enums and tuples; ChainMap, mapping proxies and array.array; a value whose `==`
raises; a warning for state the function reads and sets itself."""
from __future__ import annotations

import array
import collections
import enum
import types

import numpy as np
import pytest
from eager import with_state_change
from numba import cuda
from small_kernels import iscale

import tracegraph as tg


def _ones():
    return cuda.to_device(np.ones(4))


class QNet:
    def __init__(self, scale=2.0, target=True):
        self.scale = scale
        self.target = QNet(scale, False) if target else None

    def sync_from(self, other):
        self.scale = other.scale  # the target's own scale

    def step(self, x):
        iscale[1, 32](x, self.scale)
        self.target.sync_from(self)


def test_a_target_network_of_the_same_class_syncing_its_attribute(backend):
    with_state_change(backend, QNet, lambda q: q.step, lambda q: setattr(q, "scale", 3.0))


class Stats:
    def __init__(self):
        self.scale = 0.0


def _record(stats, v):
    stats.scale = v  # a plain function: on the object it is given


class Model:
    def __init__(self):
        self.scale, self.stats = 2.0, Stats()

    def step(self, x):
        iscale[1, 32](x, self.scale)
        _record(self.stats, 1.0)


def test_a_plain_function_setting_an_attribute_of_another_object(backend):
    with_state_change(backend, Model, lambda m: m.step, lambda m: setattr(m, "scale", 3.0))


TIMES: dict = {}


class _Timer:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        TIMES.setdefault(self.name, []).append(float(len(TIMES.get(self.name, ()))))


def test_a_profiling_helper_appending_to_a_dict_of_lists_traces_once(backend):
    def step(x):
        with _Timer("fwd"):
            iscale[1, 32](x, 2.0)

    f, x = tg.compile(step, backend=backend), _ones()
    for _ in range(6):
        with _Timer("fwd"):  # the caller times the call under the same name
            f(x)
    assert len(f.compiled) == 1
    np.testing.assert_allclose(x.copy_to_host(), 64.0)


class Mode(enum.Enum):
    A = 1
    B = 2


@pytest.mark.parametrize("key", [0, Mode.A, ("l", 0)], ids=["int", "enum", "tuple"])
def test_dict_entries_under_keys_that_are_not_strings(backend, key):
    table = {key: 2.0, "other": 1.0}

    def step(x):
        iscale[1, 32](x, table[key])

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    table[key] = 5.0
    f(x)
    np.testing.assert_allclose(x.copy_to_host(), 10.0)


@pytest.mark.parametrize("kind", ["ChainMap", "MappingProxyType", "array"])
def test_other_containers(backend, kind):
    base = {"s": 2.0}
    held = {"ChainMap": collections.ChainMap(base),
            "MappingProxyType": types.MappingProxyType(base),
            "array": array.array("d", [2.0])}[kind]
    key = 0 if kind == "array" else "s"

    def step(x):
        iscale[1, 32](x, held[key])

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    if kind == "array":
        held[0] = 5.0
    else:
        base["s"] = 5.0
    f(x)
    np.testing.assert_allclose(x.copy_to_host(), 10.0)


class Odd(enum.Enum):
    A = 1
    B = 2

    def __eq__(self, other):
        raise RuntimeError("no comparing")

    __hash__ = enum.Enum.__hash__


SEL = Odd.A


def test_a_value_whose_eq_raises_traces_again(backend):
    global SEL

    def step(x):
        iscale[1, 32](x, 2.0 if SEL is Odd.A else 3.0)

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    SEL = Odd.B
    try:
        f(x)
    finally:
        SEL = Odd.A
    np.testing.assert_allclose(x.copy_to_host(), 6.0)


class Lazy:
    def __init__(self):
        self.ready = False

    def step(self, x):
        if not self.ready:
            iscale[1, 32](x, 0.0)
            self.ready = True
        iscale[1, 32](x, 2.0)


def test_state_the_function_reads_and_sets_is_said(backend):
    f, x = tg.compile(Lazy().step, backend=backend), _ones()
    with pytest.warns(UserWarning, match=r"names self\.ready, which it .*also sets"):
        f(x)


T4 = np.array([1.0, 1.0, 1.0, 2.0])


def test_a_host_array_copied_in_and_also_read_in_python(backend):
    from small_kernels import iadd

    def step(x):
        iadd[1, 32](x, cuda.to_device(T4))  # the copy follows T4's contents
        iscale[1, 32](x, float(T4.max()))  # this value is read at trace time

    f, x = tg.compile(step, backend=backend), cuda.to_device(np.zeros(4))
    f(x)  # (0 + T4) * 2 = [2, 2, 2, 4]
    T4[3] = 3.0
    try:
        f(x)  # (x + T4) * 3 = [9, 9, 9, 21]
    finally:
        T4[3] = 2.0
    np.testing.assert_allclose(x.copy_to_host(), [9.0, 9.0, 9.0, 21.0])


HELD = np.ones(4)


def test_a_host_array_only_copied_in_follows_in_place_changes_without_tracing(backend):
    from small_kernels import iadd

    def step(x):
        iadd[1, 32](x, cuda.to_device(HELD))

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    HELD[:] = 5.0
    try:
        f(x)
    finally:
        HELD[:] = 1.0
    np.testing.assert_allclose(x.copy_to_host(), 7.0)
    assert len(f.compiled) == 1
