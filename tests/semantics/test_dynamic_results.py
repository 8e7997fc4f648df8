"""Results of a dynamic= function at a call's length below its bucket: slices that clip at
0, fixed-size slices, results indexed from the end, Python values computed from the
length (passed to a kernel, or deciding a result's structure), and lengths the function
cannot be traced at. Each is the eager answer or a
TraceError at compile time; on every backend (cuda on its CPU stand-in without a GPU)."""
from __future__ import annotations

import numpy as np
import pytest
from eager import host
from numba import cuda
from small_kernels import scale

import tracegraph as tg


def _doubled(backend, result, buckets=(8,)):
    """A dynamic function returning result(x, out), out = 2 * x."""
    def body(x):
        out = cuda.device_array_like(x)
        scale[1, 32](x, 2.0, out)
        return result(x, out)
    return tg.compile(body, backend=backend, dynamic={"x": 0}, buckets=buckets)


@pytest.mark.parametrize("place", ["host", "device"])
def test_a_slice_past_the_call_s_length_is_empty_as_eagerly(backend, place):
    """out[2:] has max(0, n - 2) rows: at n = 1 and 0 the rule's n - 2 is negative, which
    as a slice bound would count from the end (the bucket's padding rows)."""
    f = _doubled(backend, lambda x, out: (out[2:], x[1:], out[:-3]))
    for n in (8, 5, 3, 2, 1, 0):
        x = np.arange(1.0, n + 1)
        tail, rest, head = f(x.copy() if place == "host" else cuda.to_device(x))
        np.testing.assert_array_equal(host(tail), 2 * x[2:])
        np.testing.assert_array_equal(host(rest), x[1:])
        np.testing.assert_array_equal(host(head), 2 * x[:-3])


@pytest.mark.parametrize("size", ["out[:4]", "out[:min(n, 4)]"])
def test_a_fixed_size_slice_is_refused_where_the_bucket_serves_shorter_lengths(backend,
                                                                                  size):
    """out[:4] has min(4, n) rows: in bucket 8 (lengths 0 to 8) no a * n + b gives that, so
    compiling it is an error, not 4 rows of which the last is padding at n = 3."""
    def first(x, out):
        return out[:4] if size == "out[:4]" else out[:min(x.shape[0], 4)]

    f = _doubled(backend, first)
    with pytest.raises(tg.TraceError, match="fixed size") as e:
        f(np.arange(1.0, 4.0))
    assert e.value.where.startswith(__file__)
    assert "slice it after the call" in e.value.fix
    assert not f.compiled
    g = _doubled(backend, first, buckets=(4, 8))  # bucket 8 serves 5 to 8: always 4 rows
    for n in (6, 8, 5):
        x = np.arange(1.0, n + 1)
        np.testing.assert_array_equal(host(g(x)), 2 * x[:4])


@pytest.mark.parametrize("result", ["out[::-1]", "x[::-1]", "out[-3:]", "out[-1:]"])
def test_results_reversed_or_indexed_from_the_end_are_refused(backend, result):
    """In a padded call the end of an array is padding: these would hand out padding rows
    (bucket 16 serves 5 to 16, so out[-3:] has 3 rows at each of them). A bucket's graph
    serves all its lengths, so this holds at the bucket's own length too."""
    def pick(x, out):
        return {"out[::-1]": out[::-1], "x[::-1]": x[::-1], "out[-3:]": out[-3:],
                "out[-1:]": out[-1:]}[result]

    f = _doubled(backend, pick, buckets=(4, 16))
    with pytest.raises(tg.TraceError, match=r"backwards|from the end") as e:
        f(np.arange(1.0, 11.0))
    assert e.value.where.startswith(__file__)
    assert "after the call" in e.value.fix


@pytest.mark.parametrize("place", ["host", "device"])
def test_python_ints_of_the_length_are_the_call_s_own(backend, place):
    """x.shape[0], x.size and x.shape are the call's (5), not the bucket's (8); values that
    do not change with the length come back as they are."""
    f = _doubled(backend, lambda x, out: (out, x.shape[0], x.size, x.shape,
                                          2 * x.shape[0] + 1, 100 - x.size, "rows", 0.5),
                 buckets=(4, 8, 16))
    for n in (8, 5, 3, 0, 16, 9):
        x = np.arange(float(n))
        out, rows, size, shape, odd, left, tag, half = \
            f(x.copy() if place == "host" else cuda.to_device(x))
        np.testing.assert_array_equal(host(out), 2 * x)
        assert (rows, size, shape, odd, left, tag, half) == \
            (n, n, (n,), 2 * n + 1, 100 - n, "rows", 0.5)
        assert type(rows) is int and type(shape) is tuple


