"""Varying sizes: buckets, padding, tg.length, dynamic scalars, in-place update, memory
planning and the cache, a padded argument viewing a captured array (refused), on every
backend (cuda on its CPU stand-in without a GPU)."""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
from eager import host
from numba import cuda
from small_kernels import add, iscale, scale

import tracegraph as tg
from tracegraph.errors import SignatureError
from tracegraph.passes.memory import unplanned_bytes
from small_kernels import double, total

D = 4  # features


@cuda.jit
def row_sums(x, out):
    """out[i] = sum of row i of x (every row, padding included)."""
    i = cuda.grid(1)
    if i < out.size:
        acc = 0.0
        for j in range(x.shape[1]):
            acc += x[i, j]
        out[i] = acc


@cuda.jit
def total_of_rows(x, n, out):
    """out[0] = sum of the first n rows: correct under padding because it reads n."""
    if cuda.grid(1) == 0:
        acc = 0.0
        for i in range(n):
            for j in range(x.shape[1]):
                acc += x[i, j]
        out[0] = acc


def _step(backend, **options):
    @tg.compile(backend=backend, dynamic={"x": 0}, **options)
    def step(x, w):
        h = x @ w
        out = tg.empty(x.shape[0])
        row_sums[(x.shape[0] + 7) // 8, 8](h, out)
        return h, out
    return step


def test_a_batch_sweep_runs_from_one_graph_per_bucket(backend):
    step = _step(backend, buckets=(1, 2, 4, 8))
    w = np.arange(D * 3, dtype=np.float64).reshape(D, 3) / 7
    for n in range(1, 9):
        x = np.random.default_rng(n).uniform(-1, 1, (n, D))
        h, out = step(x, w)
        assert host(h).shape == (n, 3) and host(out).shape == (n,)
        np.testing.assert_allclose(host(h), x @ w)
        np.testing.assert_allclose(host(out), (x @ w).sum(1))
    info = step.cache_info()
    assert info.graphs == 4 and sorted(info.misses) == [1, 2, 4, 8]
    assert sum(info.hits.values()) == 4  # n = 3, 5, 6, 7 reuse a bucket's graph
    assert sorted(e.bucket for e in step.compiled) == [1, 2, 4, 8]


@pytest.mark.parametrize("buckets", ["pow2", (2, 5)])
def test_above_the_largest_bucket(backend, buckets):
    step = _step(backend, buckets=buckets, max_size=5 if buckets == "pow2" else None)
    w = np.ones((D, 2))
    with pytest.raises(tg.SignatureError, match="largest bucket"):
        step(np.ones((9, D)), w)
    grows = _step(backend, buckets=buckets, max_size=5 if buckets == "pow2" else None,
                  grow=True)
    h, _ = grows(np.ones((9, D)), w)
    assert host(h).shape == (9, 2) and grows.latest.bucket == 16


def test_padding_with_a_fill_and_the_true_length(backend):
    @tg.compile(backend=backend, dynamic={"x": 0}, buckets=(8,), pad=100.0)
    def step(x):
        rows = tg.empty(x.shape[0])
        total = tg.empty(1)
        row_sums[1, 8](x, rows)
        total_of_rows[1, 1](x, tg.length(), total)
        return rows, total

    for n in (3, 8, 1):
        x = np.arange(n * D, dtype=np.float64).reshape(n, D)
        rows, total = step(x)
        np.testing.assert_array_equal(host(rows), x.sum(1))  # padded rows are cut off
        np.testing.assert_array_equal(host(total), [x.sum()])  # the kernel read n
    assert len(step.compiled) == 1


@pytest.mark.parametrize("place", ["host", "device"])
def test_a_written_dynamic_input_changes_only_its_own_rows(backend, place):
    @tg.compile(backend=backend, dynamic={"x": 0}, buckets=(4, 8))
    def step(x):
        iscale[1, 32](x, 2.0)
        return x

    for n in (3, 6, 8):
        x = np.arange(n, dtype=np.float64)
        arg = x.copy() if place == "host" else cuda.to_device(x)
        out = step(arg)
        assert out is arg  # an input handed back is the caller's own object
        np.testing.assert_array_equal(host(arg), 2 * x)


def test_dynamic_scalars_are_patched_not_baked(backend):
    @tg.compile(backend=backend, dynamic={"a": "value"})
    def step(x, a):
        out = tg.empty_like(x)
        scale[1, 8](x, a, out)
        return out

    x = np.arange(8, dtype=np.float64)
    for a in (2.0, 3.5, -1.0, 2.0, 0.0):
        np.testing.assert_array_equal(host(step(x, a)), a * x)
    assert len(step.compiled) == 1
    np.testing.assert_array_equal(host(step.replay(x, 7.0)), 7.0 * x)
    with pytest.raises(tg.SignatureError):
        step.replay(x, 3)  # an int is another signature (another kernel parameter type)


def test_a_dynamic_scalar_in_a_python_expression_is_refused(backend):
    @tg.compile(backend=backend, dynamic={"a": "value"})
    def step(x, a):
        out = tg.empty_like(x)
        scale[1, 8](x, 2 * a, out)
        return out

    with pytest.raises(tg.TraceError, match="dynamic scalar a") as e:
        step(np.ones(8), 1.0)
    assert e.value.where.startswith(__file__)


def test_warmup_builds_every_bucket_largest_first(backend):
    step = _step(backend, buckets=(1, 2, 4, 8))
    w = np.ones((D, 2))
    step.warmup(np.ones((3, D)), w)
    assert [e.bucket for e in step.compiled] == [8, 4, 2, 1]
    info = step.cache_info()
    assert info.graphs == 4 and info.instantiations + info.updates == 4
    h, out = step(np.ones((5, D)), w)
    np.testing.assert_array_equal(host(out), np.full(5, 2.0 * D))
    assert step.cache_info().hits == {8: 1}


def test_a_bounded_cache_updates_or_evicts(backend):
    step = _step(backend, buckets=(1, 2, 4, 8), max_graphs=2)
    w = np.ones((D, 2))
    for n in (1, 2, 4, 8, 1, 8):
        x = np.full((n, D), float(n))
        h, out = step(x, w)
        np.testing.assert_array_equal(host(out), np.full(n, 2.0 * D * n))
    info = step.cache_info()
    assert info.graphs == 2 and info.max_graphs == 2
    if backend == "cuda":  # same topology for every bucket: updated in place
        assert info.updates >= 3 and info.instantiations == 2
    else:
        assert info.evictions >= 3


def test_memory_planning_shares_intermediates_without_overlap_in_use(backend):
    @tg.compile(backend=backend)
    def chain(x):
        a = tg.empty_like(x)
        scale[1, 8](x, 2.0, a)
        b = tg.empty_like(x)
        scale[1, 8](a, 3.0, b)
        c = tg.empty_like(x)
        scale[1, 8](b, 0.5, c)
        d = tg.empty_like(x)
        scale[1, 8](c, 1.0, d)
        return d

    x = np.arange(8, dtype=np.float64)
    np.testing.assert_array_equal(host(chain(x)), 3.0 * x)
    p = chain.latest.program
    tg.verify(p, check_order=True)  # planned buffers that overlap are never live at once
    assert 0 < p.arena_bytes < unplanned_bytes(p)
    np.testing.assert_array_equal(host(chain(x)), 3.0 * x)


def test_parallel_branches_never_share_planned_memory(backend):
    @tg.compile(backend=backend)
    def fork(x):
        a, b = tg.empty_like(x), tg.empty_like(x)
        scale[1, 8](x, 2.0, a)   # two branches: a and b are live at once
        scale[1, 8](x, 3.0, b)
        c = tg.empty_like(x)
        scale[1, 8](a, 1.0, c)
        d = tg.empty_like(x)
        scale[1, 8](b, 1.0, d)
        e = tg.empty_like(x)
        add[1, 8](c, d, e)
        return e

    x = np.arange(8, dtype=np.float64)
    np.testing.assert_array_equal(host(fork(x)), 5.0 * x)
    p = fork.latest.program
    tg.verify(p, check_order=True)
    offsets = {b.id: b.arena_offset for b in p.buffers if b.arena_offset is not None}
    assert len(set(offsets.values())) < len(offsets)  # some sharing happened


# ---------------------------------------------------------------------------
# results whose dynamic axes are not the length itself; ops across the padding

@cuda.jit
def _differences(x, n, d):
    i = cuda.grid(1)
    if i < n - 1:
        d[i] = x[i + 1] - x[i]


@cuda.jit
def _twice(x, n, u):
    i = cuda.grid(1)
    if i < n:
        u[2 * i] = x[i]
        u[2 * i + 1] = x[i]


def test_results_of_a_times_length_plus_b_are_cut_to_the_call(backend):
    @tg.compile(backend=backend, dynamic={"x": 0}, buckets=(8, 16))
    def f(x):
        n = tg.length()
        d = tg.empty(x.shape[0] - 1, x.dtype)
        _differences[1, 32](x, n, d)
        u = tg.empty(2 * x.shape[0], x.dtype)
        _twice[1, 32](x, n, u)
        return d, u

    for n in (5, 8, 11):
        x = np.arange(float(n)) ** 2
        d, u = f(x)
        np.testing.assert_array_equal(host(d), np.diff(x))
        np.testing.assert_array_equal(host(u), np.repeat(x, 2))


def test_a_result_not_affine_in_the_length_is_refused(backend):
    @tg.compile(backend=backend, dynamic={"x": 0}, buckets=(8,))
    def f(x):
        out = tg.empty(x.shape[0] * x.shape[0], x.dtype)
        scale[1, 8](x, 1.0, out[:x.shape[0]])
        return out

    with pytest.raises(tg.TraceError, match="not a \\* L \\+ b"):
        f(np.ones(5))


@pytest.mark.parametrize("op", ["max", "mean", "softmax", "sum_along_0", "matmul_k"])
def test_ops_combining_along_the_dynamic_axis_are_refused(backend, op):
    from tracegraph import ops

    @tg.compile(backend=backend, dynamic={"x": 0}, buckets=(8,))
    def f(x):
        if op == "max":
            return ops.max(x)
        if op == "mean":
            return ops.mean(x, axis=0)
        if op == "softmax":
            return ops.softmax(x, axis=0)
        if op == "sum_along_0":
            return ops.sum(x, axis=0)
        return x.T @ x  # K is the dynamic axis

    with pytest.raises(tg.TraceError, match="follows the dynamic length") as e:
        f(-np.arange(1.0, 16.0).reshape(5, 3))
    assert e.value.where.startswith(__file__)


def test_ops_along_other_axes_are_fine_under_padding(backend):
    from tracegraph import ops

    @tg.compile(backend=backend, dynamic={"x": 0}, buckets=(8,))
    def f(x, w):
        return ops.softmax(x, axis=1), ops.max(x, axis=1), x @ w

    x = -np.arange(1.0, 16.0).reshape(5, 3)
    w = np.ones((3, 2))
    s, m, p = f(x, w)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(host(s), e / e.sum(axis=1, keepdims=True))
    np.testing.assert_array_equal(host(m), x.max(axis=1))
    np.testing.assert_array_equal(host(p), x @ w)


@cuda.jit
def _put_scalar(a, out):
    if cuda.grid(1) == 0:
        out[0] = a


def test_a_dynamic_int_scalar_keeps_its_value_past_int64(backend):
    f = tg.compile(lambda out, a: (_put_scalar[1, 1](a, out), out)[1], backend=backend,
                   dynamic={"a": "value"})
    for a in (5, 2 ** 63, 2 ** 64 - 1, -2 ** 63, 7):
        np.testing.assert_array_equal(host(f(np.zeros(1), a)), float(a))
    assert f.cache_info().graphs == 2  # int64 and uint64
    with pytest.raises(tg.SignatureError, match="64 bits"):
        f(np.zeros(1), -2 ** 63 - 1)


@pytest.mark.parametrize("place", ["host", "device"])
def test_a_zero_length_written_dynamic_argument(backend, place):
    @tg.compile(backend=backend, dynamic={"y": 0}, buckets=(1, 4))
    def f(y):
        iscale[1, 4](y, 2.0)
        return y

    for n in (0, 3, 0):
        y = np.arange(float(n))
        y = cuda.to_device(y) if place == "device" else y
        np.testing.assert_array_equal(host(f(y)), 2.0 * np.arange(float(n)))


@cuda.jit
def _bump(a):
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[i] += 1


@cuda.jit
def _copy_rows(src, dst):
    i = cuda.grid(1)
    if i < dst.shape[0]:
        dst[i] = src[i]


@pytest.mark.parametrize("place", ["device", "host", "overlapping views"])
def test_dynamic_arguments_sharing_memory_are_refused_where_padding_would_split_them(
        backend, place):
    """Padding copies each dynamic array on its own: x and y sharing memory would become
    two memories (a write through x unseen through y). At a bucket's length nothing is
    padded and the call is eager's."""
    def body(x, y, out):
        _bump[1, 64](x)
        _copy_rows[1, 64](y, out)

    f = tg.compile(body, backend=backend, dynamic={"x": 0, "y": 0, "out": 0}, buckets=(8,))

    def arguments(n):
        if place == "overlapping views":
            base = cuda.to_device(np.zeros(n + 2))
            return base[:n], base[2:n + 2], cuda.to_device(np.zeros(n))
        a = np.zeros(n) if place == "host" else cuda.to_device(np.zeros(n))
        return a, a, (np.zeros(n) if place == "host" else cuda.to_device(np.zeros(n)))

    refused = arguments(5)
    for _ in range(2):  # again with the very same arrays (the signature memo's)
        with pytest.raises(tg.SignatureError, match="sharing memory"):
            f(*refused)
    x, y, out = arguments(8)
    f(x, y, out)
    want = [1.0] * 8 if place != "overlapping views" else [1.0] * 6 + [0.0] * 2
    np.testing.assert_array_equal(host(out), want)


BUF = None


def test_a_padded_dynamic_argument_viewing_a_captured_array_is_refused(backend):
    global BUF
    BUF = cuda.to_device(np.arange(16.0))

    def step(x):
        double[1, 64](x)
        out = cuda.device_array(1)
        total[1, 1](BUF, out)
        return out

    f = tg.compile(step, backend=backend, dynamic={"x": 0}, buckets=(8, 16))
    view = BUF[:5]
    for _ in range(2):  # again with the very same view (the signature memo's)
        with pytest.raises(SignatureError, match="captures") as e:
            f(view)
        assert os.path.basename(__file__) in str(e.value)
    # at a bucket's length nothing is padded: eager's answer
    got = f(BUF[:8]).copy_to_host()
    assert got[0] == np.arange(16.0).sum() + np.arange(8.0).sum()
    # an array of its own is padded as before
    y = cuda.to_device(np.ones(5))
    f(y)
    np.testing.assert_array_equal(y.copy_to_host(), 2 * np.ones(5))


@cuda.jit
def write_rows(x, pad_seen):
    """x[i] = 2 x[i] + 1 on every row, padding too; pad_seen[0] = x's last row as read."""
    i = cuda.grid(1)
    if i == x.shape[0] - 1:
        pad_seen[0] = x[i]
    cuda.syncthreads()
    if i < x.shape[0]:
        x[i] = 2 * x[i] + 1


def test_padded_device_copies_are_reused_with_their_padding_filled_again(backend):
    """Calls below a bucket on the default stream fill one kept copy of a device argument
    again: the padding rows a run wrote are the pad value again on the next call."""
    @tg.compile(backend=backend, dynamic={"x": 0}, buckets=(8,), pad=-5.0)
    def step(x, pad_seen):
        write_rows[1, 8](x, pad_seen)
        return x

    seen = cuda.to_device(np.zeros(1))
    copies = set()
    for n in (3, 5, 3, 7):
        x = np.arange(n, dtype=np.float64)
        arg = cuda.to_device(x)
        assert step(arg, seen) is arg
        np.testing.assert_array_equal(host(arg), 2 * x + 1)
        assert host(seen)[0] == -5.0  # the padding, not what the last run wrote there
        copies |= {id(kept[0]) for kept in step._padder.pool.values()}
    assert len(copies) == 1 and len(step.compiled) == 1


def test_a_padded_call_s_result_is_not_changed_by_later_calls(backend):
    @tg.compile(backend=backend, dynamic={"x": 0}, buckets=(8,))
    def step(x):
        iscale[1, 32](x, 2.0)
        return x[1:]

    first = step(cuda.to_device(np.arange(3.0)))
    second = step(cuda.to_device(np.arange(4.0) + 10))
    np.testing.assert_array_equal(host(first), [2.0, 4.0])  # still the first call's
    np.testing.assert_array_equal(host(second), [22.0, 24.0, 26.0])


def test_a_strided_device_view_that_must_be_copied_is_refused_at_the_call(backend):
    """Padding a device argument copies its rows: a strided view says so (a NumPy view
    is padded as it is)."""
    f = tg.compile(lambda x, out: scale[1, 8](x, 2.0, out), dynamic={"x": 0, "out": 0},
                   buckets=(8,), backend=backend)
    whole = np.arange(12, dtype=np.float32)
    out = np.zeros(6, np.float32)
    f(whole[::2], out)
    np.testing.assert_array_equal(out, 2 * whole[::2])
    with pytest.raises(SignatureError, match="C-contiguous") as e:
        f(cuda.to_device(whole)[::2], cuda.to_device(out))
    assert "test_dynamic.py" in str(e.value)


def test_padded_calls_of_the_very_same_arrays_check_them_once(backend, monkeypatch):
    """The lengths, shared memory and captured arrays of a padded call are checked on the
    first call of its arrays; calls of the very same device arrays (of fixed metadata, as
    Numba's on a GPU: the signature memo's) only copy their rows. Each call gets its own
    rows and padding all the same."""
    from tracegraph import padding
    from tracegraph.signature.arguments import has_fixed_metadata
    checks = []
    for name in ("_checked_lengths", "refuse_captured_overlap"):
        real = getattr(padding, name)
        monkeypatch.setattr(padding, name,
                            lambda *a, _real=real, _name=name: (checks.append(_name),
                                                                _real(*a))[1])
    f = tg.compile(lambda x, out: row_sums[1, 64](x, out), backend=backend,
                   dynamic={"x": 0, "out": 0}, buckets=(8,))
    x, out = cuda.to_device(np.ones((5, D))), cuda.to_device(np.zeros(5))
    for k in range(4):
        x.copy_to_device(np.full((5, D), float(k)))
        f(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), np.full(5, D * float(k)))
    first = checks[:2]
    assert first == ["_checked_lengths", "refuse_captured_overlap"]
    assert len(checks) == (2 if has_fixed_metadata(x) else 8)


