"""Every tracing and replay footgun, each with a defined outcome: a correct
result (equal to eager Numba), or a tracegraph error that names the argument, the user's
file:line and the fix. docs/sharp-edges.md lists the same footguns and what to do."""
from __future__ import annotations

import sys
import warnings

import networkx as nx
import numpy as np
import pytest
from numba import cuda
from numba.cuda.random import (
    init_xoroshiro128p_states_cpu,
    xoroshiro128p_dtype,
    xoroshiro128p_uniform_float32,
)
from small_kernels import add, iadd, iscale, scale

import tracegraph as tg
from tracegraph import _numba
from tracegraph.signature import arguments
from tracegraph.backends import sim

# the tests' own bookkeeping (lines.append in a traced function) is a side effect too
pytestmark = pytest.mark.filterwarnings("ignore:the traced function .*:UserWarning")

N = 8
GRID, BLOCK = 2, 4  # the simulator runs one Python thread per CUDA thread: keep it tiny


def _line() -> int:
    """The line number of the caller's next line."""
    return sys._getframe(1).f_lineno + 1


def _host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a)


def _scaled(backend):
    @tg.compile(backend=backend)
    def f(x, a):
        out = tg.empty_like(x)
        scale[GRID, BLOCK](x, a, out)
        return out
    return f


def _check_error(e, *fragments):
    """A tracegraph error names what was wrong, the user's file:line, and the fix."""
    msg = str(e.value)
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)
    assert e.value.where and e.value.where.startswith(__file__ + ":"), e.value.where
    assert e.value.fix


# ---------------------------------------------------------------------------
# replay with arguments unlike the compiled call: SignatureError naming the argument

def test_replay_with_a_wrong_number_of_arguments(backend):
    f = _scaled(backend)
    x = np.arange(N, dtype=np.float64)
    f(x, 2.0)
    cases = [
        ((x,), {}, ["(x, a)", "missing a required argument: 'a'", "got 1 positional"]),
        ((x, 2.0, 3.0), {}, ["(x, a)", "too many positional arguments", "got 3 positional"]),
        ((x,), {"b": 2.0}, ["(x, a)", "keyword(s) b"]),
        ((x, 2.0), {"a": 2.0}, ["multiple values for argument 'a'"]),
    ]
    for args, kwargs, fragments in cases:
        with pytest.raises(tg.SignatureError) as e:
            f.replay(*args, **kwargs)
        _check_error(e, *fragments)
        assert e.value.fix.endswith("f(x, a)")
    assert len(f.compiled) == 1


def _variants():
    """(name, the argument passed instead of a float64[8] NumPy array, what the error says)."""
    x = np.arange(N, dtype=np.float64)
    return [
        ("dtype", lambda: x.astype(np.float32), "got float32[8] on host"),
        ("dtype int", lambda: x.astype(np.int32), "got int32[8] on host"),
        ("shape", lambda: np.arange(N + 1.0), "got float64[9] on host"),
        ("ndim", lambda: x.reshape(2, 4), "got float64[2, 4] on host"),
        ("ndim 0", lambda: np.array(1.0), "got float64[] on host"),
        ("strides", lambda: np.arange(2.0 * N)[::2], "expected strides (8,), got (16,)"),
        ("reversed", lambda: x[::-1], "expected strides (8,), got (-8,)"),
        ("column", lambda: np.ones((N, 2))[:, 0], "got (16,)"),
        ("device", lambda: cuda.to_device(x), "got float64[8] on device"),
        ("None", lambda: None, "got None"),
        ("scalar", lambda: 1.0, "got float 1.0"),
        ("list", lambda: list(x), "got a list of 8"),
    ]


@pytest.mark.parametrize("name, make, got", _variants(), ids=[v[0] for v in _variants()])
def test_replay_with_an_unlike_host_array(backend, name, make, got):
    f = _scaled(backend)
    x = np.arange(N, dtype=np.float64)
    f(x, 2.0)
    with pytest.raises(tg.SignatureError) as e:
        f.replay(make(), 2.0)
    _check_error(e, "argument x: expected", got)
    if name not in ("strides", "reversed", "column"):
        assert "float64[8] on host" in str(e.value)
    assert "f(...) to compile this signature" in e.value.fix


