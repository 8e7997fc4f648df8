"""Hostile round 26 (direct replays of graphs capturing arrays): methods found by the names
classes hold them under, methods overridden and reached through super(), and a graph
traced for patched state replayed directly after the state was restored."""
from __future__ import annotations

from unittest import mock

import numpy as np
from eager import against_eager
from numba import cuda
from small_kernels import add_to, axpy

import tracegraph as tg

N = 8


class Layer:
    def __init__(self, k):
        self.W = cuda.to_device(np.full(N, 1.0 + k / 8))
        self.a = 0.25 + k

    def forward(self, x):
        axpy[1, 32](x, self.W, self.a)


def _zero_forward(self, x):  # an ablation
    add_to[1, 32](x, 0.0)


def test_a_method_patched_then_restored_replays_the_first_graph_again(
        backend, fixed_device_arrays):
    layers = [Layer(k) for k in range(2)]

    def step(x):
        for layer in layers:
            layer.forward(x)
    against_eager(step, backend, [
        ("patched", mock.patch.object(Layer, "forward", _zero_forward)),
        ("restored", lambda: None)])


def _plus(self, x):
    axpy[1, 32](x, self.W, 1.0)


def _minus(self, x):
    axpy[1, 32](x, self.W, -1.0)


class Aliased:
    forward = _plus  # a method under another name than its function's

    def __init__(self):
        self.W = cuda.to_device(np.full(N, 2.0))


def test_a_method_held_under_another_name_is_followed_when_rebound(
        backend, fixed_device_arrays):
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


def test_an_overridden_method_reached_through_super_is_followed_when_rebound(
        backend, fixed_device_arrays):
    m = Child()
    original = Base.forward

    def step(x):
        m.forward(x)

    def rebind(fn):
        def change():
            Base.forward = fn
        return change
    try:
        against_eager(step, backend, [("rebound", rebind(forward)),
                                       ("restored", rebind(original))])
    finally:
        Base.forward = original


class _Entry:
    def __init__(self, key, checks, guarded=False):
        self.key, self.fast_checks, self.guarded = key, checks, guarded


def test_a_variant_is_replayed_directly_only_while_its_graph_s_paths_find_the_same():
    # a full call checks the first graph's guards before it picks a variant; a direct
    # replay of the variant must check them too (a variant's own guards may be fewer)
    from tracegraph.cache import GraphCache
    cache = GraphCache(None)
    base = _Entry(("sig",), ("b1", "b2"))
    variant = _Entry(("sig", ("captured now", (1,))), ("v1",))
    assert cache.direct_checks(variant) is None  # its graph is gone: a full call traces
    cache.entries[base.key] = base
    assert cache.direct_checks(base) == ("b1", "b2")
    assert cache.direct_checks(variant) == ("v1", "b1", "b2")
    cache.entries[base.key] = _Entry(("sig",), (), guarded=True)
    assert cache.direct_checks(variant) is None  # a path of its graph checked only in Python
    assert cache.direct_checks(_Entry(("sig",), ("v",), guarded=True)) is None


@cuda.jit
def inc(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


H = np.zeros(4)


def test_a_host_array_read_for_its_layout_reshaped_in_place_traces_again(
        backend, fixed_device_arrays):
    def step(x):
        for _ in range(len(H)):  # (read only for its layout: checked by identity and layout)
            inc[1, 32](x)

    H.shape = (4,)
    f = tg.compile(step, backend=backend)
    for shape, want in [((4,), 4), ((4,), 4), ((2, 2), 2), ((2, 2), 2), ((4,), 4)]:
        H.shape = shape
        H[...] = want  # refilled in place: nothing to trace again for
        x = cuda.to_device(np.zeros(N))
        f(x)
        np.testing.assert_array_equal(x.copy_to_host(), np.full(N, want))
    assert f.cache_info().graphs == 2
    x = cuda.to_device(np.zeros(N))
    for _ in range(3):
        f(x)
    if backend == "cuda":
        assert [e for e in f.compiled if getattr(e.executable, "armed", None)]
    H.shape = (2, 2)
    f(x)
    np.testing.assert_array_equal(x.copy_to_host(), np.full(N, 14.0))
    H.shape = (4,)
