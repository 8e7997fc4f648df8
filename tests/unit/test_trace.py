"""Tracing: every launch is recorded in order, nothing executes, arguments and results are
bound to buffers and views, and tracing errors name the user's file:line."""
from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest
from numba import cuda
from small_kernels import add, boom, copy, fill, iscale, scale

import tracegraph as tg
from tracegraph import pytree, _numba, ir

HERE = os.path.basename(__file__)
F8 = np.dtype(np.float64)


def _line() -> int:
    """The line number of the caller's next line."""
    return sys._getframe(1).f_lineno + 1


def _kernels(program: tg.Program) -> list[ir.Op]:
    return [op for op in program.ops if op.kind == "kernel"]


def _check(program: tg.Program) -> tg.Program:
    return tg.verify(program, check_order=True)


def _dev(n=16, dtype=np.float64):
    return cuda.to_device(np.arange(n, dtype=dtype))


# ---------------------------------------------------------------------------
# launches are recorded, in order, and nothing runs

def test_every_launch_recorded_in_order_with_locations():
    lines = []

    @tg.compile
    def f(x):
        u = tg.empty_like(x)
        lines.append(_line())
        scale[1, 16](x, 2.0, u)
        lines.append(_line())
        iscale[2, 8](u, 3.0)
        lines.append(_line())
        add[(1,), (16, 1)](x, u, u)
        lines.append(_line())
        scale[1, 16](u, 0.5, x)
        return u

    p = _check(f.trace(_dev()))
    ks = _kernels(p)
    assert [k.name for k in ks] == ["scale", "iscale", "add", "scale"]
    assert [k.data.griddim for k in ks] == [(1, 1, 1), (2, 1, 1), (1, 1, 1), (1, 1, 1)]
    assert [k.data.blockdim for k in ks] == [(16, 1, 1), (8, 1, 1), (16, 1, 1), (16, 1, 1)]
    assert [k.data.kernel for k in ks] == [scale, iscale, add, scale]
    assert [k.location for k in ks] == [f"{__file__}:{n}" for n in lines]
    # program order is node order
    assert [p.graph.nodes[i]["op"] for i in range(len(p.ops))] == list(p.ops)


def test_nothing_executes_while_tracing():
    x = np.arange(16.0)
    captured = _dev()

    @tg.compile
    def f(x):
        boom[1, 16](x)          # would raise if it ran
        fill[1, 16](captured, 7.0)  # would change the captured array if it ran
        fill[1, 16](x, 7.0)
        return x

    p = _check(f.trace(x))
    f.lower(x)
    assert [k.name for k in _kernels(p)] == ["boom", "fill", "fill"]
    np.testing.assert_array_equal(x, np.arange(16.0))
    np.testing.assert_array_equal(captured.copy_to_host(), np.arange(16.0))


def test_dims_3d_and_stream_and_dynamic_shared_memory():
    stream = cuda.stream()

    @tg.compile
    def f(x):
        iscale[(1, 2, 1), (4, 2, 2), stream, 128](x, 2.0)
        iscale[1, 16, 0, 64](x, 2.0)
        return x

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the ignored stream may be warned about
        p = _check(f.trace(_dev()))
    ks = _kernels(p)
    assert len(ks) == 2
    assert ks[0].data.griddim == (1, 2, 1) and ks[0].data.blockdim == (4, 2, 2)
    assert ks[0].data.sharedmem == 128 and ks[1].data.sharedmem == 64


def test_dynamic_shared_memory_is_per_launch():
    @tg.compile
    def f(x):
        iscale[1, 16, 0, 64](x, 2.0)
        iscale[1, 16](x, 2.0)
        return x

    assert [k.data.sharedmem for k in _kernels(f.trace(_dev()))] == [64, 0]


def test_forall_is_recorded_and_covers_every_task():
    @tg.compile
    def f(x):
        iscale.forall(20)(x, 2.0)
        return x

    (k,) = _kernels(_check(f.trace(_dev(20))))
    assert k.name == "iscale"
    threads = np.prod(k.data.griddim) * np.prod(k.data.blockdim)
    assert threads >= 20
    assert k.data.blockdim[0] <= 1024


def test_forall_of_zero_tasks_records_nothing():
    @tg.compile
    def f(x):
        iscale.forall(0)(x, 2.0)
        iscale[1, 16](x, 2.0)
        return x

    assert [k.name for k in _kernels(f.trace(_dev()))] == ["iscale"]


# ---------------------------------------------------------------------------
# arguments

