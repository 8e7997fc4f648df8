"""The public API: signatures, __call__ / replay, placement of results, in-place inputs,
a compiled function called inside another's trace (inlined), a compiled method."""
from __future__ import annotations

import numpy as np
import pytest
from eager import host
from numba import cuda
from small_kernels import add, copy, iadd, iscale, scale

import tracegraph as tg


def _is_device(a) -> bool:
    return not isinstance(a, np.ndarray) and hasattr(a, "copy_to_host")


def _host(a) -> np.ndarray:
    return a.copy_to_host() if _is_device(a) else np.asarray(a)


class Counted:
    """A traced function body that counts how often it is traced (it only runs then)."""

    def __init__(self):
        self.traces = 0

    def __call__(self, x, a):
        self.traces += 1
        out = tg.empty_like(x)
        scale[1, 16](x, a, out)
        return out


# ---------------------------------------------------------------------------
# one graph per signature

def test_one_graph_per_signature(backend):
    body = Counted()
    f = tg.compile(body, backend=backend)
    x = np.arange(16.0)
    np.testing.assert_allclose(f(x, 2.0), 2 * x)
    np.testing.assert_allclose(f(x + 1, 2.0), 2 * (x + 1))         # same signature: replay
    assert body.traces == 1 and len(f.compiled) == 1
    cases = [
        (np.arange(8.0), 2.0),                  # shape
        (np.arange(16, dtype=np.float32), 2.0),  # dtype
        (np.arange(32.0)[::2], 2.0),            # strides
        (cuda.to_device(x), 2.0),               # placement
        (x, 3.0),                               # Python scalar value
        (x, 2),                                 # Python scalar type
    ]
    for i, (arg, a) in enumerate(cases):
        out = f(arg, a)
        assert body.traces == 2 + i, f"case {i} did not trace"
        np.testing.assert_allclose(_host(out), a * _host(arg))
        assert out.dtype == _host(arg).dtype
    assert len(f.compiled) == 1 + len(cases)
    for arg, a in cases:  # all of them replay now
        np.testing.assert_allclose(_host(f.replay(arg, a)), a * _host(arg))
    assert body.traces == 1 + len(cases)


def test_numpy_scalars_are_part_of_the_signature_by_value(backend):
    body = Counted()
    f = tg.compile(body, backend=backend)
    x = np.arange(16, dtype=np.float32)
    np.testing.assert_allclose(f(x, np.float32(2)), 2 * x)
    np.testing.assert_allclose(f(x, np.float32(2)), 2 * x)
    np.testing.assert_allclose(f(x, np.float32(4)), 4 * x)
    assert body.traces == 2


def test_float_scalars_are_keyed_exactly(backend):
    body = Counted()
    f = tg.compile(body, backend=backend)
    x = np.ones(16)
    assert not np.signbit(f(x, 0.0)).any()
    assert np.signbit(f(x, -0.0)).all()      # -0.0 == 0.0, but it is another graph
    assert body.traces == 2
    assert np.isnan(f(x, float("nan"))).all()
    assert np.isnan(f(x, float("nan"))).all()  # nan != nan, but it is the same graph
    assert body.traces == 3
    with pytest.raises(tg.SignatureError, match=r"argument a: expected the value 0.0"):
        f.replay(x, 1.0)


def test_replay_never_traces_and_names_the_argument(backend):
    body = Counted()
    f = tg.compile(body, backend=backend)
    x = np.arange(16.0)
    with pytest.raises(tg.SignatureError, match="before anything was compiled"):
        f.replay(x, 2.0)
    f(x, 2.0)
    with pytest.raises(tg.SignatureError) as e:
        f.replay(np.arange(8.0), 2.0)
    msg = str(e.value)
    assert "argument x" in msg and "float64[16] on host" in msg and "float64[8] on host" in msg
    assert "test_api.py" in e.value.where
    with pytest.raises(tg.SignatureError, match=r"argument x: expected float64\[16\] on host, "
                                                r"got int32\[16\] on host"):
        f.replay(np.arange(16, dtype=np.int32), 2.0)
    with pytest.raises(tg.SignatureError, match=r"argument x: expected float64\[16\] on host, "
                                                r"got float64\[16\] on device"):
        f.replay(cuda.to_device(x), 2.0)
    with pytest.raises(tg.SignatureError, match=r"argument a: expected the value 2.0"):
        f.replay(x, 5.0)
    with pytest.raises(tg.SignatureError,
                       match=r"argument x: expected strides \(8,\), got \(16,\)"):
        f.replay(np.arange(32.0)[::2], 2.0)
    assert body.traces == 1