def test_replay_with_a_host_array_where_a_device_array_was_traced(backend):
    f = _scaled(backend)
    x = np.arange(N, dtype=np.float64)
    np.testing.assert_array_equal(_host(f(cuda.to_device(x), 2.0)), 2 * x)
    with pytest.raises(tg.SignatureError) as e:
        f.replay(x, 2.0)
    _check_error(e, "argument x: expected float64[8] on device, got float64[8] on host")
    with pytest.raises(tg.SignatureError) as e:
        f.replay(cuda.to_device(x[:4]), 2.0)
    _check_error(e, "argument x: expected float64[8] on device, got float64[4] on device")
    # calling (not replaying) compiles the other placement: both then replay
    np.testing.assert_array_equal(f(x, 2.0), 2 * x)
    np.testing.assert_array_equal(f.replay(x, 3.0 - 1.0), 2 * x)
    assert len(f.compiled) == 2


def test_keyword_and_positional_forms(backend):
    f = _scaled(backend)
    x = np.arange(N, dtype=np.float64)
    f(x, 2.0)
    # the same call in any keyword/positional form is the same graph
    for args, kwargs in [((x,), {"a": 2.0}), ((), {"a": 2.0, "x": x}), ((), {"x": x, "a": 2.0})]:
        np.testing.assert_array_equal(f.replay(*args, **kwargs), 2 * x)
    assert len(f.compiled) == 1
    # values swapped by keyword: both arguments named, expected vs actual
    with pytest.raises(tg.SignatureError) as e:
        f.replay(a=x, x=2.0)
    _check_error(e, "argument x: expected float64[8] on host array, got float 2.0",
                 "argument a: expected the value 2.0, got an array")


def test_extra_keyword_arguments_in_another_order_are_another_signature(backend):
    """The function receives **kwargs in the caller's order and may iterate it (one
    signature for both orders would replay the first order's launches)."""
    traces = []

    def body(x, **opts):
        traces.append(sorted(opts))
        out = tg.empty_like(x)
        scale[GRID, BLOCK](x, opts["a"] - opts["b"], out)
        return out

    f = tg.compile(body, backend=backend)
    x = np.arange(N, dtype=np.float64)
    np.testing.assert_array_equal(f(x, a=3.0, b=1.0), 2 * x)
    np.testing.assert_array_equal(f.replay(x, a=3.0, b=1.0), 2 * x)
    with pytest.raises(tg.SignatureError):
        f.replay(x, b=1.0, a=3.0)
    np.testing.assert_array_equal(f(x, b=1.0, a=3.0), 2 * x)
    np.testing.assert_array_equal(f.replay(x, b=1.0, a=3.0), 2 * x)
    assert traces == [["a", "b"], ["a", "b"]]
    with pytest.raises(tg.SignatureError) as e:
        f.replay(x, a=3.0)
    _check_error(e, "argument b: expected the value 1.0, got nothing")


# ---------------------------------------------------------------------------
# memory shared between arguments, results and replays

@pytest.mark.parametrize("place", ["host", "device"])
def test_same_array_passed_as_two_inputs_matches_eager(backend, place):
    def body(a, b, out):
        iadd[GRID, BLOCK](a, b)     # a += b: with a is b, a doubles
        add[GRID, BLOCK](a, b, out)
        return out

    f = tg.compile(lambda a, b: body(a, b, tg.empty_like(a)), backend=backend)
    x0 = np.arange(N, dtype=np.float64) + 1

    def eager(x):  # one device array passed twice, as eager Numba sees it
        d = cuda.to_device(x)
        out = cuda.device_array_like(d)
        body(d, d, out)
        return d.copy_to_host(), out.copy_to_host()

    want_x, want_out = eager(x0)
    np.testing.assert_array_equal(want_x, 2 * x0)
    wrap = np.array if place == "host" else cuda.to_device
    for _ in range(2):
        x = wrap(x0.copy())
        out = f(x, x)
        np.testing.assert_array_equal(_host(out), want_out)
        np.testing.assert_array_equal(_host(x), want_x)
    # two separate arrays are another signature, and replaying the shared one as separate
    # arrays names both
    y = wrap(x0.copy())
    with pytest.raises(tg.SignatureError) as e:
        f.replay(wrap(x0.copy()), y)
    _check_error(e, "arguments a and b shared memory in the compiled call but are separate")
    x = wrap(x0.copy())
    out = f(x, y)
    np.testing.assert_array_equal(_host(out), 3 * x0)
    np.testing.assert_array_equal(_host(x), 2 * x0)
    assert len(f.compiled) == 2