def test_inputs_temps_and_views_become_views_of_buffers():
    @tg.compile
    def f(x):
        e = tg.empty((4, 8), np.float32)
        z = tg.zeros(16)
        copy[1, 16](x[2:10], z[::2])
        fill[1, 16](e[1, ::-2], np.float32(1))
        fill[1, 16](e[:, 3], np.float32(2))
        return z, e

    x = _dev(32)
    p = _check(f.trace(x))
    xin = p.inputs[0]
    assert xin.kind == "array" and xin.placement == "device"
    assert p.buffers[xin.buffer].kind == ir.DEVICE_INPUT
    memsets = [op for op in p.ops if op.kind == "memset"]
    assert len(memsets) == 1 and memsets[0].data.value == 0
    c, f1, f2 = _kernels(p)[:3]
    src, dst = c.data.args
    assert src == ir.View(xin.buffer, 16, (8,), (8,), F8)
    assert p.buffers[dst.buffer].kind == ir.TEMP and p.buffers[dst.buffer].nbytes == 128
    assert (dst.offset, dst.shape, dst.strides) == (0, (8,), (16,))
    assert memsets[0].accesses[0].buffer == dst.buffer
    # e[1, ::-2] of a (4, 8) float32 array: elements [1, 7], [1, 5], [1, 3], [1, 1]
    v = f1.data.args[0]
    assert (v.offset, v.shape, v.strides, v.dtype) == ((8 + 7) * 4, (4,), (-8,), np.float32)
    ref = np.zeros((4, 8), np.float32)
    assert v.byte_range() == _np_range(ref, ref[1, ::-2])
    w = f2.data.args[0]
    assert w.shape == (4,) and w.strides == (32,) and w.offset == 12
    assert f1.data.args[1] == np.float32(1) and type(f1.data.args[1]) is np.float32


def _np_range(base, view):
    start = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    lo = start + sum(min(0, (n - 1) * s) for n, s in zip(view.shape, view.strides))
    hi = start + sum(max(0, (n - 1) * s) for n, s in zip(view.shape, view.strides))
    return (lo, hi + view.itemsize)


def test_view_indexing_matches_numpy():
    keys = [np.s_[1:7:2, ::-1], np.s_[..., 3], np.s_[None, 2], np.s_[-1, 1:], np.s_[::-2, -3]]
    got = []

    @tg.compile
    def f(x):
        for k in keys:
            got.append(x[k])
        fill[1, 16](x, 1.0)
        return x

    host = np.zeros((8, 6))
    f.trace(cuda.to_device(host))
    for k, a in zip(keys, got):
        ref = host[k]
        assert a.shape == ref.shape and a.strides == ref.strides and a.dtype == ref.dtype, k
        off = ref.__array_interface__["data"][0] - host.__array_interface__["data"][0]
        assert a._view.offset == off, k


def test_reshape_is_a_view_and_transpose_a_copy():
    """As Numba's device arrays: a transposed array is a new one (eager Numba on a GPU
    launches a transpose kernel), so a store to it does not reach x."""
    got = {}

    @tg.compile
    def f(x):
        got["r"] = x.reshape(4, -1)
        got["rt"] = x.reshape((4, 4)).T
        fill[1, 16](got["r"][:, 1], 1.0)
        got["bad"] = x[::2]
        with pytest.raises(tg.TraceError, match="reshape of a non-contiguous"):
            got["bad"].reshape(2, 4)
        with pytest.raises(tg.TraceError, match="cannot reshape 16 elements"):
            x.reshape(5, 3)
        return x

    host = np.zeros(16)
    p = _check(f.trace(cuda.to_device(host)))
    assert got["r"].shape == (4, 4) and got["r"].strides == (32, 8)
    assert got["rt"].shape == (4, 4) and got["rt"].strides == (32, 8)
    assert p.buffers[got["rt"]._view.buffer].kind == ir.TEMP
    v = _kernels(p)[-1].data.args[0]
    assert (v.offset, v.shape, v.strides) == (8, (4,), (32,))
    assert (got["r"].ndim, got["r"].size, got["r"].nbytes, len(got["r"])) == (2, 16, 128, 4)


