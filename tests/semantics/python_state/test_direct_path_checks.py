"""The direct replay path (a call of the very same argument objects) checks what the
graph's names found: a graph traced for what a selector finds, captured arrays moved or
re-laid out, equal values made anew, attributes a method reads, weakref proxies in the
state, a variant whose base graph's paths changed. It replays directly while they hold
and traces (or takes the matching graph) when they do not."""
from __future__ import annotations

import dataclasses
import types
import weakref

import numpy as np
from numba import cuda
from small_kernels import add_to, axpy, mul, scale

import tracegraph as tg
from tracegraph import _numba
from tracegraph.signature import arguments

N = 8


@cuda.jit
def double(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = 2 * x[i]


@cuda.jit
def plus_one(w, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = w[i] + 1


class Layer:
    def __init__(self, k: int):
        self.W = cuda.to_device(np.full(N, 1.0 + k / 8))
        self.a = 0.25 * k

    def forward(self, x):
        axpy[1, 32](x, self.W, self.a)


def _eager(layers, x):
    for layer in layers:  # (a forward set on the instance adds -1)
        x = x * layer.W.copy_to_host() + (-1.0 if "forward" in vars(layer) else layer.a)
    return x


def _armed(f):
    return [e for e in f.compiled if getattr(e.executable, "armed", None)]


WL = [cuda.to_device(np.full(N, 2.0)), cuda.to_device(np.full(N, 3.0))]
IDX = 0


def test_a_graph_traced_for_what_a_selector_finds_now_replays_directly_and_back(
        backend):
    global IDX

    def step(x):
        axpy[1, 32](x, WL[IDX], 1.0)

    f = tg.compile(step, backend=backend)
    x = cuda.to_device(np.zeros(N))
    want = np.zeros(N)
    for idx in [0, 0, 1, 1, 1, 0, 0, 1, 0]:
        IDX = idx
        f(x)
        want = want * (2.0 + idx) + 1.0
        np.testing.assert_allclose(x.copy_to_host(), want)
        if backend == "cuda":
            assert _armed(f)
    assert f.cache_info().graphs == 2
    IDX = 0


W_HELD = None


def test_an_argument_moved_onto_a_captured_array_takes_the_graph_for_that_overlap(
        backend):
    # apart, x's doubling and out = W + 1 are independent; with x over W's memory the
    # read of W must follow the write (another graph): a direct replay re-pointing x
    # would run them in either order
    global W_HELD
    W_HELD = cuda.to_device(np.arange(N, dtype=np.float64))
    def step(x, out):
        double[1, 32](x)
        plus_one[1, 32](W_HELD, out)

    f = tg.compile(step, backend=backend)
    x, out = cuda.to_device(np.ones(N)), cuda.device_array(N)
    for _ in range(3):
        f(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(N) + 1.0)
    w = W_HELD.copy_to_host()
    for _ in range(3):
        f(W_HELD, out)  # the same signature as x: a direct replay would re-point it
        w = 2 * w
        np.testing.assert_array_equal(W_HELD.copy_to_host(), w)
        np.testing.assert_array_equal(out.copy_to_host(), w + 1)
    assert f.cache_info().graphs == 2
    f(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), w + 1)


class Tensorish:
    """An array whose memory and layout can change in place (as a torch tensor's can,
    `.set_()`): the very same object is not the same array."""

    def __init__(self, array):
        self.array = array

    @property
    def __cuda_array_interface__(self):
        return self.array.__cuda_array_interface__


def _changeable(array):
    """`array`'s memory under an object that can be pointed elsewhere in place, and how."""
    if not _numba.SIMULATOR:
        out = Tensorish(array)
        return out, lambda other: setattr(out, "array", other)
    # the simulator's arrays have no interface: a subclass, not of fixed metadata
    out = type("Changeable", (type(array),), {})(array._ary)
    return out, lambda other: setattr(out, "_ary", other._ary)


def test_an_input_copying_could_follow_replays_directly_until_it_moves(
        backend):
    def step(x):
        for _ in range(48):  # many nodes read a small x: copying it could win
            add_to[1, 32](x, 1.0)

    f = tg.compile(step, backend=backend)
    xs = [cuda.to_device(np.zeros(N)), cuda.to_device(np.full(N, 100.0))]
    want = [np.zeros(N), np.full(N, 100.0)]
    for k in [0, 0, 0]:
        f(xs[k])
        want[k] += 48
    if backend == "cuda":
        ex = f.latest.executable
        assert ex.replayer.watched and _armed(f)
    for k in [1, 0] * 8 + [0, 0, 0, 1, 1]:  # ping-pong: copying starts, then it rests
        f(xs[k])
        want[k] += 48
        for j in range(2):
            np.testing.assert_array_equal(xs[j].copy_to_host(), want[j])


@cuda.jit
def scale_add(x, a, b):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a + b


def test_equal_scalars_made_anew_each_call_replay_directly_and_new_values_trace(
        backend):
    def step(x, a, b):
        scale_add[1, 32](x, a, b)

    f = tg.compile(step, backend=backend)
    full = []  # calls that took the full path (signature, checks) instead of the direct one
    entry = f._entry
    f._entry = lambda *a, **k: full.append(1) or entry(*a, **k)
    x = cuda.to_device(np.zeros(N))
    want = np.zeros(N)
    half = 0.25
    for a, b in [(2.0, 0.5), (2.0, 0.5), (2.0, 0.5), (3.0, 0.5), (3.0, 0.5), (2.0, -0.5)]:
        # a float computed each call and a NumPy scalar made each call: equal, not the same
        f(x, a * (half * 4), np.float32(b))
        want = want * a + np.float32(b)
        np.testing.assert_allclose(x.copy_to_host(), want)
        if backend == "cuda":
            assert _armed(f)
    assert f.cache_info().graphs == 3
    if backend == "cuda":  # the first call and each new value's
        assert len(full) == 3


def _dev(v):
    return cuda.to_device(np.full(N, float(v)))


def _host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a)