@pytest.mark.parametrize("place", ["host", "device"])
def test_overlapping_views_as_two_inputs_match_eager(backend, place):
    def body(a, b, out):
        iscale[GRID, BLOCK](a, 2.0)    # a is base[:8]
        add[GRID, BLOCK](b, b, out)    # b is base[4:12]: its first half was just scaled
        return out

    f = tg.compile(lambda a, b: body(a, b, tg.empty_like(b)), backend=backend)
    base0 = np.arange(2 * N, dtype=np.float64)
    d = cuda.to_device(base0)
    want_out = cuda.device_array(N)
    body(d[:N], d[4:4 + N], want_out)
    want_base, want_out = d.copy_to_host(), want_out.copy_to_host()
    np.testing.assert_array_equal(want_out[:4], 4 * base0[4:8])
    for call in (f, f.replay):
        base = base0.copy() if place == "host" else cuda.to_device(base0)
        out = call(base[:N], base[4:4 + N])
        np.testing.assert_array_equal(_host(out), want_out)
        np.testing.assert_array_equal(_host(base), want_base)


@pytest.mark.parametrize("place", ["host", "device"])
def test_output_that_is_also_an_input(backend, place):
    @tg.compile(backend=backend)
    def f(x):
        iscale[GRID, BLOCK](x, 2.0)
        return x

    x0 = np.arange(N, dtype=np.float64)
    x = x0.copy() if place == "host" else cuda.to_device(x0)
    for k in range(1, 4):   # like eager: the caller's array doubles on every call
        r = f(x) if k == 1 else f.replay(x)
        assert r is x
        np.testing.assert_array_equal(_host(x), x0 * 2 ** k)


@pytest.mark.parametrize("place", ["host", "device"])
def test_input_modified_in_place_by_the_caller_between_replays(backend, place):
    f = _scaled(backend)
    x0 = np.arange(N, dtype=np.float64)
    x = x0.copy() if place == "host" else cuda.to_device(x0)
    np.testing.assert_array_equal(_host(f(x, 2.0)), 2 * x0)
    for k in range(3):
        new = x0 + 10 * (k + 1)
        if place == "host":
            x[:] = new
        else:
            x.copy_to_device(new)
        np.testing.assert_array_equal(_host(f.replay(x, 2.0)), 2 * new)  # never stale


@pytest.mark.parametrize("place", ["host", "device"])
def test_earlier_output_is_not_changed_by_later_replays(backend, place):
    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty_like(x)
        scale[GRID, BLOCK](x, 2.0, out)
        return out, out[2:]

    wrap = np.array if place == "host" else cuda.to_device
    xs = [np.arange(N, dtype=np.float64) + 100 * k for k in range(4)]
    kept = [f(wrap(xs[0]))]
    for x in xs[1:]:
        kept.append(f.replay(wrap(x)))
    for x, (out, tail) in zip(xs, kept):
        np.testing.assert_array_equal(_host(out), 2 * x)
        np.testing.assert_array_equal(_host(tail), 2 * x[2:])


# ---------------------------------------------------------------------------
# Python control flow and scalars

def test_python_control_flow_on_traced_data_is_a_trace_error(backend):
    lines = []

    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty_like(x)
        scale[GRID, BLOCK](x, 2.0, out)
        lines.append(_line())
        if out[0] > 1:  # noqa: PLR2004 - the footgun under test
            iscale[GRID, BLOCK](out, 2.0)
        return out

    with pytest.raises(tg.TraceError) as e:
        f(np.arange(N, dtype=np.float64))
    # out[0] is refused first: eagerly an element read on the host
    _check_error(e, "reads device data while tracing")
    assert e.value.where == f"{__file__}:{lines[0]}"
    assert "branch inside a kernel" in e.value.fix
    assert not f.compiled


