"""tracegraph.ops against NumPy: awkward sizes (1, 17, ~1000, non-square), broadcasting,
strided views, float32/float64 (ints where they make sense), out=, and trace-time errors.

Each test compiles a small traced function on the `backend` fixture (sim everywhere,
cuda too where a GPU is usable) and compares with NumPy.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import tracegraph as tg
from tracegraph import ops

F32, F64, I32, I64 = np.float32, np.float64, np.int32, np.int64
FLOATS = [F32, F64]
HERE = os.path.basename(__file__)


@pytest.fixture(autouse=True, scope="module")
def _fast_simulator():
    # The simulator polls its threads at cuda.syncthreads(); a short GIL switch interval
    # makes the shared-memory kernels (reductions, matmul, softmax) ~20x faster.
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(old)


def rng(seed=0):
    return np.random.default_rng(seed)


def rand(shape, dtype=F64, seed=0, low=-2.0, high=2.0):
    r = rng(seed)
    if np.dtype(dtype).kind == "i":
        return r.integers(-50, 50, size=shape).astype(dtype)
    return r.uniform(low, high, size=shape).astype(dtype)


def tol(dtype, loose=False):
    if np.dtype(dtype) == np.float32:
        return {"rtol": 1e-4 if loose else 2e-6, "atol": 1e-5 if loose else 1e-6}
    return {"rtol": 1e-10, "atol": 1e-12}


def run(backend, fn, *args):
    return tg.compile(fn, backend=backend)(*args)


def same(got, want, dtype=None, loose=False):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, **tol(dtype or got.dtype, loose))


# ---------------------------------------------------------------------------
# elementwise

UNARY = {
    "negative": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, x.dtype.type(0)), "copy": np.copy,
}
POSITIVE = {"log", "sqrt"}


@pytest.mark.parametrize("shape", [(1,), (17,), (1000,), (7, 33)])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(backend, name, dtype, shape):
    low = 0.1 if name in POSITIVE else -3.0
    x = rand(shape, dtype, low=low, high=3.0)
    got = run(backend, lambda x: getattr(ops, name)(x), x)
    same(got, UNARY[name](x).astype(dtype))


@pytest.mark.parametrize("dtype", [I32, I64])
@pytest.mark.parametrize("name", ["negative", "abs", "relu", "exp", "copy"])
def test_unary_ints(backend, name, dtype):
    x = rand((17,), dtype)
    if name == "exp":
        x = (x % 7).astype(dtype)
    got = run(backend, lambda x: getattr(ops, name)(x), x)
    want = UNARY[name](x)
    same(got, want)  # exp of an int is float64, like NumPy


def test_unary_strided_view_and_special_values(backend):
    x = rand((5, 34), F64)
    got = run(backend, lambda x: ops.exp(x[1:, ::3]), x)
    same(got, np.exp(x[1:, ::3]))
    specials = np.array([0.0, -1.0, 800.0, -800.0, np.inf])
    with np.errstate(all="ignore"):
        got = run(backend, lambda x: (ops.log(x), ops.sqrt(x), ops.exp(x), ops.sigmoid(x)),
                  specials)
        want = (np.log(specials), np.sqrt(specials), np.exp(specials),
                1 / (1 + np.exp(-specials)))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "less": np.less,
    "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
    "equal": np.equal, "not_equal": np.not_equal,
}
SHAPES = [((17,), (17,)), ((1,), (1000,)), ((5, 1), (1, 7)), ((3, 4, 5), (5,)),
          ((2, 3, 4, 5, 6), (4, 1, 6))]


@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcast(backend, name, dtype, shapes):
    a, b = rand(shapes[0], dtype, 1), rand(shapes[1], dtype, 2)
    if name in ("equal", "not_equal"):
        b = np.broadcast_to(b, np.broadcast_shapes(*shapes)).copy()
        b[..., ::2] = np.broadcast_to(a, b.shape)[..., ::2]  # some equal entries
    got = run(backend, lambda a, b: getattr(ops, name)(a, b), a, b)
    same(got, BINARY[name](a, b), dtype)


@pytest.mark.parametrize("dtype", [I32, I64])
@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "maximum",
                                  "less_equal"])
def test_binary_ints(backend, name, dtype):
    a, b = rand((4, 17), dtype, 1), rand((17,), dtype, 2)
    if name == "divide":
        b[b == 0] = 3
    got = run(backend, lambda a, b: getattr(ops, name)(a, b), a, b)
    same(got, BINARY[name](a, b))  # int / int is float64


@pytest.mark.parametrize("dtype", FLOATS + [I32])
@pytest.mark.parametrize("scalar", [2, 0.5, np.float64(1.5)])
def test_scalar_operands_follow_numpy_promotion(backend, dtype, scalar):
    x = rand((3, 17), dtype, 3)

    def fn(x):
        return (ops.add(x, scalar), ops.subtract(scalar, x), ops.multiply(x, scalar),
                ops.maximum(scalar, x), ops.less(x, scalar), ops.minimum(x, scalar))
    got = run(backend, fn, x)
    want = (np.add(x, scalar), np.subtract(scalar, x), np.multiply(x, scalar),
            np.maximum(scalar, x), np.less(x, scalar), np.minimum(x, scalar))
    for g, w in zip(got, want):
        same(g, w, dtype if np.dtype(dtype).kind == "f" else None)
    if np.dtype(dtype) == np.float32 and not isinstance(scalar, np.float64):
        assert got[0].dtype == np.float32  # Python scalars are weak


def test_mixed_dtypes(backend):
    a32, a64 = rand((17,), F32, 1), rand((17,), F64, 2)
    i32, i64 = rand((17,), I32, 3), rand((17,), I64, 4) + 100
    got = run(backend, lambda a, b, c, d: (a + b, c + a, c + d, c * 2.5, c / d), a32, a64, i32,
              i64)
    want = (a32 + a64, i32 + a32, i32 + i64, i32 * 2.5, i32 / i64)
    for g, w in zip(got, want):
        same(g, w, F64)


def test_bools(backend):
    a, b = rand((17,), F64, 1) > 0, rand((17,), F64, 2) > 0
    got = run(backend, lambda a, b: (a + b, a * b, ops.maximum(a, b), ops.minimum(a, b),
                                     ops.mean(a), ops.where(a, 1, 2.5), ops.equal(a, b)), a, b)
    want = (a + b, a * b, np.maximum(a, b), np.minimum(a, b), np.mean(a), np.where(a, 1, 2.5),
            a == b)
    for g, w in zip(got, want):
        same(g, w)


def test_where_and_clip(backend):
    x, y = rand((4, 17), F32, 1), rand((17,), F32, 2)
    lo, hi = rand((4, 1), F32, 3) - 1, rand((17,), F32, 4) + 1

    def fn(x, y, lo, hi):
        return (ops.where(x > y, x, y), ops.where(x < 0, 0.0, x), ops.where(x < 0, -1, 1),
                ops.clip(x, -0.5, 0.5), ops.clip(x, lo, hi), ops.clip(x, None, 0.25),
                ops.clip(x, 0.0, None))
    got = run(backend, fn, x, y, lo, hi)
    want = (np.where(x > y, x, y), np.where(x < 0, np.float32(0), x), np.where(x < 0, -1, 1),
            np.clip(x, -0.5, 0.5), np.clip(x, lo, hi), np.clip(x, None, 0.25),
            np.clip(x, 0.0, None))
    for g, w in zip(got, want):
        same(g, w)


def test_nan_propagates_like_numpy(backend):
    x = np.array([1.0, np.nan, 3.0, -np.inf])
    y = np.array([np.nan, 2.0, 1.0, 0.0])
    got = run(backend, lambda x, y: (ops.maximum(x, y), ops.minimum(x, y), ops.relu(x),
                                     ops.clip(x, 0.0, 2.0), ops.max(x)), x, y)
    want = (np.maximum(x, y), np.minimum(x, y), np.maximum(x, 0.0), np.clip(x, 0.0, 2.0),
            np.max(x))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", FLOATS)
def test_array_operators(backend, dtype):
    x, y, w = rand((5, 7), dtype, 1), rand((7,), dtype, 2), rand((7, 3), dtype, 3)

    def fn(x, y, w):
        return (x + y, 1 - x, x * 2, y / x, -x, abs(x), x @ w, x < y, x <= 0, x > y,
                x >= 0.5, ops.where(x > 0, x, -x), 3 + x * y - x / 4)
    got = run(backend, fn, x, y, w)
    want = (x + y, 1 - x, x * 2, y / x, -x, abs(x), x @ w, x < y, x <= 0, x > y, x >= 0.5,
            np.where(x > 0, x, -x), 3 + x * y - x / 4)
    for g, v in zip(got, want):
        same(g, v, dtype, loose=True)


def test_astype(backend):
    x = rand((3, 17), F64, 1) * 10
    got = run(backend, lambda x: (ops.astype(x, np.float32), ops.astype(x, np.int32),
                                  ops.astype(x, np.int64), ops.astype(x > 0, np.float64)), x)
    want = (x.astype(F32), x.astype(I32), x.astype(I64), (x > 0).astype(F64))
    for g, w in zip(got, want):
        same(g, w)


# ---------------------------------------------------------------------------
# out=

def test_out_writes_into_a_given_array(backend):
    x, y = rand((4, 17), F64, 1), rand((17,), F64, 2)

    def fn(x, y):
        z = tg.zeros((4, 17))
        ops.add(x, y, out=z)
        ops.exp(y, out=z[2])  # a view of out
        return z
    got = run(backend, fn, x, y)
    want = x + y
    want[2] = np.exp(y)
    same(got, want)


def test_out_in_place_and_overlapping(backend):
    x = rand((20,), F64, 1)

    def fn(x):
        a = ops.copy(x)
        ops.multiply(a, 2.0, out=a)                # exactly in place
        b = ops.copy(x)
        ops.add(b[1:], b[:-1], out=b[1:])          # overlapping: NumPy semantics
        c = ops.copy(x)
        ops.sum(c.reshape(4, 5), axis=1, out=c[:4])  # reduce into its own input
        return a, b, c
    a, b, c = run(backend, fn, x)
    same(a, x * 2)
    want_b = x.copy()
    np.add(want_b[1:], want_b[:-1], out=want_b[1:])
    same(b, want_b)
    want_c = x.copy()
    want_c[:4] = x.reshape(4, 5).sum(axis=1)
    same(c, want_c)


def test_out_may_be_a_lower_precision_of_the_same_kind(backend):
    x = rand((17,), F64, 1)

    def fn(x):
        out = tg.empty((17,), np.float32)
        ops.tanh(x, out=out)
        return out
    same(run(backend, fn, x), np.tanh(x).astype(F32))


# ---------------------------------------------------------------------------
# reductions

REDUCTIONS = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


@pytest.mark.parametrize("case", [((1,), None), ((17,), None), ((1000,), None), ((1000,), 0),
                                  ((7, 33), None), ((7, 33), 0), ((7, 33), 1), ((7, 33), -1),
                                  ((3, 5, 4), 1), ((300, 3), 0), ((3, 300), 1)],
                         ids=lambda c: f"{'x'.join(map(str, c[0]))}-axis{c[1]}")
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions(backend, name, dtype, case):
    shape, axis = case
    x = rand(shape, dtype, 5)
    got = run(backend, lambda x: getattr(ops, name)(x, axis), x)
    same(got, REDUCTIONS[name](x, axis=axis), dtype, loose=True)


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_keepdims_and_views(backend, name):
    x = rand((6, 40), F64, 6)
    fn = getattr(ops, name)
    got = run(backend, lambda x: (fn(x, 1, keepdims=True), fn(x[:, ::3], 0), fn(x.T, 1),
                                  fn(x[1:4], keepdims=True), fn(x[2])), x)
    ref = REDUCTIONS[name]
    want = (ref(x, axis=1, keepdims=True), ref(x[:, ::3], axis=0), ref(x.T, axis=1),
            ref(x[1:4], keepdims=True), ref(x[2]))
    for g, w in zip(got, want):
        same(g, w)


def test_reductions_of_ints_and_bools(backend):
    x = rand((9, 13), I32, 7)
    got = run(backend, lambda x: (ops.sum(x), ops.sum(x, 0), ops.mean(x, 1), ops.max(x),
                                  ops.min(x, 0), ops.sum(x > 0), ops.sum(x > 0, 1)), x)
    want = (x.sum(), x.sum(0), x.mean(1), x.max(), x.min(0), (x > 0).sum(), (x > 0).sum(1))
    for g, w in zip(got, want):
        same(g, w)


def test_reduction_dag_and_two_launch_path(backend):
    """Few outputs of a long axis: partials by many blocks, then a second launch."""
    from tracegraph.ops import reduce as R
    rows = rand((2, 2 * R._CHUNK["rows"] + 3), F64, 8)
    cols = rand((2 * R._CHUNK["columns"] + 5, 3), F64, 9)
    fn = tg.compile(lambda x, y: (ops.sum(x, 1), ops.max(y, 0)), backend=backend)
    got = fn(rows, cols)
    same(got[0], rows.sum(1))
    same(got[1], cols.max(0))
    names = [op.name for op in fn.latest.program.ops if op.kind == "kernel"]
    assert names == ["sum", "sum", "max_columns", "max_columns"]


# ---------------------------------------------------------------------------
# matmul

MATMUL_SHAPES = [((1, 1), (1, 1)), ((17, 9), (9, 13)), ((5, 33), (33, 1)), ((1, 40), (40, 3)),
                 ((3, 17, 9), (9, 13)), ((2, 4, 5), (2, 5, 3)), ((1, 4, 5), (3, 5, 2)),
                 ((9,), (9, 4)), ((6, 9), (9,)), ((9,), (9,)), ((2, 3, 4), (4,))]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=lambda s: "@".join(map(str, s)))
@pytest.mark.parametrize("dtype", FLOATS)
def test_matmul(backend, dtype, shapes):
    a, b = rand(shapes[0], dtype, 1), rand(shapes[1], dtype, 2)
    got = run(backend, lambda a, b: a @ b, a, b)
    same(got, a @ b, dtype, loose=True)


def test_matmul_views_mixed_dtypes_and_ints(backend):
    a, b = rand((7, 5), F32, 1), rand((7, 6), F64, 2)
    i, j = rand((3, 4), I32, 3), rand((4, 5), I64, 4)
    got = run(backend, lambda a, b, i, j: (ops.matmul(a.T, b), a[::2] @ a.T[:, 1:4], i @ j),
              a, b, i, j)
    same(got[0], a.T @ b, F64)
    same(got[1], a[::2] @ a.T[:, 1:4], F32, loose=True)
    same(got[2], i @ j)


def test_matmul_with_out(backend):
    a, b = rand((4, 6), F64, 1), rand((6, 5), F64, 2)

    def fn(a, b):
        out = tg.zeros((4, 5))
        ops.matmul(a, b, out=out)
        return out
    same(run(backend, fn, a, b), a @ b)


# ---------------------------------------------------------------------------
# nn

def np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x, axis):
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("case", [((1,), -1), ((17,), -1), ((4, 33), -1), ((4, 33), 0),
                                  ((3, 5, 7), 1), ((2, 300), -1)],
                         ids=lambda c: f"{'x'.join(map(str, c[0]))}-axis{c[1]}")
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_and_log_softmax(backend, dtype, case):
    shape, axis = case
    x = rand(shape, dtype, 9, -5, 5)
    got = run(backend, lambda x: (ops.softmax(x, axis), ops.log_softmax(x, axis=axis)), x)
    same(got[0], np_softmax(x, axis).astype(dtype), dtype, loose=True)
    same(got[1], np_log_softmax(x, axis).astype(dtype), dtype, loose=True)


@pytest.mark.parametrize("shape", [(1, 1), (4, 33), (2, 3, 17), (300,)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm(backend, dtype, shape):
    x = rand(shape, dtype, 10) * 3 + 1
    w, b = rand(shape[-1:], dtype, 11), rand(shape[-1:], dtype, 12)
    got = run(backend, lambda x, w, b: (ops.layer_norm(x), ops.layer_norm(x, w, b, eps=1e-3),
                                        ops.layer_norm(x, bias=b)), x, w, b)

    def ref(x, w=None, b=None, eps=1e-5):
        y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
        y = y * (1 if w is None else w) + (0 if b is None else b)
        return y.astype(dtype)
    x64 = x.astype(F64)
    for g, w_ in zip(got, (ref(x64), ref(x64, w, b, 1e-3), ref(x64, b=b))):
        same(g, w_, dtype, loose=True)


def test_layer_norm_of_a_view(backend):
    x = rand((6, 20), F64, 13)
    got = run(backend, lambda x: ops.layer_norm(x[::2, 1:]), x)
    v = x[::2, 1:]
    same(got, (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + 1e-5))


# ---------------------------------------------------------------------------
# layout and filling

@pytest.mark.parametrize("dtype", FLOATS + [I64])
def test_transpose_copy_fill_full(backend, dtype):
    x = rand((3, 4, 5), dtype, 14)

    def fn(x):
        f = tg.empty((2, 7), dtype)
        ops.fill(f, 3)
        g = ops.full((5,), 2, dtype)
        ops.fill(g[::2], 7)
        h = ops.copy(x[:, 1:3])
        ops.copy(x[0, 0], out=h[1, 0])
        return (ops.transpose(x), ops.transpose(x, (1, 0, 2)), ops.copy(x[:, ::2, 1:]), f, g,
                h, ops.reshape(x.T, (20, 3)), ops.full_like(x, 1.5, np.float64))
    got = run(backend, fn, x)
    g = np.full(5, 2, dtype)
    g[::2] = 7
    h = x[:, 1:3].copy()
    h[1, 0] = x[0, 0]
    want = (x.T, x.transpose(1, 0, 2), x[:, ::2, 1:], np.full((2, 7), 3, dtype), g, h,
            x.T.reshape(20, 3), np.full(x.shape, 1.5))
    for a, b in zip(got, want):
        same(a, b)


# ---------------------------------------------------------------------------
# the graph the ops make

def test_ops_declare_what_they_read_and_write(monkeypatch):
    monkeypatch.setenv("TRACEGRAPH_FUSE", "0")  # each op its own kernel (passes/fusion.py)
    x, y = rand((17,), F64, 1), rand((17,), F64, 2)

    def fn(x, y):
        a = ops.exp(x)          # independent of b
        b = ops.tanh(y)
        out = tg.empty((17,))
        ops.add(a, b, out=out)
        return out
    prog = tg.compile(fn, backend="sim").trace(x, y)
    kernels = {op.name: i for i, op in enumerate(prog.ops) if op.kind == "kernel"}
    assert set(kernels) == {"exp", "tanh", "add"}
    g = prog.graph
    assert not g.has_edge(kernels["exp"], kernels["tanh"])
    assert g.has_edge(kernels["exp"], kernels["add"]) and g.has_edge(kernels["tanh"],
                                                                      kernels["add"])
    add = prog.ops[kernels["add"]]
    written = [a for a in add.accesses if a.writes]
    assert len(written) == 1 and written[0].mode == "w"  # out is written, never read
    assert all(op.location.startswith(__file__) or HERE in op.location
               for op in prog.ops if op.kind == "kernel")  # the user's lines


def test_scalar_operand_reads_no_extra_buffer():
    x = rand((17,), F64, 1)
    prog = tg.compile(lambda x: 2.0 * x + 1.0, backend="sim").trace(x)
    for op in prog.ops:
        if op.kind == "kernel":
            assert len({a.buffer for a in op.accesses if a.reads}) == 1


# ---------------------------------------------------------------------------
# errors at trace time: they name the op and the user's line

def trace_error(fn, *args):
    with pytest.raises(tg.TraceError) as info:
        tg.compile(fn, backend="sim").trace(*args)
    return str(info.value)


def test_error_bad_broadcast_names_op_and_line():
    msg = trace_error(lambda x, y: ops.add(x, y), rand((3, 4)), rand((5,)))
    assert "tg.ops.add" in msg and "(3, 4) (5,)" in msg
    assert f"{HERE}:" in msg


def test_error_operator_bad_broadcast():
    msg = trace_error(lambda x, y: x * y, rand((3, 4)), rand((3,)))
    assert "tg.ops.multiply" in msg and f"{HERE}:" in msg


def test_error_matmul_shapes():
    assert "not aligned" in trace_error(lambda a, b: a @ b, rand((3, 4)), rand((5, 6)))
    assert "batch sizes" in trace_error(lambda a, b: a @ b, rand((2, 3, 4)), rand((3, 4, 5)))
    msg = trace_error(lambda a, b: a @ b, rand((2, 2, 3, 4)), rand((4, 5)))
    assert "tg.ops.matmul" in msg and "dimensions" in msg


def test_error_unsupported_dtypes():
    msg = trace_error(lambda x: ops.exp(x), np.ones(4, np.float16))
    assert "tg.ops.exp" in msg and "float16" in msg
    msg = trace_error(lambda x: ops.negative(x), np.ones(4, np.bool_))
    assert "tg.ops.negative" in msg
    msg = trace_error(lambda x: x @ x, np.ones((2, 2), np.bool_))
    assert "tg.ops.matmul" in msg
    msg = trace_error(lambda x: ops.subtract(x, x), np.ones(4, np.bool_))
    assert "subtract" in msg


def test_error_axis_and_empty_reduction():
    assert "axis 2 is out of bounds" in trace_error(lambda x: ops.sum(x, 2), rand((3, 4)))
    assert "axis 1 is out of bounds" in trace_error(lambda x: ops.softmax(x, 1), rand((4,)))
    assert "no identity" in trace_error(lambda x: ops.max(x[:0]), rand((4,)))
    assert "axis must be an int" in trace_error(lambda x: ops.mean(x, (0, 1)), rand((3, 4)))


def test_error_out_shape_and_kind():
    def wrong_shape(x):
        ops.exp(x, out=tg.empty((3,)))
        return x
    assert "out has shape (3,)" in trace_error(wrong_shape, rand((4,)))

    def wrong_kind(x):
        ops.exp(x, out=tg.empty((4,), np.int32))
        return x
    assert "change its kind" in trace_error(wrong_kind, rand((4,)))


def test_error_other_arguments():
    assert "weight has shape (3,)" in trace_error(
        lambda x, w: ops.layer_norm(x, w), rand((2, 4)), rand((3,)))
    assert "not a permutation" in trace_error(lambda x: ops.transpose(x, (0, 0)), rand((2, 3)))
    assert "all were scalars" in trace_error(lambda x: (ops.add(1.0, 2.0), x)[1] + 0,
                                             rand((2,)))
    assert "out of bounds for int32" in trace_error(lambda x: x + 2 ** 40, np.ones(3, np.int32))
    assert "both None" in trace_error(lambda x: ops.clip(x, None, None), rand((2,)))


def test_error_host_arrays_and_outside_a_trace():
    captured = np.ones(4)
    msg = trace_error(lambda x: ops.add(x, captured), rand((4,)))
    assert "ndarray, not a traced array" in msg and "argument of the @tg.compile" in msg
    with pytest.raises(tg.TraceError, match="traced array"):
        ops.exp(np.ones(3))
