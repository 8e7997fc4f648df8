"""Elementwise fusion (passes/fusion.py) on both backends: which chains of elementwise ops
become one kernel, and that the results are those of the separate kernels bit for bit
(NumPy's too). Fused: a temporary read only by the next op, an op into its own out
(linear's bias and activation in place), operands of other 4-D shapes (broadcasts),
conversions between dtypes, scalars. Kept apart: a product (the GPU could contract it
with an add into an fma), an intermediate that is a result or is read again later, a
host callback or a kernel writing the producer's input in between; everything with
TRACEGRAPH_FUSE=0.
"""
from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg
from tracegraph import ops

F32 = np.float32


def rand(shape, dtype=F32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@cuda.jit
def scale_in_place(x, k):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        x[i] = x[i] * k


def kernels(f, *args):
    return [op.name for op in f.trace(*args).ops if op.kind in ("kernel", "library")]


def both(backend, monkeypatch, fn, *args):
    """fn's results and kernels with fusion on, then off; the results must be equal."""
    out = {}
    for fuse in ("1", "0"):
        monkeypatch.setenv("TRACEGRAPH_FUSE", fuse)
        f = tg.compile(fn, backend=backend)
        got = f(*args)
        out[fuse] = ([np.asarray(g).copy() for g in got] if isinstance(got, tuple)
                     else np.asarray(got).copy(), kernels(f, *args))
    on, off = out["1"][0], out["0"][0]
    for a, b in zip(on if isinstance(on, list) else [on], off if isinstance(off, list) else [off]):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    return on, out["1"][1], out["0"][1]


CASES = {
    # name: (function, its kernels fused, what NumPy gives)
    "chain": (lambda x, b: ops.sqrt(ops.abs(ops.tanh(ops.maximum(x - 0.5, 0.0) + b))),
              ["subtract+maximum+add+tanh+abs+sqrt"],
              lambda x, b: np.sqrt(np.abs(np.tanh(np.maximum(x - F32(0.5), F32(0)) + b)))),
    "product-kept": (lambda x, b: ops.relu(x * 2.0 + b), ["multiply", "add+relu"],
                     lambda x, b: np.maximum(x * F32(2) + b, 0)),
    "dtypes": (lambda x, b: ops.sqrt(ops.astype(ops.astype(x, np.int32) + 3, F32)) - b,
               ["copy+add+copy+sqrt+subtract"],
               lambda x, b: np.sqrt((x.astype(np.int32) + 3).astype(F32)) - b),
    "where-scalar": (lambda x, b: ops.where(ops.greater(x, b), x - b, 0.25),
                     ["subtract+greater+where"],
                     lambda x, b: np.where(x > b, x - b, F32(0.25))),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fused_chains_give_the_separate_kernels_results(backend, monkeypatch, case):
    fn, fused, numpy = CASES[case]
    x, b = rand((6, 33), seed=1), rand(33, seed=2)
    got, names, unfused = both(backend, monkeypatch, fn, x, b)
    assert names == fused
    assert len(unfused) == sum(name.count("+") + 1 for name in fused)
    np.testing.assert_allclose(got, numpy(x, b), rtol=1e-6, atol=1e-7)  # math's and NumPy's


def test_linear_bias_and_activation_in_place_fuse(backend, monkeypatch):
    """matmul, then add and relu into its result (linear without cuBLAS): the add and the
    relu are one kernel writing the result once."""
    monkeypatch.setenv("TRACEGRAPH_MATMUL", "kernel")
    x, w, b = rand((5, 8), seed=3), rand((8, 12), seed=4), rand(12, seed=5)
    got, names, _ = both(backend, monkeypatch,
                         lambda x, w, b: ops.linear(x, w, b, activation="relu"), x, w, b)
    assert names == ["matmul_tiled", "add+relu"]
    np.testing.assert_allclose(got, np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-6)


def test_an_intermediate_that_is_a_result_or_read_later_stays(backend, monkeypatch):
    def fn(x, b):
        t = x + b                      # a result: kept (its readers fuse, reading it)
        u = ops.exp(x - b)             # x - b read only by exp: fused
        v = ops.tanh(t) - u            # u and tanh(t) read only here: fused in
        return t, v, t * 2.0
    x, b = rand((4, 9), seed=6), rand(9, seed=7)
    (_, v, _), names, _ = both(backend, monkeypatch, fn, x, b)
    assert names == ["add", "subtract+exp+tanh+subtract", "multiply"]
    np.testing.assert_allclose(v, np.tanh(x + b) - np.exp(x - b), rtol=1e-6, atol=1e-6)


def test_nothing_fuses_across_a_host_callback_or_a_write_of_the_producers_input(
        backend, monkeypatch):
    seen = []

    def fn(x, b):
        c = ops.copy(b)
        t = x + c
        tg.callback(lambda: seen.append(1))
        u = ops.tanh(t)                # apart: the callback is between
        w = u - c
        scale_in_place[2, 8](c, 3.0)   # writes c, which the producer of w reads...
        return ops.exp(w)              # ...so w's subtract does not move past it
    x, b = rand((4, 9), seed=8), rand(9, seed=9)
    got, names, _ = both(backend, monkeypatch, fn, x, b)
    assert names == ["copy", "add", "tanh+subtract", "scale_in_place", "exp"]
    np.testing.assert_allclose(got, np.exp(np.tanh(x + b) - b), rtol=1e-6, atol=1e-6)


def test_fusion_off(backend, monkeypatch):
    fn, fused, _ = CASES["chain"]
    monkeypatch.setenv("TRACEGRAPH_FUSE", "0")
    x, b = rand((3, 5)), rand(5)
    assert kernels(tg.compile(fn, backend=backend), x, b) == fused[0].split("+")