_READS = {
    "float": lambda a: float(a[0]),
    "int": lambda a: int(a[0]),
    "item": lambda a: a[0:1].item(),
    "asarray": lambda a: np.asarray(a),
    "iterate": lambda a: [v for v in a],
    "len-free loop": lambda a: max(a),
}


@pytest.mark.parametrize("read", sorted(_READS))
def test_python_values_from_traced_data_are_a_trace_error(backend, read):
    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty_like(x)
        scale[GRID, BLOCK](x, _READS[read](x), out)
        return out

    with pytest.raises(tg.TraceError) as e:
        f(np.arange(N, dtype=np.float64))
    _check_error(e, "reads device data while tracing")
    assert "return the array from the traced function" in e.value.fix


def test_python_scalar_arguments_compile_one_graph_per_value(backend):
    traces = []

    def body(x, a):
        traces.append(a)
        out = tg.empty_like(x)
        scale[GRID, BLOCK](x, a, out)
        return out

    f = tg.compile(body, backend=backend)
    x = np.arange(N, dtype=np.float64)
    for a in (2.0, 3.0, 2.0, 3.0, np.float32(2.0), 2):
        np.testing.assert_array_equal(f(x, a), a * x)
    assert len(f.compiled) == 4  # 2.0, 3.0, np.float32(2.0) and the int 2 are all distinct
    assert traces == [2.0, 3.0, np.float32(2.0), 2]
    np.testing.assert_array_equal(f.replay(x, 3.0), 3 * x)
    with pytest.raises(tg.SignatureError) as e:
        f.replay(x, 4.0)
    _check_error(e, "argument a: expected the value", "got 4.0 (float)",
                 "Python scalars are baked into the graph")
    assert len(traces) == 4


def _warnings_are_errors() -> None:
    """Inside catch_warnings: every warning an error but Numba's own performance advice (a
    small grid on a real GPU), which is not ours to judge and comes once per place."""
    warnings.simplefilter("error")
    warnings.filterwarnings("ignore", message=".*(Grid size|Host array used)")


def test_a_scalar_changing_on_every_call_warns_at_16_graphs(backend):
    f = _scaled(backend)
    x = np.arange(N, dtype=np.float64)
    with warnings.catch_warnings():
        _warnings_are_errors()
        for k in range(tg.api.MANY_GRAPHS - 1):
            f(x, float(k))
    with pytest.warns(UserWarning, match=r"has compiled 16 graphs, one per signature: the "
                                         r"Python value of a differs between them") as record:
        line = _line()
        np.testing.assert_array_equal(f(x, 99.0), 99 * x)
    assert [(w.filename, w.lineno) for w in record] == [(__file__, line)]
    with warnings.catch_warnings():
        _warnings_are_errors()   # once
        f(x, 100.0)
    f.clear()
    assert not f.compiled


# ---------------------------------------------------------------------------
# Python side effects inside the traced function: run once, at trace time

_SEEN: list = []
_OTHER: list = []


def test_side_effects_run_once_at_trace_time_and_warn(backend, capsys):
    lines = {}

    def body(x):
        out = tg.empty_like(x)
        lines["print"] = _line()
        print("tracing body")
        lines["append"] = _line()
        _SEEN.append(len(_SEEN))
        scale[GRID, BLOCK](x, 2.0, out)
        return out

    _SEEN.clear()
    f = tg.compile(body, backend=backend)
    x = np.arange(N, dtype=np.float64)
    with pytest.warns(UserWarning) as record:
        for _ in range(3):
            np.testing.assert_array_equal(f(x), 2 * x)
    assert _SEEN == [0]                                  # once: at trace time
    assert capsys.readouterr().out == "tracing body\n"   # once
    ours = [w for w in record if "side effects run once" in str(w.message)]
    assert [(w.filename, w.lineno) for w in ours] == [(__file__, lines["print"]),
                                                      (__file__, lines["append"])]
    assert "calls print()" in str(ours[0].message)
    assert "calls _SEEN.append()" in str(ours[1].message)
    assert "tg.callback" in str(ours[0].message)
    # every new signature traces again, and so runs the side effects again
    with pytest.warns(UserWarning, match="side effects run once"):
        f(x[:4].copy())
    assert _SEEN == [0, 1]


