"""Which array arguments a kernel reads and writes, inferred from its Numba IR."""
from __future__ import annotations

import numba.core.compiler
import numpy as np
import pytest
from numba import cuda
from small_kernels import add, copy, iscale, scale

import tracegraph as tg
from tracegraph import _numba, ir


def _modes(kernel, *args, grid=1, block=8):
    """Trace one launch; for each argument, the access mode of its bytes ("" if untouched,
    None for scalars, a tuple for tuples)."""
    def fn(*a):
        kernel[grid, block](*a)
        return None

    p = tg.verify(tg.compile(fn).trace(*args), check_order=True)
    (op,) = [o for o in p.ops if o.kind == "kernel"]

    def mode(arg):
        if isinstance(arg, tuple):
            return tuple(mode(a) for a in arg)
        if not isinstance(arg, ir.View):
            return None
        found = [a for a in op.accesses if a.buffer == arg.buffer]
        assert all((a.start, a.stop) == arg.byte_range() for a in found)
        return "".join(m for m in "rw" if any(m in a.mode for a in found))

    return [mode(a) for a in op.data.args]


def _dev(*shape):
    return cuda.to_device(np.zeros(shape))


# ---------------------------------------------------------------------------
# stores, augmented assignment, atomics

def test_store_and_load():
    assert _modes(scale, _dev(8), 2.0, _dev(8)) == ["r", None, "w"]
    assert _modes(add, _dev(8), _dev(8), _dev(8)) == ["r", "r", "w"]
    assert _modes(copy, _dev(8), _dev(8)) == ["r", "w"]


def test_augmented_assignment_reads_and_writes():
    assert _modes(iscale, _dev(8), 2.0) == ["rw", None]


def test_metadata_only_is_untouched():
    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x.size + x.shape[0] + x.ndim

    assert _modes(k, _dev(8), _dev(8)) == ["", "w"]


def test_atomics_read_and_write_their_array():
    @cuda.jit
    def k(x, total, best):
        i = cuda.grid(1)
        if i < x.size:
            cuda.atomic.add(total, 0, x[i])
            cuda.atomic.max(best, (i, 0), x[i])

    assert _modes(k, _dev(8), _dev(1), _dev(8, 2)) == ["r", "rw", "rw"]


def test_store_in_a_loop():
    @cuda.jit
    def k(x, out, n):
        for j in range(n):
            out[j] += x[j]

    assert _modes(k, _dev(8), _dev(8), 8) == ["r", "rw", None]


# ---------------------------------------------------------------------------
# aliases and views inside the kernel

def test_alias_and_slice_inside_kernel():
    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        v = out
        w = v[2:]
        if i < w.size:
            w[i] = x[i]

    assert _modes(k, _dev(8), _dev(8)) == ["r", "w"]


def test_alias_through_branches():
    @cuda.jit
    def k(a, b, flag):
        i = cuda.grid(1)
        if flag:
            t = a
        else:
            t = b
        if i < t.size:
            t[i] = 1.0

    assert _modes(k, _dev(8), _dev(8), True) == ["w", "w", None]


def test_rows_of_2d_arrays():
    @cuda.jit
    def k(a, b, c):
        i, j = cuda.grid(2)
        if i < a.shape[0] and j < a.shape[1]:
            row = a[i]
            row[j] = b[i][j] + c[i, j]

    assert _modes(k, _dev(4, 4), _dev(4, 4), _dev(4, 4), grid=(1, 1), block=(4, 4)) \
        == ["w", "r", "r"]


def test_row_loop_over_2d_array():
    @cuda.jit
    def k(a, b):
        for row in a:
            row[0] = b[0]

    ma, mb = _modes(k, _dev(4, 4), _dev(4), block=1)
    assert "w" in ma and mb == "r"  # iterating may count as a read: conservative


# ---------------------------------------------------------------------------
# device functions

@cuda.jit(device=True)
def _set_one(a, i):
    a[i] = 1.0


@cuda.jit(device=True)
def _get(a, i):
    return a[i]


@cuda.jit(device=True)
def _nested(a, b, i):
    _set_one(a, i)
    return _get(b, i) + 1.0


def test_device_function_seen_through():
    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        if i < out.size:
            _set_one(out, i)

    assert _modes(k, _dev(8), _dev(8)) == ["", "w"]


def test_nested_device_functions_seen_through():
    @cuda.jit
    def k(x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            o = _nested(out, x, i)
            y[i] = o

    modes = _modes(k, _dev(8), _dev(8), _dev(8))
    assert modes[1] == "w"
    assert "r" in modes[0] and "w" not in modes[0]   # only read by _get
    assert "w" in modes[2]                           # written by _set_one


def test_device_function_called_with_keywords_seen_through():
    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        if i < out.size:
            _set_one(i=i, a=out)

    assert _modes(k, _dev(8), _dev(8)) == ["", "w"]


def test_device_function_called_with_a_skipped_parameter_is_conservative():
    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        if i < out.size:
            _set_one(out, *(i,))

    assert _modes(k, _dev(8), _dev(8))[1] == "rw"


def test_unknown_call_is_read_and_write():
    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        if i < out.size:
            y = x.reshape(x.size)  # a method call the analysis does not follow
            out[i] = y[i]

    assert _modes(k, _dev(8), _dev(8)) == ["rw", "w"]


def test_inference_failure_assumes_read_and_write(monkeypatch):
    @cuda.jit
    def k(x, out, a):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i]

    def broken(func):
        raise RuntimeError("no IR today")

    monkeypatch.setattr(numba.core.compiler, "run_frontend", broken)
    assert _modes(k, _dev(8), _dev(8), 1.0) == ["rw", "rw", None]