@pytest.mark.parametrize("value", ["1 / n", "min(n, 4)", "len(out[2:])", "n > 4"])
def test_python_values_changing_otherwise_with_the_length_are_refused(backend, value):
    def result(x, out):
        n = x.shape[0]
        return out, eval(value, {"n": n, "out": out})

    f = _doubled(backend, result)
    with pytest.raises(tg.TraceError, match="depends on the dynamic length") as e:
        f(np.arange(5.0))
    assert e.value.where.startswith(__file__)
    assert "after the call" in e.value.fix


def test_a_length_the_function_cannot_be_traced_at_raises(backend):
    """tg.empty(n - 1) fails eagerly at n = 0; bucket 1's graph (traced at n = 1) would run
    there: the call raises with the reason instead."""
    @tg.compile(backend=backend, dynamic={"x": 0}, buckets=(1, 8))
    def f(x):
        d = tg.empty(x.shape[0] - 1)
        scale[1, 8](x, 1.0, d)
        return d

    assert host(f(np.ones(1))).shape == (0,)
    with pytest.raises(tg.TraceError, match="does not trace at dynamic length 0") as e:
        f(np.ones(0))
    assert e.value.where.startswith(__file__)
    with pytest.raises((ValueError, OverflowError)):  # the simulator's, the driver's
        cuda.device_array(-1)  # eagerly


@cuda.jit
def _rows_of_two(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[0, i] = x[i]
        out[1, i] = 3 * x[i]


def test_rows_of_a_result_whose_second_axis_follows_the_length(backend):
    """buf[1] of a (2, n) array moves with the length but follows it: it is cut back."""
    @tg.compile(backend=backend, dynamic={"x": 0}, buckets=(8,))
    def f(x):
        buf = tg.empty((2, x.shape[0]))
        _rows_of_two[1, 8](x, buf)
        return buf[0], buf[1], buf[:, 1:]

    for n in (8, 3, 1, 0):
        x = np.arange(1.0, n + 1)
        first, second, rest = f(x)
        np.testing.assert_array_equal(host(first), x)
        np.testing.assert_array_equal(host(second), 3 * x)
        np.testing.assert_array_equal(host(rest), np.stack([x, 3 * x])[:, 1:])


def test_the_checks_trace_a_few_lengths_not_every_one(backend):
    """Compile cost: the bucket, two lengths above it, its two smallest lengths and the two
    around where out[3:] reaches 0, not the 65 lengths bucket 64 serves."""
    traced = []

    @tg.compile(backend=backend, dynamic={"x": 0}, buckets=(64,))
    def f(x):
        traced.append(x.shape[0])
        out = tg.empty_like(x)
        scale[1, 64](x, 2.0, out)
        return out[3:]

    np.testing.assert_array_equal(host(f(np.arange(10.0))), 2 * np.arange(3.0, 10.0))
    assert sorted(traced) == [0, 1, 3, 4, 64, 65, 66]


def test_a_python_value_from_the_bucket_s_shape_passed_to_a_kernel_is_refused(backend):
    def body(x):
        out = cuda.device_array_like(x)
        scale[1, 16](x, 1.0 / x.shape[0], out)
        return out

    f = tg.compile(body, backend=backend, dynamic={"x": 0}, buckets=(8,))
    with pytest.raises(tg.TraceError, match="follows the dynamic length"):
        f(np.arange(5.0))


def test_a_result_structure_that_follows_the_length_is_refused(backend):
    def body(x):
        out = cuda.device_array_like(x)
        scale[1, 16](x, 2.0, out)
        return {("long" if x.shape[0] > 6 else "short"): out}

    f = tg.compile(body, backend=backend, dynamic={"x": 0}, buckets=(8,))
    with pytest.raises(tg.TraceError, match="structure of"):
        f(np.arange(5.0))