def test_scalar_and_tuple_arguments_kept_by_value():
    @tg.compile
    def f(x, n, a):
        u = tg.empty(16)
        fill[1, 16](u, a)
        fill[1, 16](u, 3)
        fill[1, 16](u, np.float32(0.5))
        fill[1, 16](u, True)
        copy[1, 16]((x, u), (u, n))
        return u

    x = _dev()
    p = _check(f.trace(x, 5, 2.5))
    ks = _kernels(p)
    vals = [k.data.args[1] for k in ks[:4]]
    assert vals == [2.5, 3, np.float32(0.5), True]
    assert [type(v) for v in vals] == [float, int, np.float32, bool]
    (src, dst) = ks[4].data.args
    assert isinstance(src, tuple) and all(isinstance(v, ir.View) for v in src)
    assert isinstance(dst, tuple) and isinstance(dst[0], ir.View) and dst[1] == 5
    # both arrays of the read tuple are accessed
    assert {a.buffer for a in ks[4].accesses} == {src[0].buffer, src[1].buffer}
    assert [i.kind for i in p.inputs] == ["array", "static", "static"]
    assert [i.value for i in p.inputs[1:]] == [5, 2.5]


def test_numpy_input_is_copied_in_at_the_root():
    @tg.compile
    def f(x):
        iscale[1, 16](x, 2.0)
        return x

    p = _check(f.trace(np.arange(16.0)))
    inp = p.inputs[0]
    assert inp.placement == "host" and inp.written
    assert p.buffers[inp.staging].kind == ir.STAGING
    assert p.buffers[inp.buffer].kind == ir.HOST_INPUT
    copy_in = p.ops[0]
    assert copy_in.kind == "memcpy" and copy_in.data.role == "input"
    assert copy_in.data.dst.buffer == inp.buffer and copy_in.data.src.buffer == inp.staging
    assert p.ops[-1].kind == "memcpy" and p.ops[-1].data.role == "write-back"


def test_captured_device_array_is_an_external_buffer():
    captured = _dev()

    @tg.compile
    def f(x):
        add[1, 16](x, captured, x)
        add[1, 16](x, captured, x)
        return x

    p = _check(f.trace(_dev()))
    ext = [b for b in p.buffers if b.kind == ir.EXTERNAL]
    assert len(ext) == 1 and ext[0].external is captured  # captured once, kept alive
    ks = _kernels(p)
    assert ks[0].data.args[1].buffer == ks[1].data.args[1].buffer == ext[0].id


def test_inputs_sharing_memory_share_a_buffer():
    @tg.compile
    def f(a, b):
        copy[1, 16](a, b)
        return b

    base = _dev(32)
    p = _check(f.trace(base[:16], base[8:24]))
    a, b = p.inputs
    assert a.buffer == b.buffer
    assert b.view.offset - a.view.offset == 64
    assert p.graph.number_of_nodes() == 1
    q = _check(f.trace(base[:16], base[16:]))
    assert q.inputs[0].buffer != q.inputs[1].buffer


# ---------------------------------------------------------------------------
# results

def _traced_result(result_fn):
    @tg.compile
    def f(x):
        u = tg.empty_like(x)
        scale[1, 16](x, 2.0, u)
        return result_fn(x, u)
    return _check(f.trace(np.arange(16.0)))


def test_returns_one_array():
    p = _traced_result(lambda x, u: u)
    assert p.output_tree.is_leaf()
    (out,) = p.outputs
    assert out.kind == "host" and p.buffers[out.view.buffer].kind == ir.STAGING
    assert p.ops[-1].kind == "memcpy" and p.ops[-1].data.role == "output"


def test_returns_containers_and_static_values():
    p = _traced_result(lambda x, u: (u, [x, {"k": u[4:]}], 7))
    assert p.output_tree == pytree.structure((0, [0, {"k": 0}], 0))
    kinds = [o.kind for o in p.outputs]
    assert kinds == ["host", "input", "host", "static"]
    assert p.outputs[3].value == 7
    assert p.outputs[2].view.shape == (12,)


def test_returns_input_modified_in_place():
    @tg.compile
    def f(x):
        iscale[1, 16](x, 2.0)
        return x

    p = _check(f.trace(_dev()))
    assert [o.kind for o in p.outputs] == ["input"] and p.outputs[0].input_index == 0
    assert p.inputs[0].written
    q = _check(f.trace(np.arange(16.0)))
    assert q.outputs[0].kind == "input" and q.inputs[0].written


def test_device_inputs_give_device_results():
    p = _traced_result(lambda x, u: u)
    assert not p.device_mode

    @tg.compile
    def f(x):
        u = tg.empty_like(x)
        scale[1, 16](x, 2.0, u)
        return u

    q = _check(f.trace(_dev()))
    assert q.device_mode and q.outputs[0].kind == "device"


# ---------------------------------------------------------------------------
# errors name the fix and the user's file:line

def _raises_at(fn, arg, line, match):
    with pytest.raises(tg.TraceError, match=match) as e:
        fn.trace(arg)
    assert f"{HERE}:{line}" in str(e.value), str(e.value)
    assert e.value.fix
    return e.value