@dataclasses.dataclass(eq=False)
class _Pair:
    x: object
    out: object


@cuda.jit
def _add_one(x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = x[i] + 1


@pytest.mark.parametrize("change", ["other lengths", "shared", "shorter", "too long"])
def test_a_dynamic_dataclass_rebound_in_place_is_checked_again(backend, change):
    """The very same dataclass object (compared by identity) with its fields rebound
    between padded calls: its leaves are the new arrays, checked and padded again."""
    f = tg.compile(lambda s: _add_one[1, 64](s.x, s.out), backend=backend,
                   dynamic={"s": 0}, buckets=(8,))
    s = _Pair(cuda.to_device(np.zeros(5)), cuda.to_device(np.zeros(5)))
    f(s)
    f(s)
    if change == "other lengths":
        s.x = cuda.to_device(np.ones(6))
        with pytest.raises(SignatureError, match="different lengths"):
            f(s)
    elif change == "shared":
        s.x = s.out
        with pytest.raises(SignatureError, match="sharing memory"):
            f(s)
    elif change == "too long":
        s.x, s.out = cuda.to_device(np.ones(12)), cuda.to_device(np.zeros(12))
        with pytest.raises(SignatureError, match="above its largest bucket"):
            f(s)
    else:
        s.x, s.out = cuda.to_device(np.full(3, 7.0)), cuda.to_device(np.zeros(3))
        f(s)
        np.testing.assert_array_equal(host(s.out), np.full(3, 8.0))
