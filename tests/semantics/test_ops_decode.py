"""The ops a decode step is made of, against NumPy on both backends: gelu; linear with
bias, GELU and a residual (one cuBLASLt node where cuBLAS is the engine, matmul + add +
activation elsewhere); layer_norm and softmax with a warp or a group of warps per row
(several rows a block, and groups of two warps, forced through the launch sizes);
argmax as a row reduction (NumPy's first maximum, first NaN; one launch, or chunks and
a second launch); decode_attention over positions 0..pos with pos an int or a dynamic
scalar, appending this step's k and v for the first `rows` rows, in one block per row and
head or split over chunks of positions and combined (flash-decoding).
"""
from __future__ import annotations

import importlib
import math
import sys

import numpy as np
import pytest

import tracegraph as tg
from tracegraph import ops
from tracegraph.ops import _warp, attention, gemv, nn

argmax_module = importlib.import_module("tracegraph.ops.argmax")  # ops.argmax is the op

F32, F64 = np.float32, np.float64
ON_GPU = not tg._numba.SIMULATOR


@pytest.fixture(autouse=True, scope="module")
def _fast_simulator():
    # the simulator polls its threads at cuda.syncthreads(): a short switch interval helps
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(old)


def rand(shape, dtype=F32, seed=0, scale=1.0):
    return (scale * np.random.default_rng(seed).standard_normal(shape)).astype(dtype)


