"""tracegraph.ops with an `out=` that overlaps an input: NumPy's answer (docs/ops.md).

NumPy computes as if the inputs were copied first (`np.sum(x, axis=0, out=x[:, 0])` is
the column sums of the original x). An op that reads an input while it writes an
overlapping out (a reduction whose blocks read what other blocks have written) races;
the ops copy such an input first, and skip the copy only where out is exactly the input,
element for element, and the kernel reads each element before writing it.

Each case is written once for both modules (`m` is `tracegraph.ops` or `numpy`), run on
a copy of the same data, on the `backend` fixture, over several calls (the races the
copies prevent depend on thread order; several cases fail on every run without them).
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

import tracegraph as tg
from tracegraph import ops
from tracegraph.ops import reduce as R

F64, I32 = np.float64, np.int32
CALLS = 3


@pytest.fixture(autouse=True, scope="module")
def _fast_simulator():
    old = sys.getswitchinterval()  # shared-memory kernels: see tests/test_ops.py
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(old)


def data(shape, dtype=F64, seed=0):
    r = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        return r.integers(-50, 50, size=shape).astype(dtype)
    return r.uniform(-2.0, 2.0, size=shape).astype(dtype)


def check(backend, case, shape, dtype=F64, calls=CALLS):
    """Run case(ops, x) traced and case(np, x) on copies of the same x; compare all of x.
    Returns the compiled function (for its program)."""
    def body(x):
        case(ops, x)
        return x
    fn = tg.compile(body, backend=backend)
    for seed in range(calls):
        x = data(shape, dtype, seed)
        want = x.copy()
        case(np, want)
        got = np.asarray(fn(x.copy()))
        assert got.dtype == want.dtype
        if want.dtype.kind in "biu":
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    return fn


def kernels(fn):
    return [op.name for op in fn.latest.program.ops if op.kind == "kernel"]


# ---------------------------------------------------------------------------
# reductions: out overlaps the input other than element for element

C = R._CHUNK  # simulator: two launches for a few rows of > 64, or columns of > 16

PARTIAL = {
    # columns kernel (an earlier axis), one launch
    "sum-axis0-into-column0": ((8, 8), lambda m, x: m.sum(x, axis=0, out=x[:, 0])),
    "max-axis0-into-column1": ((8, 8), lambda m, x: m.max(x, axis=0, out=x[:, 1])),
    "min-axis-2-into-row2": ((8, 8), lambda m, x: m.min(x, axis=-2, out=x[2])),
    "mean-axis0-into-row-reversed": ((6, 7), lambda m, x: m.mean(x, axis=0, out=x[1, ::-1])),
    "min-axis0-into-shifted-row": ((4, 65), lambda m, x: m.min(x[:, :64], axis=0,
                                                               out=x[0, 1:])),
    "sum-3d-axis1-into-reversed-plane": ((4, 6, 5), lambda m, x: m.sum(x, axis=1,
                                                                       out=x[::-1, 0, :])),
    "max-keepdims-axis0-into-row1": ((4, 4), lambda m, x: m.max(x, axis=0, keepdims=True,
                                                                out=x[1:2])),
    # rows kernel (the last axis), one launch
    "sum-axis1-into-last-row": ((8, 8), lambda m, x: m.sum(x, axis=1, out=x[-1])),
    "mean-axis1-into-column2": ((8, 8), lambda m, x: m.mean(x, axis=1, out=x[:, 2])),
    "max-axis-1-into-row0": ((8, 8), lambda m, x: m.max(x, axis=-1, out=x[0])),
    "sum-shifted-flat-view": ((20,), lambda m, x: m.sum(x.reshape(4, 5), axis=1, out=x[6:10])),
    "min-keepdims-axis1-into-column": ((6, 6), lambda m, x: m.min(x, axis=1, keepdims=True,
                                                                  out=x[::-1, 3:4])),
    # every element (axis=None)
    "sum-all-keepdims-into-corner": ((8, 8), lambda m, x: m.sum(x, keepdims=True,
                                                                out=x[-1:, -1:])),
    "max-all-into-first": ((3, 5), lambda m, x: m.max(x[1:], keepdims=True, out=x[1:2, :1])),
    # out does not fold: the reduction goes through a temporary
    "max-axis2-into-unfolded-block": ((10, 12), lambda m, x: m.max(x.reshape(4, 6, 5), axis=2,
                                                                   out=x[:4, :6])),
    # two launches on the simulator (partials, then the partials)
    "sum-two-launch-rows": ((2, 2 * C["rows"] + 9), lambda m, x: m.sum(x, axis=1,
                                                                       out=x[1, 3:5])),
    "max-two-launch-columns": ((2 * C["columns"] + 7, 3), lambda m, x: m.max(x, axis=0,
                                                                              out=x[5])),
    "mean-two-launch-all": ((3, 50), lambda m, x: m.mean(x, keepdims=True, out=x[1:2, 7:8])),
}


@pytest.mark.parametrize("name", sorted(PARTIAL))
def test_reduction_out_overlapping_the_input(backend, name):
    shape, case = PARTIAL[name]
    check(backend, case, shape)


def test_reduction_int_into_its_own_input_casts_like_numpy(backend):
    # int32 sums to int64, written back into the int32 input (same_kind, like NumPy)
    check(backend, lambda m, x: m.sum(x, axis=0, out=x[1, ::-1]), (6, 7), I32)
    check(backend, lambda m, x: m.max(x, axis=1, out=x[:, 0]), (5, 9), I32)


def test_reduction_out_is_another_argument_aliasing_the_input(backend):
    from numba import cuda
    fn = tg.compile(lambda x, y: ops.max(x, axis=0, out=y), backend=backend)
    for seed in range(CALLS):
        x = data((8, 8), F64, seed)
        want = x.copy()
        np.max(want, axis=0, out=want[:, 1])
        d = cuda.to_device(x)
        fn(d, d[:, 1])
        np.testing.assert_array_equal(d.copy_to_host(), want)


# ---------------------------------------------------------------------------
# reductions exactly in place (a reduced axis of length 1): no copy, NumPy's answer

IN_PLACE = {
    "sum-keepdims-axis1": ((5, 1), lambda m, x: m.sum(x, axis=1, keepdims=True, out=x)),
    "max-axis1-into-squeezed": ((5, 1), lambda m, x: m.max(x, axis=1, out=x[:, 0])),
    "min-3d-axis1-columns": ((3, 1, 4), lambda m, x: m.min(x, axis=1, out=x[:, 0, :])),
    "mean-all-keepdims": ((1,), lambda m, x: m.mean(x, keepdims=True, out=x)),
    "sum-of-a-view-into-itself": ((4, 6), lambda m, x: m.sum(x[:, 2:3], axis=-1,
                                                             keepdims=True, out=x[:, 2:3])),
}


@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_reduction_exactly_in_place(backend, name):
    shape, case = IN_PLACE[name]
    fn = check(backend, case, shape)
    assert "copy" not in kernels(fn)


def test_reduction_exactly_in_place_int_cast(backend):
    fn = check(backend, lambda m, x: m.sum(x, axis=1, out=x[:, 0]), (5, 1), I32)
    assert kernels(fn) == ["sum"]


def test_reduction_copies_only_when_it_must(backend):
    """A disjoint out needs no copy; the two-launch path reads x before writing out."""
    fn = check(backend, lambda m, x: m.sum(x[:4], axis=0, out=x[4]), (5, 8))
    assert kernels(fn) == ["sum_columns"]
    fn = check(backend, lambda m, x: m.max(x, axis=0, out=x[:, 0]), (8, 8), calls=1)
    assert kernels(fn) == ["copy", "max_columns"]
    fn = check(backend, lambda m, x: m.sum(x, axis=1, out=x[0, :2]), (2, 2 * C["rows"] + 9),
               calls=1)
    assert kernels(fn) == ["sum", "sum"]


# ---------------------------------------------------------------------------
# the other ops taking out= (regression guards: they copied an overlapping input already)

def _softmax(x):
    e = np.exp(x - x.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def _layer_norm(x, w):
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5) * w


SIBLINGS = {
    "add-shifted": ((20,), lambda m, x: m.add(x[1:], x[:-1], out=x[1:])),
    "where-reversed": ((12,), lambda m, x: (
        x[::-1].__setitem__(Ellipsis, np.where(x > 0, x, x[::-1])) if m is np
        else m.where(x > 0, x, x[::-1], out=x[::-1]))),
    "clip-bounds-overlap": ((12,), lambda m, x: m.clip(x[:6], x[6:], 1.0, out=x[3:9])),
    "copy-broadcast-row-over-block": ((4, 5), lambda m, x: (
        m.copyto(x[1:], x[2]) if m is np else m.copy(x[2], out=x[1:]))),
    "transpose-into-itself": ((5, 5), lambda m, x: (
        m.copyto(x, x.T.copy()) if m is np else m.transpose(x, out=x))),
    "matmul-into-both": ((4, 4), lambda m, x: m.matmul(x, x, out=x)),
    "matmul-into-part-of-b": ((6, 3), lambda m, x: m.matmul(x[:3], x[3:], out=x[3:])),
    "softmax-shifted": ((26,), lambda m, x: (
        x[2:22].reshape(4, 5).__setitem__(Ellipsis, _softmax(x[:20].reshape(4, 5)))
        if m is np else m.softmax(x[:20].reshape(4, 5), axis=0, out=x[2:22].reshape(4, 5)))),
    "layer_norm-weight-is-out": ((1, 6), lambda m, x: (
        x.__setitem__(Ellipsis, _layer_norm(x.copy(), x[0].copy())) if m is np
        else m.layer_norm(x, x[0], out=x))),
}


@pytest.mark.parametrize("name", sorted(SIBLINGS))
def test_other_ops_out_overlapping_an_input(backend, name):
    shape, case = SIBLINGS[name]
    check(backend, case, shape)


def test_linear_bias_overlapping_out(backend):
    def fn(x, w, o):
        ops.linear(x, w, o[0, :3], activation="relu", out=o[:, :3])
        return o
    x, w, o = data((2, 4), F64, 1), data((4, 3), F64, 2), data((2, 5), F64, 3)
    want = o.copy()
    want[:, :3] = np.maximum(x @ w + o[0, :3], 0)
    got = tg.compile(fn, backend=backend)(x, w, o.copy())
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------
# an out whose elements are not distinct (a broadcast view) is refused, as NumPy does

@pytest.mark.parametrize("op", ["copy", "sum", "softmax", "matmul", "linear"])
def test_broadcast_out_is_refused(op):
    def fn(x):
        row = ops.broadcast_to(x[0:1], (4, 4))
        if op == "copy":
            ops.copy(x, out=row)
        elif op == "sum":
            ops.sum(x, axis=0, out=ops.broadcast_to(x[0, :1], (4,)))
        elif op == "linear":
            ops.linear(x, x, out=row)
        elif op == "softmax":
            ops.softmax(x, out=row)
        else:
            ops.matmul(x, x, out=row)
        return x
    with pytest.raises(tg.TraceError, match=rf"tg\.ops\.{op}: the elements of out .* overlap"):
        tg.compile(fn).trace(data((4, 4)))


def test_self_overlapping_out_argument_is_refused():
    o = np.lib.stride_tricks.as_strided(np.zeros(5), (3, 3), (8, 8))  # rows overlap
    with pytest.raises(tg.TraceError, match=r"tg\.ops\.add: the elements of out .* overlap"):
        tg.compile(lambda x, o: ops.add(x, 1.0, out=o)).trace(data((3, 3)), o)