W = None


USE_W = True


def test_a_graph_without_captures_traced_for_a_selector_is_never_replayed_directly(
        backend, monkeypatch):
    global W, USE_W
    # device arrays of fixed metadata take the direct replay path, as Numba's do on a GPU
    monkeypatch.setattr(arguments, "_FIXED", arguments._FIXED | {type(_dev(0))})

    def body(x):
        out = cuda.device_array_like(x)
        if USE_W:
            mul[1, N](x, W, out)
        else:
            scale[1, N](x, 1.0, out)
        return out

    W, USE_W = _dev(3), True
    f = tg.compile(body, backend=backend)
    x = cuda.to_device(np.arange(float(N)))
    for flag in (True, False, False, True, True):
        USE_W = flag
        np.testing.assert_array_equal(_host(f(x)), np.arange(N) * (3.0 if flag else 1.0))


@cuda.jit
def _scale(x, a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i]


def _x():
    return cuda.to_device(np.arange(3.0))


class Env:
    def __init__(self):
        self.gain = 2.0

    def step(self, x, out):
        _scale[1, 8](x, self.gain, out)


def test_a_method_reading_its_attributes_keeps_the_direct_replay(backend, monkeypatch):
    from tracegraph.signature import arguments
    monkeypatch.setattr(arguments, "_FIXED", arguments._FIXED | {type(_x())})
    env = Env()
    f = tg.compile(env.step, backend=backend)
    x, out = _x(), cuda.device_array(3)
    f(x, out)
    f(x, out)
    if backend == "cuda":
        assert f._hot is not None  # armed: the attribute path is checked on the direct path
    np.testing.assert_array_equal(out.copy_to_host(), 2.0 * np.arange(3.0))
    env.gain = 3.0
    f(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), 3.0 * np.arange(3.0))
    assert len(f.compiled) == 2


@cuda.jit
def _scale_real(x, a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a.real * x[i]


R = np.arange(3.0)


class Trainer:
    def __init__(self):
        self.losses = [0.0] * 1000  # never read by the step
        self.lr = 2.0

    def step(self, x, out):
        _scale_real[1, 8](x, self.lr, out)


def test_an_equal_value_reassigned_keeps_the_direct_path(backend, monkeypatch):
    from tracegraph.signature import arguments
    x, out = cuda.to_device(np.arange(3.0)), cuda.device_array(3)
    monkeypatch.setattr(arguments, "_FIXED", arguments._FIXED | {type(x)})
    t = Trainer()
    f = tg.compile(t.step, backend=backend)
    f(x, out)
    f(x, out)
    t.lr = 2.0 + 0.0 * len(str(t))  # equal, another object
    f(x, out)
    if backend == "cuda":
        hot = f._hot
        assert hot is not None and any(c[4] is t.lr for c in hot._checks)  # re-armed
    np.testing.assert_array_equal(out.copy_to_host(), 2 * R)
    assert len(f.compiled) == 1


class _Entry:
    def __init__(self, key, checks, guarded=False):
        self.key, self.fast_checks, self.guarded = key, checks, guarded


class _Owner:
    def __init__(self):
        self.scale = 2.0


class _Child:
    def __init__(self, owner):
        self.owner = weakref.proxy(owner)  # (no reference cycle)

    def run(self, x):
        add_to[1, 32](x, self.owner.scale)



PHASE = types.SimpleNamespace(phase=0)


def _next_phase():  # a helper's side effect: runs when the function traces
    PHASE.phase += 1


def test_the_direct_replay_checks_the_state_the_graph_was_traced_for(backend):
    """The checks a direct replay makes are read with the call's state, before its trace:
    a trace that changes a checked name (through a helper) leaves the next call to trace
    for the new value, not to replay the old graph directly."""
    PHASE.phase = 0

    @tg.compile(backend=backend)
    def f(x):
        p = PHASE.phase
        _next_phase()
        out = tg.empty_like(x)
        scale[1, N](x, float(p + 1), out)
        return out

    x = cuda.to_device(np.arange(N, dtype=np.float64))
    for want in (1.0, 2.0, 3.0):
        got = f(x)
        np.testing.assert_array_equal(
            got.copy_to_host() if hasattr(got, "copy_to_host") else got,
            want * np.arange(N))


@dataclasses.dataclass
class _Clip:
    clip: object = None


CLIP = _Clip()


def test_a_container_default_changed_in_place_is_seen_by_every_path(backend):
    """A dataclass default (flattened again on every call) keeps a call off the direct
    replay, which checks only the arguments given."""
    CLIP.clip = None

    @tg.compile(backend=backend)
    def step(x, opts=CLIP):
        add_to[1, N](x, 1.0)
        if opts.clip is not None:
            scale[1, N](x, 0.0, x)

    x = cuda.to_device(np.zeros(N))
    try:
        for k in range(5):
            if k == 3:
                CLIP.clip = 1.0
            step(x)
            got = x.copy_to_host() if hasattr(x, "copy_to_host") else x
            np.testing.assert_array_equal(got, np.full(N, 0.0 if k >= 3 else k + 1.0))
    finally:
        CLIP.clip = None