def close(got, want, dtype):
    rtol, atol = (2e-4, 2e-5) if np.dtype(dtype) == F32 else (1e-10, 1e-12)
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == dtype, (got.shape, got.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def np_gelu(z):
    return 0.5 * z * (1.0 + np.tanh(0.7978845608028654 * (z + 0.044715 * z ** 3)))


# ---------------------------------------------------------------------------
# gelu

@pytest.mark.parametrize("dtype", [F32, F64, np.int32])
def test_gelu(backend, dtype):
    x = (rand((5, 37), F64, 1, 3)).astype(dtype)
    got = tg.compile(lambda x: ops.gelu(x), backend=backend)(x)
    want = np_gelu(x.astype(F64))
    close(got, want.astype(F64 if dtype == np.int32 else dtype),
          F64 if dtype == np.int32 else dtype)


# ---------------------------------------------------------------------------
# linear: bias, GELU, residual

LINEAR_CASES = ["bias-gelu", "gelu", "residual", "bias-residual", "residual-in-place",
                "bias-relu-residual", "new-result"]


@pytest.mark.parametrize("engine", ["cublas", "kernel"])
@pytest.mark.parametrize("case", LINEAR_CASES)
def test_linear_epilogues(backend, monkeypatch, engine, case):
    monkeypatch.setenv("TRACEGRAPH_MATMUL", engine)
    if ON_GPU and engine == "cublas":
        pytest.importorskip("nvmath.bindings.cublasLt")
    m, k, n = 5, 24, 40
    x, w, b, r = rand((m, k), seed=2), rand((k, n), seed=3, scale=0.3), rand(n, seed=4), \
        rand((m, n), seed=5)
    bias = "bias" in case or case == "new-result"
    act = "gelu" if "gelu" in case else "relu" if "relu" in case else None
    residual = "residual" in case

    @tg.compile(backend=backend)
    def f(x, w, b, r, out):
        if case == "residual-in-place":  # r = r + x @ w + b
            ops.linear(x, w, b, residual=r, out=r)
            return r
        if case == "new-result":
            return ops.linear(x, w, b, activation="gelu")
        ops.linear(x, w, b if bias else None, activation=act,
                   residual=r if residual else None, out=out)
        return out

    z = x.astype(F64) @ w + (b if bias or case == "residual-in-place" else 0) + \
        (r if residual else 0)
    act = "gelu" if case == "new-result" else act
    want = np_gelu(z) if act == "gelu" else np.maximum(z, 0) if act == "relu" else z
    out = np.full((m, n), 99, F32)
    r0 = r.copy()
    got = f(x, w, b, r, out)
    close(got, want.astype(F32), F32)
    if case == "residual-in-place":
        close(r, want.astype(F32), F32)  # written back into the caller's array
        r[...] = r0
    library = [op.name for op in f.trace(x, w, b, r, out).ops if op.kind == "library"]
    assert library == (["cublaslt_linear"] if engine == "cublas" else [])


@pytest.mark.parametrize("engine", ["cublas", "kernel"])
@pytest.mark.parametrize("rows", [3, 5])
def test_linear_of_a_torch_oriented_weight_reads_it_in_place(backend, monkeypatch, engine,
                                                             rows):
    """transpose_w=True: w is (n, k), the product x @ w.T, with no copy of w (a tied
    embedding as the output layer: one product node, nothing else)."""
    monkeypatch.setenv("TRACEGRAPH_MATMUL", engine)
    if ON_GPU and engine == "cublas":
        pytest.importorskip("nvmath.bindings.cublasLt")
    x, emb = rand((rows, 16), seed=12), rand((50, 16), seed=13)
    f = tg.compile(lambda x, emb: ops.linear(x, emb, transpose_w=True), backend=backend)
    close(f(x, emb), (x.astype(F64) @ emb.T.astype(F64)).astype(F32), F32)
    kernel = "gemv_cols" if rows <= gemv.ROWS else "matmul_tiled"
    assert [op.name for op in f.trace(x, emb).ops if op.kind in ("kernel", "library")] == \
        (["cublaslt_linear"] if engine == "cublas" else [kernel])


# (rows, k, n, orientation): one block of k, k split over blocks (the last block of each
# column tile adds the partials), a tile past n, a torch-oriented w
GEMV_SHAPES = {"one-row": (1, 24, 40, "numpy"), "split-k": (1, 301, 9, "numpy"),
               "four-rows-split": (4, 133, 11, "numpy"), "torch-oriented": (2, 70, 13, "torch")}


@pytest.mark.parametrize("shape", list(GEMV_SHAPES))
@pytest.mark.parametrize("dtype", [F32, F64])
def test_linear_of_a_few_rows_is_one_gemv_kernel(backend, monkeypatch, shape, dtype):
    """At most gemv.ROWS rows: one GEMV kernel (a memset of its tickets beside it where k
    is split) with bias, residual and activation applied in it; its sums in a fixed order,
    so a replay gives the same bits (TRACEGRAPH_MATMUL=kernel: where cuBLAS is there, a
    float32 product is cuBLASLt's)."""
    monkeypatch.setenv("TRACEGRAPH_MATMUL", "kernel")
    m, k, n, orientation = GEMV_SHAPES[shape]
    torch_oriented = orientation == "torch"
    x, b, r = rand((m, k), dtype, 20), rand(n, dtype, 21), rand((m, n), dtype, 22)
    w = rand((n, k) if torch_oriented else (k, n), dtype, 23, 0.3)

    @tg.compile(backend=backend)
    def f(x, w, b, r):
        a = ops.linear(x, w, b, activation="gelu", transpose_w=torch_oriented)
        c = ops.linear(x, w, residual=r, activation="relu", transpose_w=torch_oriented)
        ops.linear(x, w, b, residual=r, out=r, transpose_w=torch_oriented)  # in place
        return a, c

    w64 = (w.T if torch_oriented else w).astype(F64)
    z = x.astype(F64) @ w64
    r0 = r.copy()
    a, c = f(x, w, b, r)
    close(a, np_gelu(z + b).astype(dtype), dtype)
    close(c, np.maximum(z + r0, 0).astype(dtype), dtype)
    close(r, (z + b + r0).astype(dtype), dtype)
    r[...] = r0
    a2, c2 = f(x, w, b, r)  # a replay: the tickets were zeroed again, the sums in one order
    assert np.array_equal(a, a2) and np.array_equal(c, c2)
    names = [op.name for op in f.trace(x, w, b, r).ops if op.kind in ("kernel", "library")]
    kernel = "gemv_cols" if torch_oriented else "gemv_rows"
    assert names == [kernel] * 3
    split = not torch_oriented and gemv.split_plan(k, n)[1] > 1
    assert shape != "split-k" or split
    memsets = [op for op in f.trace(x, w, b, r).ops if op.kind == "memset"]
    assert len(memsets) == (3 if split else 0)


def test_linear_of_more_rows_or_mixed_dtypes_is_not_a_gemv(monkeypatch):
    monkeypatch.setenv("TRACEGRAPH_MATMUL", "kernel")
    f = tg.compile(lambda x, w, b: ops.linear(x, w, b), backend="sim")
    names = lambda *a: [op.name for op in f.trace(*a).ops if op.kind == "kernel"]  # noqa: E731
    assert names(rand((5, 8)), rand((8, 3)), rand(3)) == ["matmul_tiled", "add"]
    assert names(rand((1, 8)), rand((8, 3)), rand(3, F64))[0] == "matmul_tiled"
    assert names(rand((1, 8)), rand((8, 3)), rand(3)) == ["gemv_rows"]


def test_linear_refuses_a_residual_of_another_shape():
    @tg.compile(backend="sim")
    def f(x, w, r):
        return ops.linear(x, w, residual=r)

    with pytest.raises(tg.TraceError, match=r"residual \(2, 3\) is not the"):
        f(np.ones((2, 3), F32), np.ones((3, 4), F32), np.ones((2, 3), F32))


def test_linear_refuses_an_unknown_activation():
    with pytest.raises(tg.TraceError, match="unknown activation 'tanh'"):
        tg.compile(lambda x, w: ops.linear(x, w, activation="tanh"), backend="sim")(
            np.ones((2, 3), F32), np.ones((3, 4), F32))


def test_linear_refuses_gelu_on_an_integer_result():
    with pytest.raises(tg.TraceError, match="linear: activation='gelu' on a result of dtype "
                                            "int32") as e:
        tg.compile(lambda x, w: ops.linear(x, w, activation="gelu"), backend="sim")(
            np.ones((2, 3), np.int32), np.ones((3, 4), np.int32))
    assert "into out" not in str(e.value) and "out array" not in str(e.value)  # none passed


# ---------------------------------------------------------------------------
# layer_norm and softmax: a group of threads per row

def np_layer_norm(x, w, b, eps=1e-5):
    x = x.astype(F64)
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * w + b


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


# (group, block): two warps a row, and two rows of one warp a block (the GPU's shapes; the
# simulator's warp is 32 Python threads here)
GROUPS = {"warp-pairs": (64, 64), "two-rows-a-block": (32, 64)}


@pytest.mark.parametrize("dtype_groups", [(F32, "default"), (F64, "default"),
                                          *((F32, g) for g in GROUPS)],
                         ids=lambda c: f"{np.dtype(c[0]).name}-{c[1]}")
def test_layer_norm_and_softmax_by_row_groups(backend, monkeypatch, dtype_groups):
    dtype, groups = dtype_groups
    if groups != "default" and backend == "cuda" and tg._numba.SIMULATOR:
        pytest.skip("launch shapes of the simulated kernels: the sim case runs them (on "
                    "the cuda backend's CPU stand-in they are the same kernels)")
    if groups != "default":  # layer_norm through its group kernel too, not a warp's
        group, block = GROUPS[groups]
        monkeypatch.setattr(_warp, "row_groups", lambda _n, _rows: (group, block, 2))
        monkeypatch.setattr(nn, "_warp_launch", lambda _n, _rows: None)
    x = rand((3, 70), dtype, 6, 2) + 1
    w, b = rand(70, dtype, 7), rand(70, dtype, 8)
    got = tg.compile(lambda x, w, b: (ops.layer_norm(x, w, b), ops.softmax(x),
                                      ops.softmax(x, axis=0)), backend=backend)(x, w, b)
    close(got[0], np_layer_norm(x, w, b).astype(dtype), dtype)
    close(got[1], np_softmax(x.astype(F64)).astype(dtype), dtype)
    close(got[2], np_softmax(x.astype(F64), 0).astype(dtype), dtype)


@pytest.mark.parametrize("n", [1, 33, 70, 1100])
def test_layer_norm_holds_a_row_of_up_to_32_lanes_worth_in_one_warp(backend, n):
    """Rows of at most 32 elements a lane: a warp each, in registers; longer rows: a
    group of threads that reads the row three times. Same results either way."""
    x, w, b = rand((5, n), F32, 30, 2) + 1, rand(n, F32, 31), rand(n, F32, 32)
    f = tg.compile(lambda x, w, b: (ops.layer_norm(x, w, b), ops.layer_norm(x, eps=0.1)),
                   backend=backend)
    got = f(x, w, b)
    close(got[0], np_layer_norm(x, w, b).astype(F32), F32)
    close(got[1], np_layer_norm(x, 1, 0, 0.1).astype(F32), F32)
    lanes = 8 if tg._numba.SIMULATOR else 32
    names = {op.name for op in f.trace(x, w, b).ops if op.kind == "kernel"}
    per = next(p for p in (1, 2, 4, 8, 16, 32) if p * lanes >= n) if n <= 32 * lanes else None
    assert names == ({f"layer_norm_warp{per}"} if per else {"layer_norm"})


def test_a_narrower_out_gets_the_result_computed_in_its_own_dtype(backend):
    """layer_norm, softmax, linear and matmul of float64 (or int) operands into a float32
    out= compute in float64 and then cast, as NumPy's out= does."""
    x = 1000.0 + 0.01 * rand((2, 40), F64, 40)  # a float32 x - mean would lose the digits
    xi = (10 ** 8 + np.arange(8)).reshape(1, 8)
    a = np.array([[1e8 + 1.0, 1.0, -1e8]])      # float32 products lose the 1.0s
    w = np.ones((3, 2))

    @tg.compile(backend=backend)
    def f(x, xi, a, w, o1, o2, o3, o4, o5):
        ops.layer_norm(x, out=o1)
        ops.layer_norm(xi, out=o2)
        ops.softmax(x * 100, out=o3)
        ops.linear(a, w, out=o4)
        ops.matmul(a, w, out=o5)
        return o1, o2, o3, o4, o5

    outs = [np.zeros(s, F32) for s in ((2, 40), (1, 8), (2, 40), (1, 2), (1, 2))]
    got = f(x, xi, a, w, *outs)
    close(got[0], np_layer_norm(x, 1, 0).astype(F32), F32)
    close(got[1], np_layer_norm(xi, 1, 0).astype(F32), F32)
    close(got[2], np_softmax(x * 100).astype(F32), F32)
    np.testing.assert_array_equal(got[3], [[2, 2]])
    np.testing.assert_array_equal(got[4], [[2, 2]])


def test_row_groups_give_about_four_elements_a_thread_on_a_gpu(monkeypatch):
    monkeypatch.setattr(_warp.B, "SIMULATOR", False)
    assert _warp.row_groups(768, 1) == (256, 256, 1)     # GPT-2's d_model: a block a row
    assert _warp.row_groups(256, 64) == (64, 256, 16)    # four rows a block
    assert _warp.row_groups(50, 3) == (32, 128, 1)       # a warp a row
    assert _warp.row_groups(10_000, 2) == (256, 256, 2)


# ---------------------------------------------------------------------------
# argmax

@pytest.mark.parametrize("case", ["rows", "long-rows", "one-row-chunks", "axis0", "flat",
                                  "ties-nan-inf", "int", "int32-out"])
def test_argmax(backend, monkeypatch, case):
    # the simulator's split sizes everywhere (rows of over 16 split into chunks of 4 or more)
    for name, value in (("_ONE_LAUNCH", 16), ("_MIN_CHUNK", 4), ("_TARGET_BLOCKS", 8)):
        monkeypatch.setattr(argmax_module, name, value)
    x = rand((3, 2000) if case in ("long-rows", "int32-out") else
             (1, 100) if case == "one-row-chunks" else (6, 13), F32, 9)
    if case == "ties-nan-inf":
        x[0, [3, 7]] = 10.0             # equal maxima: the first
        x[1, [2, 5]] = np.nan           # the first NaN
        x[2] = -np.inf                  # all -inf: index 0
        x[3, 12] = np.inf
    if case == "int":
        x = (x * 3).astype(np.int32)

    @tg.compile(backend=backend)
    def f(x, tokens):
        if case == "axis0":
            return ops.argmax(x, axis=0)
        if case == "flat":
            return ops.argmax(x)
        if case == "int32-out":
            ops.argmax(x, axis=-1, out=tokens)
            return tokens
        return ops.argmax(x, -1)

    tokens = np.full(x.shape[0], -1, np.int32)
    got = np.asarray(f(x, tokens))
    want = x.argmax(axis=0) if case == "axis0" else x.argmax() if case == "flat" else \
        x.argmax(-1)
    assert got.dtype == (np.int32 if case == "int32-out" else np.int64)
    np.testing.assert_array_equal(got, want)
    if case == "int32-out":
        np.testing.assert_array_equal(tokens, want)
    launches = sum(op.name.startswith("argmax") for op in f.trace(x, tokens).ops)
    assert launches == (2 if case in ("long-rows", "one-row-chunks", "int32-out", "flat") else 1)


def test_argmax_refuses_an_empty_axis():
    with pytest.raises(tg.TraceError, match="empty sequence"):
        tg.compile(lambda x: ops.argmax(x, axis=1), backend="sim")(np.ones((2, 0), F32))


# ---------------------------------------------------------------------------
# decode attention

def np_attention(q, kc, vc, pos, scale=None):
    q, kc, vc = (a.astype(F64) for a in (q, kc, vc))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = np.einsum("bhd,bhtd->bht", q, kc[:, :, :pos + 1]) * scale
    return np.einsum("bht,bhtd->bhd", np_softmax(s), vc[:, :, :pos + 1])


def caches(rows, heads, max_len, dim, dtype=F32, seed=20):
    return rand((rows, heads, max_len, dim), dtype, seed), \
        rand((rows, heads, max_len, dim), dtype, seed + 1)


# (rows, heads, max_len, dim): one chunk a row; four chunks of 4 positions (the simulator's
# smallest); a head dimension above the block's threads
SHAPES = {"one-chunk": (3, 4, 9, 8), "split": (1, 2, 16, 8), "wide-head": (2, 1, 12, 20)}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("pos", ["first", "middle", "last"])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_decode_attention_reads_positions_up_to_pos(backend, shape, pos, dtype):
    rows, heads, max_len, dim = SHAPES[shape]
    p = {"first": 0, "middle": max_len // 2 + 1, "last": max_len - 1}[pos]
    q = rand((rows, heads, dim), dtype, 10)
    kc, vc = caches(rows, heads, max_len, dim, dtype)
    kc_after = kc.copy()
    kc_after[:, :, p + 1:] = np.nan    # what must not be read
    got = tg.compile(lambda q, kc, vc: ops.decode_attention(q, kc, vc, p, scale=0.3),
                     backend=backend)(q, kc_after, vc)
    close(got, np_attention(q, kc, vc, p, 0.3).astype(dtype), dtype)


def test_decode_attention_splits_as_planned(monkeypatch):
    """Chunks of at least _MIN_CHUNK positions, as many as fill _TARGET_BLOCKS blocks."""
    monkeypatch.setattr(attention, "_MIN_CHUNK", 4)
    monkeypatch.setattr(attention, "_TARGET_BLOCKS", 8)
    assert attention.launch_plan(1, 2, 16)[1:] == (4, 4)
    assert attention.launch_plan(3, 4, 9)[1:] == (9, 1)
    assert attention.launch_plan(1, 1, 10)[1:] == (4, 3)   # the last chunk shorter
    monkeypatch.setattr(attention, "_MIN_CHUNK", 32)
    monkeypatch.setattr(attention, "_TARGET_BLOCKS", 256)
    assert attention.launch_plan(1, 12, 128)[1:] == (32, 4)   # GPT-2 at batch 1
    assert attention.launch_plan(64, 12, 128)[1:] == (128, 1)


@pytest.mark.parametrize("threads_shape", [(8, "split"), (8, "one-chunk"), (64, "split")],
                         ids=lambda c: f"{c[0]}-threads-{c[1]}")
def test_decode_attention_appends_and_patches_a_dynamic_pos(backend, monkeypatch,
                                                            threads_shape):
    """Steps at pos 0, 1, ...: each writes its k, v into the caches for the first `rows`
    rows (the last row's slot is left alone) and attends to itself; one graph for all."""
    threads, shape = threads_shape
    if threads != 8:  # two warps a block (the simulator's warp is 32 Python threads)
        monkeypatch.setattr(attention, "_THREADS", threads)
    rows, heads, max_len, dim = SHAPES[shape]
    rows += 1
    kc, vc = caches(rows, heads, max_len, dim)
    kc0 = kc.copy()
    ref_k, ref_v = kc.copy(), vc.copy()

    @tg.compile(backend=backend, dynamic={"pos": "value"})
    def step(q, k, v, kc, vc, pos):
        return ops.decode_attention(q, kc, vc, pos, k=k, v=v, rows=rows - 1)

    for p in range(4):
        q, k, v = (rand((rows, heads, dim), F32, 30 + 3 * p + j) for j in range(3))
        got = step(q, k, v, kc, vc, p)
        ref_k[:rows - 1, :, p], ref_v[:rows - 1, :, p] = k[:rows - 1], v[:rows - 1]
        np.testing.assert_array_equal(kc, ref_k)
        np.testing.assert_array_equal(vc, ref_v)
        want = np_attention(q, ref_k, ref_v, p)
        close(np.asarray(got)[:rows - 1], want[:rows - 1].astype(F32), F32)
    assert step.cache_info().graphs == 1
    np.testing.assert_array_equal(kc[rows - 1], kc0[rows - 1])  # row `rows` never wrote


def test_decode_attention_out_of_range_dynamic_pos_is_nan_and_writes_nothing(backend):
    rows, heads, max_len, dim = SHAPES["split"]
    kc, vc = caches(rows, heads, max_len, dim)
    before = kc.copy(), vc.copy()
    q = rand((rows, heads, dim), F32, 3)

    @tg.compile(backend=backend, dynamic={"pos": "value"})
    def step(q, kc, vc, pos):
        return ops.decode_attention(q, kc, vc, pos, k=q, v=q)

    close(step(q, kc, vc, 2), np_attention(q, *_appended(before, q, 2), 2).astype(F32), F32)
    kc[...], vc[...] = before
    assert np.isnan(np.asarray(step(q, kc, vc, max_len))).all()
    np.testing.assert_array_equal(kc, before[0])
    np.testing.assert_array_equal(vc, before[1])


def _appended(cache_pair, kv, pos):
    kc, vc = (c.copy() for c in cache_pair)
    kc[:, :, pos], vc[:, :, pos] = kv, kv
    return kc, vc


def test_decode_attention_in_a_bucketed_step_writes_only_real_rows(backend):
    """With dynamic rows, tg.length() keeps the padding rows of a bucket off the cache (the
    cache has the largest bucket's slots: the probe traces at lengths past it)."""
    heads, max_len, dim = 2, 8, 4
    kc, vc = caches(4, heads, max_len, dim)
    k_ref, v_ref = kc.copy(), vc.copy()

    @tg.compile(backend=backend, dynamic={"q": 0, "pos": "value"}, buckets=(2, 4))
    def step(q, kc, vc, pos):
        return ops.decode_attention(q, kc, vc, pos, k=q, v=q, rows=tg.length())

    q = rand((3, heads, dim), F32, 5)
    got = step(q, kc, vc, 1)
    k_ref[:3, :, 1], v_ref[:3, :, 1] = q, q
    np.testing.assert_array_equal(kc, k_ref)
    np.testing.assert_array_equal(vc, v_ref)
    close(got, np_attention(q, k_ref[:3], v_ref[:3], 1).astype(F32), F32)


def test_decode_attention_rows_past_the_slots_are_nan(backend):
    q = rand((3, 2, 4), F32, 6)
    kc, vc = caches(2, 2, 5, 4)
    got = np.asarray(tg.compile(lambda q, kc, vc: ops.decode_attention(q, kc, vc, 3),
                                backend=backend)(q, kc, vc))
    close(got[:2], np_attention(q[:2], kc, vc, 3).astype(F32), F32)
    assert np.isnan(got[2]).all()


def test_decode_attention_over_a_dynamic_cache_length_is_refused():
    """The op combines the cache's positions: a T that follows the dynamic length would
    attend to the padding (a pos at or past the call's T gets no NaN), so it is refused."""
    @tg.compile(dynamic={"kc": 2, "vc": 2, "pos": "value"}, buckets=(4, 8), backend="sim")
    def att(q, kc, vc, pos):
        return ops.decode_attention(q, kc, vc, pos)

    q, kc, vc = rand((1, 1, 3)), rand((1, 1, 5, 3), seed=1), rand((1, 1, 5, 3), seed=2)
    with pytest.raises(tg.TraceError, match="decode_attention combines"):
        att(q, kc, vc, 4)


@pytest.mark.parametrize("bad", ["shapes", "pos-int", "k-alone", "dtype", "out-on-cache"])
def test_decode_attention_errors(bad):
    q = np.ones((2, 3, 4), F32)
    kc = np.ones((2, 3, 6, 4), F32)

    def f(q, kc, vc):
        if bad == "shapes":
            return ops.decode_attention(q, kc[:, :2], vc[:, :2], 0)
        if bad == "pos-int":
            return ops.decode_attention(q, kc, vc, 6)
        if bad == "k-alone":
            return ops.decode_attention(q, kc, vc, 0, k=q)
        if bad == "dtype":
            return ops.decode_attention(ops.astype(q, F64), kc, vc, 0)
        return ops.decode_attention(q, kc, vc, 0, out=kc[:, :, 0])

    match = {"shapes": "do not fit", "pos-int": "pos must be an int from 0 below 6",
             "k-alone": "k and v must be given together", "dtype": "mixed dtypes",
             "out-on-cache": "out overlaps a cache"}[bad]
    with pytest.raises(tg.TraceError, match=match):
        tg.compile(f, backend="sim")(q, kc, kc.copy())


def test_decode_attention_scale_default_is_one_over_sqrt_dim(backend):
    rows, heads, max_len, dim = SHAPES["one-chunk"]
    q = rand((rows, heads, dim), F32, 40)
    kc, vc = caches(rows, heads, max_len, dim)
    got = tg.compile(lambda q, kc, vc: ops.decode_attention(q, kc, vc, 5),
                     backend=backend)(q, kc, vc)
    close(got, np_attention(q, kc, vc, 5, 1 / math.sqrt(dim)).astype(F32), F32)
