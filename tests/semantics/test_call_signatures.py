"""What makes a call another signature: containers (namedtuples, dataclasses rebuilt from
their init fields) in and out with static fields by value, **kwargs and dicts by key
order, dict keys equal but not alike (0.0 and -0.0); a replay with another layout (a
strided view) is a SignatureError."""
from __future__ import annotations

import collections
import dataclasses
import threading

import numpy as np
import pytest
from eager import host
from numba import cuda
from small_kernels import add, iscale, scale

import tracegraph as tg

N = 8


GRID, BLOCK = 1, N


Pair = collections.namedtuple("Pair", "scaled shifted")


@dataclasses.dataclass
class State:
    x: object
    gain: float


def test_namedtuple_and_dataclass_arguments_and_results(backend):
    @tg.compile(backend=backend)
    def step(state):
        a, b = tg.empty_like(state.x), tg.empty_like(state.x)
        scale[GRID, BLOCK](state.x, state.gain, a)
        scale[GRID, BLOCK](a, 0.5, b)
        return Pair(a, b), State(b, state.gain)

    x = np.arange(N, dtype=np.float64)
    for gain in (2.0, 2.0, 4.0):
        pair, state = step(State(x, gain))
        assert isinstance(pair, Pair) and isinstance(state, State)
        np.testing.assert_array_equal(host(pair.scaled), gain * x)
        np.testing.assert_array_equal(host(pair.shifted), gain * x / 2)
        np.testing.assert_array_equal(host(state.x), gain * x / 2)
        assert state.gain == gain
    assert len(step.compiled) == 2  # the gain is a static field: one graph per value
    with pytest.raises(tg.SignatureError, match=r"state\.gain"):
        step.replay(State(x, 8.0))


def test_replay_with_a_strided_device_view_is_a_signature_error(backend):
    # Not m.T: Numba's DeviceNDArray.T runs a transpose kernel into a new C-contiguous
    # array (same signature), where the simulator's returns a view.
    @tg.compile(backend=backend)
    def step(m):
        out = tg.empty_like(m)
        scale[GRID, BLOCK](m.reshape(-1), 2.0, out.reshape(-1))
        return out

    m = cuda.to_device(np.arange(16.0).reshape(4, 4))
    wide = cuda.to_device(np.arange(32.0).reshape(4, 8))
    step(m)
    assert wide[:, ::2].shape == m.shape
    with pytest.raises(tg.SignatureError, match="strides"):
        step.replay(wide[:, ::2])


@cuda.jit
def affine(x, a, b):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a + b


def _stages(x, **stages):
    for _, (a, b) in stages.items():
        affine[1, 32](x, a, b)
    return x


def _stages_dict(x, stages):
    for _, (a, b) in stages.items():
        affine[1, 32](x, a, b)
    return x


def test_kwargs_and_dicts_in_another_order_are_another_signature(backend):
    f = tg.compile(_stages, backend=backend)
    one = f(cuda.to_device(np.ones(4)), zoom=(10.0, 0.0), add=(1.0, 5.0)).copy_to_host()
    other = f(cuda.to_device(np.ones(4)), add=(1.0, 5.0), zoom=(10.0, 0.0)).copy_to_host()
    np.testing.assert_array_equal(one, 15.0)
    np.testing.assert_array_equal(other, 60.0)
    np.testing.assert_array_equal(
        f(cuda.to_device(np.ones(4)), zoom=(10.0, 0.0), add=(1.0, 5.0)).copy_to_host(), 15.0)
    assert len(f.compiled) == 2

    g = tg.compile(_stages_dict, backend=backend)
    one = g(cuda.to_device(np.ones(4)), {"zoom": (10.0, 0.0), "add": (1.0, 5.0)})
    other = g(cuda.to_device(np.ones(4)), {"add": (1.0, 5.0), "zoom": (10.0, 0.0)})
    np.testing.assert_array_equal(one.copy_to_host(), 15.0)
    np.testing.assert_array_equal(other.copy_to_host(), 60.0)

    @tg.compile(backend=backend)
    def named(x, *, a=1.0, b=0.0):  # named keywords: one signature in any order
        affine[1, 32](x, a, b)
        return x
    named(cuda.to_device(np.ones(4)), a=2.0, b=1.0)
    named(cuda.to_device(np.ones(4)), b=1.0, a=2.0)
    assert len(named.compiled) == 1


@cuda.jit
def _divide(x, k):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] / k