def test_call_with_wrong_arity_is_a_signature_error(backend):
    f = tg.compile(Counted(), backend=backend)
    with pytest.raises(tg.SignatureError, match="do not match its parameters"):
        f(np.arange(16.0))


# ---------------------------------------------------------------------------
# placement of results

def test_numpy_in_numpy_out(backend):
    f = tg.compile(Counted(), backend=backend)
    out = f(np.arange(16.0), 2.0)
    assert isinstance(out, np.ndarray)


def test_device_in_device_out(backend):
    f = tg.compile(Counted(), backend=backend)
    x = np.arange(16.0)
    out = f(cuda.to_device(x), 2.0)
    assert _is_device(out)
    np.testing.assert_allclose(out.copy_to_host(), 2 * x)


def test_containers_of_results(backend):
    @tg.compile(backend=backend)
    def f(x, y):
        u, v = tg.empty_like(x), tg.empty_like(y)
        scale[1, 16](x, 2.0, u)
        scale[1, 16](y, 3.0, v)
        return {"u": u, "pair": [v, (u[4:], 7)]}

    x, y = np.arange(16.0), np.ones(16)
    r = f(x, y)
    assert set(r) == {"u", "pair"} and isinstance(r["pair"], list)
    assert isinstance(r["pair"][1], tuple) and r["pair"][1][1] == 7
    np.testing.assert_allclose(r["u"], 2 * x)
    np.testing.assert_allclose(r["pair"][0], 3 * y)
    np.testing.assert_allclose(r["pair"][1][0], 2 * x[4:])


def test_returned_arrays_do_not_change_on_later_replays(backend):
    f = tg.compile(Counted(), backend=backend)
    x = np.arange(16.0)
    first = f(x, 2.0)
    second = f(x + 100, 2.0)
    third = f.replay(x + 200, 2.0)
    np.testing.assert_allclose(first, 2 * x)
    np.testing.assert_allclose(second, 2 * (x + 100))
    np.testing.assert_allclose(third, 2 * (x + 200))
    d1 = f(cuda.to_device(x), 2.0)
    d2 = f(cuda.to_device(x + 1), 2.0)
    np.testing.assert_allclose(d1.copy_to_host(), 2 * x)
    np.testing.assert_allclose(d2.copy_to_host(), 2 * (x + 1))


def test_returned_view_of_a_temp_does_not_change(backend):
    @tg.compile(backend=backend)
    def f(x):
        u = tg.empty((2, 16))
        scale[1, 16](x, 2.0, u[0])
        scale[1, 16](x, 3.0, u[1])
        return u[1, ::2], u.T

    x = np.arange(16.0)
    a, t = f(x)
    f(x + 1)
    np.testing.assert_allclose(a, 3 * x[::2])
    np.testing.assert_allclose(t, np.stack([2 * x, 3 * x]).T)


# ---------------------------------------------------------------------------
# kernels that write inputs: exactly like eager Numba

def _eager_program(x, y):
    """The launches of `_inplace`, run eagerly by Numba on the same arguments."""
    iscale[1, 16](x, 2.0)
    iadd[1, 8](y[:8], x[8:])
    copy[1, 8](y[8:], x[:8])
    return x


@tg.compile
def _inplace_auto(x, y):
    return _eager_program(x, y)