# ---------------------------------------------------------------------------
# tuple parameters

def test_tuple_parameter_read():
    @cuda.jit
    def k(t, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = t[0][i] + t[1][i]

    assert _modes(k, (_dev(8), _dev(8)), _dev(8)) == [("r", "r"), "w"]


def test_tuple_parameter_written_covers_every_member():
    @cuda.jit
    def k(t, x):
        i = cuda.grid(1)
        if i < x.size:
            t[0][i] = x[i]

    (m0, m1), mx = _modes(k, (_dev(8), _dev(8)), _dev(8))
    assert "w" in m0 and "w" in m1 and mx == "r"


def test_tuple_with_scalars():
    @cuda.jit
    def k(t, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = t[0][i] * t[1]

    assert _modes(k, (_dev(8), 3.0), _dev(8)) == [("r", None), "w"]


# ---------------------------------------------------------------------------
# tg.access

def test_access_override_by_name_and_index():
    @cuda.jit
    def k(x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + y[i]

    assert tg.access(k, reads=["out"], writes=[0, "out"]) is k
    assert _modes(k, _dev(8), _dev(8), _dev(8)) == ["w", "r", "rw"]  # y: in neither: read


def test_access_rejects_non_kernel_and_unknown_parameter():
    @cuda.jit
    def k(x):
        x[0] = 1.0

    with pytest.raises(tg.TraceError, match=r"expects a @cuda.jit kernel"):
        tg.access(lambda x: x, writes=["x"])
    with pytest.raises(tg.TraceError, match="has no parameter 'y'") as e:
        tg.access(k, writes=["y"])
    assert "['x']" in e.value.fix
    with pytest.raises(tg.TraceError, match="has no parameter 3"):
        tg.access(k, reads=[3])


def test_access_takes_one_name_as_a_string_and_none_as_nothing():
    """writes="xy" is parameter xy, not x and y (which lost the edge to xy's reader)."""
    @cuda.jit
    def prod(x, y, xy):
        i = cuda.grid(1)
        if i < xy.size:
            xy[i] = x[i] * y[i]

    tg.access(prod, reads=("x", "y"), writes="xy")
    assert _modes(prod, _dev(8), _dev(8), _dev(8)) == ["r", "r", "w"]
    tg.access(prod, reads=None, writes=2)
    assert _modes(prod, _dev(8), _dev(8), _dev(8)) == ["r", "r", "w"]
    with pytest.raises(tg.TraceError, match="has no parameter 'src'"):
        tg.access(prod, reads="src")
    with pytest.raises(tg.TraceError, match="takes parameter names or positions"):
        tg.access(prod, writes=2.0)


def test_a_relaunch_with_the_same_arguments_follows_a_declaration_changed_between():
    """The tracer reuses what a launch's parameters touch for a relaunch with the same
    arguments, but not across a tg.access made between the two."""
    @cuda.jit
    def k(x, y):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = x[i]

    def fn(x, y):
        k[1, 8](x, y)
        tg.access(k, reads=["x", "y"], writes=[])  # a (wrong) declaration, made mid-trace
        k[1, 8](x, y)

    ops = [o for o in tg.compile(fn).trace(_dev(8), _dev(8)).ops if o.kind == "kernel"]
    assert [sorted(a.mode for a in o.accesses) for o in ops] == [["r", "w"], ["r", "r"]]


# ---------------------------------------------------------------------------
# caching

def test_inference_is_cached_per_kernel_and_ranks(monkeypatch):
    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i]

    calls = []
    real = numba.core.compiler.run_frontend

    def counting(func, *a, **kw):
        calls.append(func)
        return real(func, *a, **kw)

    monkeypatch.setattr(numba.core.compiler, "run_frontend", counting)
    assert _numba.infer_param_access(k, (1, 1)) == ("r", "w")
    assert _numba.infer_param_access(k, (1, 1)) == ("r", "w")
    assert len(calls) == 1
    _modes(k, _dev(8), _dev(8))
    _modes(k, _dev(8), _dev(8))
    assert len(calls) == 1          # tracing reuses it
    _numba.infer_param_access(k, (2, 2))
    assert len(calls) == 2          # other ranks: analysed again


@cuda.jit(device=True)
def _tail(a):
    return a[1:]


def test_a_name_rebound_to_a_view_of_itself_is_followed():
    """`v = v[1:]`, `v = tail(v)`, `s = s + v[i]`: the walk updated a set it was reading
    (the analysis failed and every argument counted as read and written)."""
    @cuda.jit
    def k(x, out):
        v = x[1:]
        v = v[1:]
        v = _tail(v)
        s = 0.0
        for i in range(v.size):
            s = s + v[i]
        out[0] = s

    assert _modes(k, _dev(8), _dev(8)) == ["r", "w"]


def test_a_ufunc_given_an_array_counts_it_read_and_written():
    """np.negative(a, out) could store to `out` (Numba's CUDA target refuses ufuncs on
    arrays today; on scalars a ufunc only reads)."""
    @cuda.jit
    def k(a, out):
        np.negative(a, out)

    @cuda.jit
    def scalar(a, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = np.negative(a[i])

    assert _modes(k, _dev(8), _dev(8)) == ["rw", "rw"]
    assert _modes(scalar, _dev(8), _dev(8)) == ["r", "w"]