def test_dict_keys_equal_but_not_alike_are_another_signature(backend):
    def body(x, d):
        for k in d:
            _divide[1, 32](x, k)
        return x

    f = tg.compile(body, backend=backend)
    assert (f(cuda.to_device(np.ones(4)), {0.0: 1}).copy_to_host() == np.inf).all()
    assert (f(cuda.to_device(np.ones(4)), {-0.0: 1}).copy_to_host() == -np.inf).all()
    f(cuda.to_device(np.ones(4)), {0.0: 1})
    assert len(f.compiled) == 2


def _ones():
    return cuda.to_device(np.ones(4))


@dataclasses.dataclass
class ClipCfg:
    max_norm: float = 1.0

    def __post_init__(self):
        self.eff = self.max_norm * 2.0  # derived from a field: made again on the rebuild
        self.lock = threading.Lock()  # not a field: no part of the signature


def test_a_dataclass_argument_is_rebuilt_from_its_init_fields(backend):
    def step(x, cfg):
        iscale[1, 32](x, cfg.eff)

    f, x = tg.compile(step, backend=backend), _ones()
    for _ in range(3):
        f(x, ClipCfg())  # a new instance each call, a new lock: one graph
    assert len(f.compiled) == 1
    f(x, ClipCfg(max_norm=0.5))  # * 1: another field value, another graph
    np.testing.assert_allclose(x.copy_to_host(), 8.0)


# -- the memo of calls with containers: flattened again, reused leaf by leaf --------------

Weights = collections.namedtuple("Weights", "gain layers")


def _weights():
    return Weights(2.0, [cuda.to_device(np.ones(N)), cuda.to_device(np.full(N, 3.0))])


def _apply(x, w, pos):
    iscale[GRID, BLOCK](x, w.gain)
    for layer in w.layers:
        add[GRID, BLOCK](x, layer, x)
    iscale[GRID, BLOCK](x, pos)


def test_a_container_of_the_same_arrays_reuses_its_signature(backend):
    f = tg.compile(_apply, backend=backend, dynamic={"pos": "value"})
    x, w = cuda.to_device(np.ones(N)), _weights()
    f(x, w, 1.0)
    first = f._calls._prepare((x, w, 1.0), {})
    for pos in (2.0, 3.0, 0.5):  # a dynamic scalar may change
        call = f._calls._reuse((x, w, pos))
        assert call is not None and call.key == first.key and call.infos is first.infos
        assert call.leaves[-1] == pos
    x.copy_to_device(np.ones(N))
    f(x, w, 0.5)
    np.testing.assert_allclose(host(x), np.full(N, (2 + 1 + 3) * 0.5))
    assert len(f.compiled) == 1


@pytest.mark.parametrize("change", ["list grows", "list item", "static scalar",
                                    "another container"])
def test_a_changed_container_is_seen_on_the_next_call(backend, change):
    f = tg.compile(_apply, backend=backend, dynamic={"pos": "value"})
    x, w = cuda.to_device(np.ones(N)), _weights()
    f(x, w, 1.0)
    extra = cuda.to_device(np.full(N, 10.0))
    if change == "list grows":  # the structure changes: another signature
        w.layers.append(extra)
        want = (2 + 1 + 3 + 10)
    elif change == "list item":  # the same structure, another array
        w.layers[1] = extra
        want = (2 + 1 + 10)
    elif change == "static scalar":
        w = Weights(4.0, w.layers)
        want = (4 + 1 + 3)
    else:
        w = Weights(2.0, [w.layers[0], extra])
        want = (2 + 1 + 10)
    x.copy_to_device(np.ones(N))
    f(x, w, 1.0)
    np.testing.assert_allclose(host(x), np.full(N, want))


@dataclasses.dataclass(eq=False)
class _Model:
    """Compared by identity, as a model is: still a container of its fields' leaves."""
    gain: float
    w: object