@pytest.mark.parametrize("place", ["host", "device"])
def test_kernel_writing_an_input_writes_the_callers_array(backend, place):
    f = tg.compile(_eager_program, backend=backend)
    x0, y0 = np.arange(16.0), np.arange(16.0, 32.0)
    wrap = (lambda a: a.copy()) if place == "host" else cuda.to_device
    ex, ey = wrap(x0), wrap(y0)
    _eager_program(ex, ey)
    gx, gy = wrap(x0), wrap(y0)
    r = f(gx, gy)
    assert r is gx
    np.testing.assert_array_equal(_host(gx), _host(ex))
    np.testing.assert_array_equal(_host(gy), _host(ey))
    # again, through replay, with other arrays of the same signature
    ex, ey = wrap(y0), wrap(x0)
    _eager_program(ex, ey)
    gx, gy = wrap(y0), wrap(x0)
    assert f.replay(gx, gy) is gx
    np.testing.assert_array_equal(_host(gx), _host(ex))
    np.testing.assert_array_equal(_host(gy), _host(ey))


def test_aliased_inputs_behave_like_eager(backend):
    # race-free kernels (each thread touches its own elements), so eager on a GPU and the
    # simulator agree; the overlap of a and b must order the three launches
    def prog(a, b, out):
        iscale[1, 16](a, 2.0)   # writes bytes that b also covers
        copy[1, 16](b, out)     # must see them
        iscale[1, 16](b, 3.0)   # and only then overwrite b
        return out

    f = tg.compile(prog, backend=backend)
    base = np.arange(24.0)
    eager = cuda.to_device(base)
    eager_out = cuda.to_device(np.zeros(16))
    prog(eager[:16], eager[8:], eager_out)  # on device memory, where the views really alias
    expected, expected_out = eager.copy_to_host(), eager_out.copy_to_host()
    dev = cuda.to_device(base)
    dev_out = cuda.to_device(np.zeros(16))
    f(dev[:16], dev[8:], dev_out)
    np.testing.assert_array_equal(dev.copy_to_host(), expected)
    np.testing.assert_array_equal(dev_out.copy_to_host(), expected_out)
    # NumPy views of one array are one buffer in the graph too (eager Numba would copy
    # each argument in and out separately, racing on the shared bytes)
    got = base.copy()
    got_out = np.zeros(16)
    f(got[:16], got[8:], got_out)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got_out, expected_out)


def test_same_array_passed_twice(backend):
    @tg.compile(backend=backend)
    def f(a, b):
        iscale[1, 16](a, 2.0)
        iscale[1, 16](b, 3.0)
        return a, b

    for wrap in (np.array, cuda.to_device):
        x = wrap(np.arange(16.0))
        ra, rb = f(x, x)
        assert ra is x and rb is x
        np.testing.assert_array_equal(_host(x), 6 * np.arange(16.0))


def test_captured_device_array_is_read_and_written_like_eager(backend):
    captured = cuda.to_device(np.arange(16.0))

    @tg.compile(backend=backend)
    def f(x):
        iadd[1, 16](captured, x)
        out = tg.empty_like(x)
        copy[1, 16](captured, out)
        return out

    x = np.ones(16)
    np.testing.assert_array_equal(f(x), np.arange(16.0) + 1)
    np.testing.assert_array_equal(captured.copy_to_host(), np.arange(16.0) + 1)
    np.testing.assert_array_equal(f.replay(x), np.arange(16.0) + 2)
    np.testing.assert_array_equal(captured.copy_to_host(), np.arange(16.0) + 2)


def test_strided_numpy_input_written_in_place(backend):
    f = tg.compile(lambda x: iscale[1, 16](x, 2.0) or x, backend=backend)
    base = np.arange(32.0)
    out = f(base[::2])
    expected = np.arange(32.0)
    expected[::2] *= 2
    np.testing.assert_array_equal(base, expected)
    assert out.base is base


# ---------------------------------------------------------------------------
# calling conventions