@pytest.mark.parametrize("read, what", [
    (lambda u: np.asarray(u), "np.asarray"),
    (lambda u: float(u), "float"),
    (lambda u: bool(u), "control flow"),
    (lambda u: u.copy_to_host(), "copy_to_host"),
    (lambda u: int(u[0]), "int"),
    (lambda u: np.sum(u), "np.asarray"),
])
def test_reading_a_traced_array_on_the_host(read, what):
    @tg.compile
    def f(x):
        u = tg.empty_like(x)
        scale[1, 16](x, 2.0, u)
        read(u)
        return u

    with pytest.raises(tg.TraceError, match=what) as e:
        f.trace(np.arange(16.0))
    # the user's line that read the array (the lambda), not a line inside NumPy
    assert e.value.where == f"{__file__}:{read.__code__.co_firstlineno}"
    assert "return the array" in e.value.fix or "branch inside a kernel" in e.value.fix


def test_if_on_a_traced_array_points_at_the_if():
    lines = []

    @tg.compile
    def f(x):
        lines.append(_line())
        if x:
            pass
        iscale[1, 16](x, 2.0)
        return x

    with pytest.raises(tg.TraceError, match="control flow") as e:
        f.trace(np.arange(16.0))
    assert e.value.where == f"{__file__}:{lines[0]}"


def test_host_numpy_array_passed_to_a_kernel():
    lines = []

    @tg.compile
    def f(x):
        u = tg.empty_like(x)
        lines.append(_line())
        add[1, 16](x, np.ones(16), u)
        return u

    with pytest.raises(tg.TraceError, match="argument 1 of add is a host NumPy array") as e:
        f.trace(np.arange(16.0))
    assert e.value.where == f"{__file__}:{lines[0]}"
    assert "cuda.to_device" in e.value.fix


def test_debug_kernel_is_refused():
    @cuda.jit(debug=True, opt=False)
    def checked(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = 1.0

    lines = []

    @tg.compile
    def f(x):
        lines.append(_line())
        checked[1, 16](x)
        return x

    with pytest.raises(tg.TraceError, match="checked was compiled with debug=True") as e:
        f.trace(np.arange(16.0))
    assert e.value.where == f"{__file__}:{lines[0]}"
    assert "debug=False" in e.value.fix


@pytest.mark.parametrize("bad", ["a string", [1.0], None, {"a": 1}, object()])
def test_unsupported_argument_type(bad):
    lines = []

    @tg.compile
    def f(x):
        lines.append(_line())
        fill[1, 16](x, bad)
        return x

    with pytest.raises(tg.TraceError, match=f"argument 1 of fill has type "
                                            f"{type(bad).__name__}") as e:
        f.trace(np.arange(16.0))
    assert e.value.where == f"{__file__}:{lines[0]}"


def test_unsupported_type_inside_a_tuple():
    @tg.compile
    def f(x):
        copy[1, 16]((x, "s"), x)
        return x

    with pytest.raises(tg.TraceError, match="argument 0 of copy has type str"):
        f.trace(np.arange(16.0))


def test_function_that_launches_nothing():
    line = _line()
    def nothing(x):  # noqa: E306
        tg.empty_like(x)
        return x

    f = tg.compile(nothing)
    with pytest.raises(tg.TraceError, match="launched nothing") as e:
        f.trace(np.arange(16.0))
    assert e.value.where == f"{__file__}:{line}"


def test_only_zeros_is_still_launching_something():
    # a memset is graph work: a function that only zero-fills is not empty
    @tg.compile
    def f(x):
        return tg.zeros(8)

    p = _check(f.trace(np.arange(4.0)))
    assert [op.kind for op in p.ops].count("memset") == 1


def test_tg_empty_outside_a_traced_function():
    line = _line() + 1
    with pytest.raises(tg.TraceError, match="only meaningful inside") as e:
        tg.empty(4)
    assert e.value.where == f"{__file__}:{line}"


def test_traced_array_from_another_trace():
    kept = []

    @tg.compile
    def f(x):
        u = tg.empty_like(x)
        kept.append(u)
        scale[1, 16](x, 2.0, kept[0])
        return u

    f.trace(np.arange(16.0))
    with pytest.raises(tg.TraceError, match="another trace"):
        f.trace(np.arange(16.0))


def test_tracer_is_released_after_an_error():
    @tg.compile
    def bad(x):
        float(x)

    with pytest.raises(tg.TraceError):
        bad.trace(np.arange(4.0))
    assert _numba.current_tracer() is None
    with pytest.raises(tg.TraceError, match="only meaningful inside"):
        tg.empty(4)