@pytest.mark.parametrize("change", ["field array", "field scalar", "field length"])
def test_a_dataclass_changed_in_place_is_seen_on_the_next_call(backend, change):
    """The very same dataclass object with a field rebound: flattened again, as every
    container is (not the last call's leaves)."""
    def body(x, m):
        iscale[GRID, BLOCK](x, m.gain)
        add[GRID, BLOCK](x, m.w, x)

    f = tg.compile(body, backend=backend)
    x, m = cuda.to_device(np.ones(N)), _Model(2.0, cuda.to_device(np.ones(N)))
    for _ in range(2):  # the second call of the very same objects: the memo's
        x.copy_to_device(np.ones(N))
        f(x, m)
    np.testing.assert_allclose(host(x), np.full(N, 3.0))
    if change == "field array":
        m.w, want = cuda.to_device(np.full(N, 10.0)), 12.0
    elif change == "field scalar":
        m.gain, want = 5.0, 6.0
    else:  # another shape: another signature, refused at a replay
        m.w = cuda.to_device(np.ones(2 * N))
        with pytest.raises(tg.SignatureError):
            f.replay(x, m)
        return
    x.copy_to_device(np.ones(N))
    f(x, m)
    np.testing.assert_allclose(host(x), np.full(N, want))


EXTRA = {"y": cuda.to_device(np.ones(N))}


def test_a_container_default_changed_in_place_is_seen_on_the_next_call(backend):
    """A default is bound on every call that leaves it out; a container default (a dict)
    may hold other arrays by then: flattened again."""
    def body(x, out, extra=EXTRA):
        add[GRID, BLOCK](x, extra["y"], out)

    f = tg.compile(body, backend=backend)
    x, out = cuda.to_device(np.ones(N)), cuda.to_device(np.zeros(N))
    for _ in range(2):
        f(x, out)
    np.testing.assert_allclose(host(out), np.full(N, 2.0))
    old = EXTRA["y"]
    try:
        EXTRA["y"] = cuda.to_device(np.full(N, 100.0))
        f(x, out)
        np.testing.assert_allclose(host(out), np.full(N, 101.0))
    finally:
        EXTRA["y"] = old


def test_leaf_and_tuple_defaults_and_none_keep_the_memo_of_the_very_same_arguments(backend):
    """Defaults that are leaves, None or tuples of them are the same leaves whenever they
    are bound, as is a None argument: calls of the very same arguments reuse the last
    call's analysis (a container default or argument is flattened again instead)."""
    def body(x, gain=2.0, shape=(N, 1), bias=None, extra=None):
        iscale[GRID, BLOCK](x, gain * (shape[1] if shape is not None else 1))

    f = tg.compile(body, backend=backend)
    x = cuda.to_device(np.ones(N))
    f(x, 2.0, (N, 1), None)
    want = 2.0
    if tg.signature.arguments.has_fixed_metadata(x):  # (Numba's device arrays, on a GPU)
        assert f._calls._reuse((x, 2.0, (N, 1), None)) is None  # a tuple argument: no
        f(x)
        assert f._calls._reuse((x,)) is not None
        f(x, 2.0, None, None, None)
        assert f._calls._reuse((x, 2.0, None, None, None)) is not None
        want = 8.0
    np.testing.assert_allclose(host(x), np.full(N, want))


def test_a_dict_argument_in_another_key_order_is_seen_on_the_next_call(backend):
    def body(x, d):
        for name, v in d.items():  # the order matters
            iscale[GRID, BLOCK](x, 2.0) if name == "double" else add[GRID, BLOCK](x, v, x)

    f = tg.compile(body, backend=backend)
    x, one = cuda.to_device(np.zeros(N)), cuda.to_device(np.ones(N))
    f(x, {"one": one, "double": one})
    np.testing.assert_allclose(host(x), np.full(N, 2.0))  # (0 + 1) * 2
    x.copy_to_device(np.zeros(N))
    f(x, {"double": one, "one": one})
    np.testing.assert_allclose(host(x), np.full(N, 1.0))  # 0 * 2 + 1
    assert len(f.compiled) == 2


@dataclasses.dataclass
class _Settings:
    x: object
    k: float = dataclasses.field(default=0.0, init=False)

    def __post_init__(self):
        self.k = 2.0


def test_a_dataclass_argument_is_rebuilt_from_its_init_fields(backend):
    """docs/sharp-edges.md: an init=False field holds what __post_init__ sets, and an
    attribute set on the instance afterwards is absent inside the trace."""
    f = tg.compile(lambda s: scale[1, 8](s.x, s.k, s.x), backend=backend)
    s = _Settings(np.ones(8))
    s.k = 5.0  # not an init field: the rebuilt instance has 2.0
    f(s)
    np.testing.assert_array_equal(s.x, np.full(8, 2.0))
    s.extra = 1.0
    g = tg.compile(lambda s: scale[1, 8](s.x, s.extra, s.x), backend=backend)
    with pytest.raises(AttributeError, match="extra"):
        g(s)