def test_keyword_and_positional_calls_share_a_graph(backend):
    body = Counted()
    f = tg.compile(body, backend=backend)
    x = np.arange(16.0)
    np.testing.assert_allclose(f(x, 2.0), 2 * x)
    np.testing.assert_allclose(f(x, a=2.0), 2 * x)
    np.testing.assert_allclose(f(a=2.0, x=x), 2 * x)
    np.testing.assert_allclose(f.replay(x=x, a=2.0), 2 * x)
    assert body.traces == 1


def test_defaults_varargs_and_kwargs(backend):
    traces = []

    def body(x, *rest, a=2.0, **extra):
        traces.append(1)
        out = tg.empty_like(x)
        scale[1, 16](x, a, out)
        for r in rest:
            iadd[1, 16](out, r)
        for k in sorted(extra):
            iadd[1, 16](out, extra[k])
        return out

    f = tg.compile(body, backend=backend)
    x, y, z = np.arange(16.0), np.ones(16), np.full(16, 10.0)
    np.testing.assert_allclose(f(x), 2 * x)
    np.testing.assert_allclose(f(x, y, z), 2 * x + y + z)
    np.testing.assert_allclose(f(x, y, a=3.0), 3 * x + y)
    np.testing.assert_allclose(f(x, w=z), 2 * x + z)
    np.testing.assert_allclose(f.replay(x, z, y), 2 * x + y + z)
    assert len(traces) == 4


def test_nested_arguments(backend):
    @tg.compile(backend=backend)
    def f(pair, opts):
        out = tg.empty_like(pair[0])
        add[1, 16](pair[0], pair[1], out)
        iscale[1, 16](out, opts["scale"])
        return out

    x, y = np.arange(16.0), np.ones(16)
    np.testing.assert_allclose(f((x, y), {"scale": 3.0}), 3 * (x + y))
    np.testing.assert_allclose(f.replay([x, y] and (y, x), {"scale": 3.0}), 3 * (x + y))
    with pytest.raises(tg.SignatureError, match="nesting"):
        f.replay([x, y], {"scale": 3.0})


def test_decorator_forms_and_unknown_backend():
    @tg.compile
    def a(x):
        iscale[1, 16](x, 2.0)
        return x

    @tg.compile(backend="sim")
    def b(x):
        iscale[1, 16](x, 2.0)
        return x

    assert isinstance(a, tg.CompiledFunction) and isinstance(b, tg.CompiledFunction)
    assert b.backend == "sim" and a.__name__ == "a"
    with pytest.raises(tg.TracegraphError, match="unknown backend 'gpu'"):
        tg.compile(lambda x: x, backend="gpu")


def test_unhashable_static_argument_is_refused(backend):
    f = tg.compile(Counted(), backend=backend)
    with pytest.raises(tg.TraceError, match="argument a of type set cannot live in a graph"):
        f(np.arange(16.0), {1.0})


def test_trace_and_lower_run_nothing(backend):
    f = tg.compile(lambda x: iscale[1, 16](x, 2.0) or x, backend=backend)
    x = np.arange(16.0)
    assert isinstance(f.trace(x), tg.Program)
    assert isinstance(f.lower(x), tg.Plan)
    np.testing.assert_array_equal(x, np.arange(16.0))
    assert f.compiled == ()


def test_a_failed_compile_leaves_nothing_behind(backend):
    """A signature whose compile fails caches no graph; the function keeps working."""
    def step(x, threads):
        iscale[1, threads](x, 2.0)
        return x

    f = tg.compile(step, backend=backend)
    with pytest.raises(tg.TraceError, match="1,024"):
        f(np.ones(16), 2048)          # refused at the launch
    assert f.compiled == () and f.latest is None
    x = np.ones(16)
    np.testing.assert_array_equal(f(x, 16), np.full(16, 2.0))
    assert len(f.compiled) == 1


# -- the memo of the last arguments, and other arrays of the same kind (ping-pong) ----------