def test_more_obvious_side_effects_are_warned_about(backend):
    counter = 0
    state = {"calls": 0}

    def body(x):
        global _OTHER
        nonlocal counter
        out = tg.empty_like(x)
        counter += 1                     # nonlocal
        _OTHER = []                      # global
        state.update(calls=1)            # a dict defined outside
        scale[GRID, BLOCK](x, float(np.random.rand() >= 0), out)  # frozen at trace time
        return out

    with pytest.warns(UserWarning) as record:
        tg.compile(body, backend=backend)(np.arange(N, dtype=np.float64))
    messages = " | ".join(str(w.message) for w in record)
    for what in ("assigns the nonlocal counter", "assigns the global _OTHER",
                 "calls state.update()", "uses np.random.rand"):
        assert what in messages, messages


def test_no_side_effect_warning_for_ordinary_traced_code(backend):
    local_config = {"a": 2.0}

    def body(x, y):
        outs = []
        for k in range(2):
            out = tg.empty_like(x)
            scale[GRID, BLOCK](x if k == 0 else y, local_config["a"], out)
            outs.append(out)
        total = tg.empty_like(x)
        add[(x.size + BLOCK - 1) // BLOCK, BLOCK](outs[0], outs[1], total)
        return total

    x, y = np.arange(N, dtype=np.float64), np.ones(N)
    with warnings.catch_warnings():
        _warnings_are_errors()
        np.testing.assert_array_equal(tg.compile(body, backend=backend)(x, y), 2 * (x + y))


def test_side_effects_in_called_functions_are_not_detected_but_still_run_once(backend):
    calls = []

    def helper(x, out):  # not scanned: only the traced function's own code is
        calls.append(1)
        scale[GRID, BLOCK](x, 2.0, out)

    def body(x):
        out = tg.empty_like(x)
        helper(x, out)
        return out

    f = tg.compile(body, backend=backend)
    x = np.arange(N, dtype=np.float64)
    with warnings.catch_warnings():
        _warnings_are_errors()
        for _ in range(3):
            np.testing.assert_array_equal(f(x), 2 * x)
    assert calls == [1]


# ---------------------------------------------------------------------------
# kernels: streams, device functions, debug, cooperative launches

def test_stream_argument_is_recorded_and_ignored_with_a_warning(backend):
    stream = cuda.stream()
    lines = []

    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty_like(x)
        lines.append(_line())
        scale[GRID, BLOCK, stream](x, 2.0, out)
        iscale[GRID, BLOCK, stream, 0](out, 3.0)
        return out

    x = np.arange(N, dtype=np.float64)
    with pytest.warns(UserWarning, match="stream given to scale inside a traced function is "
                                         "ignored") as record:
        np.testing.assert_array_equal(f(x), 6 * x)
    ours = [w for w in record if "stream given" in str(w.message)]
    assert len(ours) == 1  # once per trace
    assert str(ours[0].message).startswith(f"{__file__}:{lines[0]}")
    assert [op.name for op in f.latest.program.ops if op.kind == "kernel"] == ["scale", "iscale"]
    np.testing.assert_array_equal(f.replay(x), 6 * x)


@cuda.jit(device=True)
def _store(a, i, v):
    a[i] = v


@cuda.jit(device=True)
def _load(a, i):
    return a[i]


_HIDDEN = (_store, _load)  # called through a tuple: the access inference cannot follow


@cuda.jit
def store_hidden(x, y):
    """y[i] = 2 x[i], through a device function in a tuple."""
    i = cuda.grid(1)
    if i < y.size:
        _HIDDEN[0](y, i, 2 * x[i])


@cuda.jit
def load_hidden(y, out):
    """out[i] = y[i] + 1, reading y through a device function in a tuple."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _HIDDEN[1](y, i) + 1


def _through_closure(fn):
    @cuda.jit
    def store_closure(x, y):
        i = cuda.grid(1)
        if i < y.size:
            fn(y, i, 3 * x[i])
    return store_closure


store_closure = _through_closure(_store)


def test_unseen_device_functions_are_read_and_write_so_order_is_conservative(backend, request):
    # what inference says: through a tuple nothing is known (read+write); a device function
    # held in a closure variable is seen through
    assert _numba.infer_param_access(store_hidden, (1, 1)) == ("r", "rw")
    assert _numba.infer_param_access(load_hidden, (1, 1)) == ("rw", "w")
    assert _numba.infer_param_access(store_closure, (1, 1)) == ("r", "w")

    def body(x):
        y, a, b, c = (tg.zeros_like(x) for _ in range(4))
        load_hidden[GRID, BLOCK](y, a)    # 0: reads y (taken as read+write)
        load_hidden[GRID, BLOCK](y, b)    # 1: reads y: ordered after 0, conservatively
        store_hidden[GRID, BLOCK](x, y)   # 2: writes y: after both readers (WAR)
        scale[GRID, BLOCK](y, 1.0, c)     # 3: reads y: after the writer (RAW)
        store_closure[GRID, BLOCK](x, a)  # 4: writes a: after 0 (WAW), not after 1..3
        return a, b, c, y

    f = tg.compile(body, backend=backend)
    x = np.arange(N, dtype=np.float64)
    prog = f.trace(x)
    kernels = [i for i, op in enumerate(prog.ops) if op.kind == "kernel"]
    k = dict(enumerate(kernels))
    reach = {i: nx.descendants(prog.graph, i) for i in kernels}
    for i, j in [(0, 1), (0, 2), (1, 2), (2, 3), (0, 4)]:
        assert k[j] in reach[k[i]], (i, j)
    for i in (1, 2, 3):
        assert k[4] not in reach[k[i]] and k[i] not in reach[k[4]], i
    want = (3 * x, np.ones(N), 2 * x, 2 * x)
    for got, w in zip(f(x), want):
        np.testing.assert_array_equal(got, w)
    # any valid order of the graph gives the same answer
    plan = f.lower(x)
    for seed in range(3 if backend == "sim" else 0):
        exe = sim.build(plan, seed)
        got = exe.run([x], [arguments.describe(x)])
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


@cuda.jit(debug=True, opt=False)
def debug_scale(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= a


def test_debug_kernel_is_a_trace_error(backend):
    lines = []

    @tg.compile(backend=backend)
    def f(x):
        iscale[GRID, BLOCK](x, 2.0)
        lines.append(_line())
        debug_scale[GRID, BLOCK](x, 2.0)
        return x

    x = np.arange(N, dtype=np.float64)
    with pytest.raises(tg.TraceError) as e:
        f(x)
    _check_error(e, "kernel debug_scale was compiled with debug=True")
    assert e.value.where == f"{__file__}:{lines[0]}"
    assert "debug=False" in e.value.fix
    np.testing.assert_array_equal(x, np.arange(N))  # nothing ran
    assert not f.compiled


# ---------------------------------------------------------------------------
# random number generator states

@cuda.jit
def uniform(states, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = xoroshiro128p_uniform_float32(states, i)


def _rng_states(seed: int) -> np.ndarray:
    """xoroshiro128p states made on the host: works on the simulator and on a GPU."""
    states = np.empty(N, dtype=xoroshiro128p_dtype)
    init_xoroshiro128p_states_cpu(states, seed, 0)
    return states


# the simulator computes in NumPy uint64 (which warns on the wrap-around the generator relies
# on); Numba's CPU compiler runs init_xoroshiro128p_states_cpu in object mode there
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                            "ignore::numba.core.errors.NumbaWarning")
@pytest.mark.parametrize("place", ["host", "device"])
def test_rng_states_n_replays_equal_n_eager_calls(backend, place, request):
    @tg.compile(backend=backend)
    def draw(states):
        out = tg.empty(N, np.float32)
        uniform[GRID, BLOCK](states, out)
        return out

    eager_states = cuda.to_device(_rng_states(7))
    eager = []
    for _ in range(4):
        out = cuda.device_array(N, np.float32)
        uniform[GRID, BLOCK](eager_states, out)
        eager.append(out.copy_to_host())
    assert not np.array_equal(eager[0], eager[1])  # the states advance

    states = _rng_states(7) if place == "host" else cuda.to_device(_rng_states(7))
    got = [_host(draw(states))] + [_host(draw.replay(states)) for _ in range(3)]
    np.testing.assert_array_equal(np.array(got), np.array(eager))
    np.testing.assert_array_equal(_host(states), eager_states.copy_to_host())
    assert len(draw.compiled) == 1


# ---------------------------------------------------------------------------
# empty functions and failures while tracing

def test_empty_traced_function_is_a_trace_error(backend):
    @tg.compile(backend=backend)
    def f(x, a):
        y = x[1:]       # views and metadata are not work
        return y, a * x.size

    with pytest.raises(tg.TraceError) as e:
        f(np.arange(N, dtype=np.float64), 2.0)
    assert "launched nothing" in str(e.value)
    assert e.value.where.startswith(__file__ + ":")
    assert "launch at least one kernel" in e.value.fix
    assert not f.compiled


def _assert_no_tracer_left():
    assert _numba.current_tracer() is None
    with pytest.raises(tg.TraceError, match="only meaningful inside"):
        tg.empty(4)
    # an eager launch runs (a leaked tracer would swallow it)
    d = cuda.to_device(np.ones(N))
    iscale[GRID, BLOCK](d, 5.0)
    np.testing.assert_array_equal(d.copy_to_host(), np.full(N, 5.0))


@pytest.mark.parametrize("failure", ["python", "trace error", "kernel argument"])
def test_exception_halfway_through_tracing_leaves_no_state(backend, failure):
    fail = [True]

    def body(x):
        out = tg.empty_like(x)
        scale[GRID, BLOCK](x, 2.0, out)
        if fail[0]:
            if failure == "python":
                raise ValueError("user error halfway")
            if failure == "trace error":
                float(out)
            scale[GRID, BLOCK](np.ones(N), 2.0, out)   # a host array straight to a kernel
        iscale[GRID, BLOCK](out, 3.0)
        return out

    f = tg.compile(body, backend=backend)
    x = np.arange(N, dtype=np.float64)
    with pytest.raises(ValueError if failure == "python" else tg.TraceError):
        f(x)
    assert not f.compiled and f.latest is None
    _assert_no_tracer_left()
    with pytest.raises(tg.SignatureError, match="before anything was compiled"):
        f.replay(x)
    # the next trace of another function, and of this one, works
    np.testing.assert_array_equal(_scaled(backend)(x, 4.0), 4 * x)
    fail[0] = False
    np.testing.assert_array_equal(f(x), 6 * x)
    np.testing.assert_array_equal(f.replay(x), 6 * x)
    assert len(f.compiled) == 1
    _assert_no_tracer_left()


def test_exception_in_a_nested_trace_restores_the_outer_one(backend):
    """Tracing another function inside a traced function, which fails halfway: the inner
    tracer is dropped and the outer one keeps recording."""
    def inner_body(x):
        scale[GRID, BLOCK](x, 2.0, tg.empty_like(x))
        raise ValueError("inner failure")

    inner = tg.compile(inner_body, backend=backend)

    @tg.compile(backend=backend)
    def outer(x):
        out = tg.empty_like(x)
        scale[GRID, BLOCK](x, 2.0, out)
        with pytest.raises(ValueError, match="inner failure"):
            inner.trace(np.ones(N))
        iscale[GRID, BLOCK](out, 3.0)
        return out

    x = np.arange(N, dtype=np.float64)
    np.testing.assert_array_equal(outer(x), 6 * x)
    assert [op.name for op in outer.latest.program.ops if op.kind == "kernel"] == [
        "scale", "iscale"]
    assert not inner.compiled
    _assert_no_tracer_left()