def test_alternating_arrays_reuse_the_signature_without_re_analysis(backend):
    f = tg.compile(lambda src, dst: copy[1, 16](src, dst), backend=backend)
    a, b = cuda.to_device(np.arange(16.0)), cuda.to_device(np.arange(16.0) * 2)
    out = cuda.device_array(16)
    f(a, out)
    first = f._calls._prepare((a, out), {})
    for k in range(6):  # ping-pong between a and b
        src = b if k % 2 == 0 else a
        call = f._calls._reuse((src, out))
        assert call is not None and call.key == first.key
        assert call.infos[0].ptr == tg.signature.describe(src).ptr
        f.replay(src, out)
        np.testing.assert_allclose(_host(out), _host(src))
    assert len(f.compiled) == 1


@pytest.mark.parametrize("other", ["shape", "dtype", "strides", "host", "shared memory"])
def test_other_arrays_of_another_kind_get_a_full_analysis(backend, other):
    f = tg.compile(lambda src, dst: copy[1, 16](src, dst), backend=backend)
    a, out = cuda.to_device(np.arange(16.0)), cuda.device_array(16)
    f(a, out)
    b = {"shape": lambda: cuda.to_device(np.arange(17.0)),
         "dtype": lambda: cuda.to_device(np.arange(16.0, dtype=np.float32)),
         "strides": lambda: cuda.to_device(np.arange(32.0))[::2],
         "host": lambda: np.arange(16.0),
         "shared memory": lambda: out}[other]()
    assert f._calls._reuse((b, out)) is None  # the memo does not vouch for it
    with pytest.raises(tg.SignatureError):  # the full analysis sees another signature
        f.replay(b, out)


def test_the_collector_waits_while_graphs_compile_and_comes_back_as_it_was():
    """Automatic collections pause (threshold 0) while any compile runs and come back with
    the last; gc.isenabled(), which other code saves and restores, is never touched."""
    import gc
    import threading

    from tracegraph.collector import collection_paused
    thresholds = gc.get_threshold()
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        inside, leave = threading.Event(), threading.Event()

        def other():
            with collection_paused():
                inside.set()
                leave.wait(5)

        t = threading.Thread(target=other)
        try:
            with collection_paused():
                assert gc.get_threshold()[0] == 0 and gc.isenabled() == enabled
                t.start()
                inside.wait(5)
            assert gc.get_threshold()[0] == 0  # the other compile still runs
            leave.set()
            t.join(5)
            assert gc.get_threshold() == thresholds and gc.isenabled() == enabled
        finally:
            leave.set()
            gc.enable()


N = 8


GRID, BLOCK = 1, N


def test_a_compiled_function_inside_another_is_inlined(backend, monkeypatch):
    @tg.compile(backend=backend)
    def inner(x):
        out = cuda.device_array_like(x)
        scale[GRID, BLOCK](x, 3.0, out)
        return out

    @tg.compile(backend=backend)
    def outer(x):
        y = inner(x)
        z = cuda.device_array_like(x)
        scale[GRID, BLOCK](y, 2.0, z)
        return inner.replay(z)

    x = np.arange(N, dtype=np.float64)
    for _ in range(2):
        np.testing.assert_array_equal(host(outer(x)), 18.0 * x)
    assert [op.name for op in outer.latest.program.ops if op.kind == "kernel"] == ["scale"] * 3
    assert not inner.compiled  # nothing of its own was compiled
    np.testing.assert_array_equal(host(inner(np.ones(N))), np.full(N, 3.0))


def test_a_compiled_method(backend):
    class Model:
        def __init__(self, gain):
            self.gain = gain

        @tg.compile(backend=backend)
        def step(self, x):
            out = tg.empty_like(x)
            scale[GRID, BLOCK](x, self.gain, out)
            return out

    a, b = Model(2.0), Model(3.0)
    x = np.arange(N, dtype=np.float64)
    np.testing.assert_array_equal(host(a.step(x)), 2.0 * x)
    np.testing.assert_array_equal(host(b.step(x)), 3.0 * x)
    np.testing.assert_array_equal(host(a.step.replay(x)), 2.0 * x)
    assert len(Model.step.compiled) == 2
