"""Programs users write, held against the Python-state contract (docs/api.md "Python
state", docs/sharp-edges.md): what the contract says is checked (globals, closures and
the attribute chains the function's own code loads from them and from its parameters),
served by key= or caught by verify= gives eager Numba's result, through every way of
making the compiled callable (a decorated method, a bound method, functools.partial, a
callable object, a staticmethod or classmethod), every call form (keywords, defaults,
the direct replay of the very same device arrays) and from several threads."""
from __future__ import annotations

import argparse
import functools
import math
import sys
import threading
import types

import numpy as np
import pytest
from numba import cuda, float64
from small_kernels import add, scale

import tracegraph as tg

N = 32


def _x():
    return np.arange(N, dtype=np.float64)


class _Obj:
    """A plain object holding settings (hashable by identity)."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


def _ns(**fields):
    return _Obj(**fields)


def _scaled(backend, read, **options):
    """A compiled f(x) -> read() * x: `read` holds the state under test."""
    @tg.compile(backend=backend, **options)
    def f(x):
        out = tg.empty_like(x)
        scale[1, N](x, read(), out)
        return out
    return f


# --- keyword-only parameters left at their default -----------------------------------

DEFAULT = _ns(scale=1.0)


def test_a_keyword_only_parameter_at_its_default_is_checked(backend):
    """`cfg` is a parameter: `cfg.scale` is a chain from it, whether the caller passed
    cfg or left it at its default (a positional default is checked already)."""
    DEFAULT.scale = 1.0

    @tg.compile(backend=backend)
    def f(x, *, cfg=DEFAULT):
        out = tg.empty_like(x)
        scale[1, N](x, cfg.scale, out)
        return out

    x = _x()
    np.testing.assert_array_equal(f(x), x)
    DEFAULT.scale = 2.0
    np.testing.assert_array_equal(f(x), 2.0 * x)


def test_a_keyword_only_default_is_checked_by_the_direct_replay(backend):
    DEFAULT.scale = 1.0

    @tg.compile(backend=backend)
    def f(x, out, *, cfg=DEFAULT):
        scale[1, N](x, cfg.scale, out)

    x, out = cuda.to_device(_x()), cuda.device_array(N)
    for value in (1.0, 1.0, 1.0, 2.0, 2.0):
        DEFAULT.scale = value
        f(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), value * _x())


def test_a_keyword_only_default_of_a_method_is_checked(backend):
    DEFAULT.scale = 1.0

    class Model:
        @tg.compile(backend=backend)
        def step(self, x, *, cfg=DEFAULT):
            out = tg.empty_like(x)
            scale[1, N](x, cfg.scale, out)
            return out

    m, x = Model(), _x()
    np.testing.assert_array_equal(m.step(x), x)
    DEFAULT.scale = 3.0
    np.testing.assert_array_equal(m.step(x), 3.0 * x)


def test_a_positional_default_is_checked(backend):
    DEFAULT.scale = 1.0

    @tg.compile(backend=backend)
    def f(x, cfg=DEFAULT):
        out = tg.empty_like(x)
        scale[1, N](x, cfg.scale, out)
        return out

    x = _x()
    np.testing.assert_array_equal(f(x), x)
    DEFAULT.scale = 2.0
    np.testing.assert_array_equal(f(x), 2.0 * x)


def test_a_parameter_rebound_to_a_sub_object_is_a_local(backend):
    """`cfg = cfg.model; cfg.dim`: a parameter the code assigns is a local, so none of its
    chains are checked (the docs say so): the inner value is baked in, never read from the
    outer object, and verify= catches the change."""
    inner = _ns(dim=2.0)
    outer = _ns(dim=1.0, model=inner)

    @tg.compile(backend=backend)
    def f(x, cfg):
        cfg = cfg.model
        out = tg.empty_like(x)
        scale[1, N](x, cfg.dim, out)
        return out

    x = _x()
    np.testing.assert_array_equal(f(x, outer), 2.0 * x)
    inner.dim = 5.0
    np.testing.assert_array_equal(f(x, outer), 2.0 * x)  # baked in
    assert f._contract.chains == tuple(c for c in f._contract.chains if c.name != "cfg")
    verified = tg.compile(f.__wrapped__, backend=backend, verify=True)
    verified(x, outer)
    inner.dim = 6.0
    with pytest.raises(tg.StaleGraphError):
        verified(x, outer)


@pytest.mark.parametrize("make", [types.SimpleNamespace, argparse.Namespace],
                         ids=["SimpleNamespace", "argparse.Namespace"])
def test_a_namespace_of_settings_passed_as_an_argument_is_checked(backend, make):
    """A plain object argument is checked by identity and through its chains; a
    SimpleNamespace or argparse.Namespace (unhashable: they compare by fields) is refused
    with "cannot live in a graph", though nothing of it goes into the graph."""
    cfg = make(scale=2.0)

    @tg.compile(backend=backend)
    def f(x, cfg):
        out = tg.empty_like(x)
        scale[1, N](x, cfg.scale, out)
        return out

    x = _x()
    np.testing.assert_array_equal(f(x, cfg), 2.0 * x)
    cfg.scale = 3.0
    np.testing.assert_array_equal(f(x, cfg), 3.0 * x)


# --- staticmethod and classmethod under @tg.compile -----------------------------------

def test_compile_over_a_staticmethod_checks_the_functions_names(backend):
    class Physics:
        g = 2.0

        @tg.compile(backend=backend)
        @staticmethod
        def step(x):
            out = tg.empty_like(x)
            scale[1, N](x, Physics.g, out)
            return out

    x = _x()
    np.testing.assert_array_equal(Physics.step(x), 2.0 * x)
    Physics.g = 3.0
    np.testing.assert_array_equal(Physics.step(x), 3.0 * x)


def test_compile_over_a_staticmethod_called_on_an_instance(backend):
    class Physics:
        @tg.compile(backend=backend)
        @staticmethod
        def step(x):
            out = tg.empty_like(x)
            scale[1, N](x, 2.0, out)
            return out

    np.testing.assert_array_equal(Physics().step(_x()), 2.0 * _x())  # as eagerly


def test_compile_over_a_classmethod_works_or_is_a_clear_error(backend):
    """Eagerly `Cls.step(x)` runs; under @tg.compile it must too (cls.g checked), or be a
    tracegraph error at decoration that says to put @classmethod outside."""
    try:
        class Physics:
            g = 2.0

            @tg.compile(backend=backend)
            @classmethod
            def step(cls, x):
                out = tg.empty_like(x)
                scale[1, N](x, cls.g, out)
                return out
    except tg.TracegraphError as e:
        assert "classmethod" in str(e)
        return
    x = _x()
    np.testing.assert_array_equal(Physics.step(x), 2.0 * x)
    Physics.g = 3.0
    np.testing.assert_array_equal(Physics.step(x), 3.0 * x)


def test_classmethod_and_staticmethod_outside_compile_are_checked(backend):
    class Physics:
        g = 2.0

        @classmethod
        @tg.compile(backend=backend)
        def step(cls, x):
            out = tg.empty_like(x)
            scale[1, N](x, cls.g, out)
            return out

    x = _x()
    np.testing.assert_array_equal(Physics.step(x), 2.0 * x)
    Physics.g = 3.0
    np.testing.assert_array_equal(Physics.step(x), 3.0 * x)


# --- ways of making the compiled callable -----------------------------------------------

def test_compiling_a_bound_method_checks_chains_from_self(backend):
    class Model:
        t = 2.0

        def step(self, x, out):
            scale[1, N](x, self.t, out)

    m = Model()
    f = tg.compile(m.step, backend=backend)
    x, out = cuda.to_device(_x()), cuda.device_array(N)
    for t in (2.0, 2.0, 2.0, 4.0, 4.0, 2.0):
        m.t = t
        f(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), t * _x())


@pytest.mark.parametrize("bind", ["positional", "keyword"])
def test_compiling_a_partial_checks_chains_from_its_bound_arguments(backend, bind):
    cfg = _ns(scale=2.0)

    def step(x, out, cfg):
        scale[1, N](x, cfg.scale, out)

    def step_first(cfg, x, out):
        step(x, out, cfg)
        scale[1, N](x, cfg.scale, out)

    part = (functools.partial(step_first, cfg) if bind == "positional"
            else functools.partial(step, cfg=cfg))
    f = tg.compile(part, backend=backend)
    x, out = cuda.to_device(_x()), cuda.device_array(N)
    for t in (2.0, 2.0, 2.0, 4.0, 4.0):
        cfg.scale = t
        f(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), t * _x())


def test_compiling_a_callable_object_checks_chains_from_self(backend):
    class Step:
        t = 2.0

        def __call__(self, x, out):
            scale[1, N](x, self.t, out)

    s = Step()
    f = tg.compile(s, backend=backend)
    x, out = cuda.to_device(_x()), cuda.device_array(N)
    for t in (2.0, 2.0, 2.0, 4.0, 4.0):
        s.t = t
        f(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), t * _x())


def test_instances_of_a_class_with_a_compiled_method_keep_their_own_state(
        backend):
    class Model:
        def __init__(self, t):
            self.t = t

        @tg.compile(backend=backend)
        def step(self, x, out):
            scale[1, N](x, self.t, out)

    a, b = Model(2.0), Model(3.0)
    x, out = cuda.to_device(_x()), cuda.device_array(N)
    for m in (a, a, a, b, b, a, b, Model.step, a):
        if m is Model.step:
            Model.step(b, x, out)
            m = b
        else:
            m.step(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), m.t * _x())
    a.t = 5.0
    a.step(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), 5.0 * _x())


def test_a_subclass_overriding_a_helper_gets_its_own_graph(backend):
    class Base:
        def act(self, x, out):
            scale[1, N](x, 2.0, out)

        @tg.compile(backend=backend)
        def step(self, x):
            out = tg.empty_like(x)
            self.act(x, out)
            return out

    class Sub(Base):
        def act(self, x, out):
            scale[1, N](x, 3.0, out)

    for _ in range(2):
        np.testing.assert_array_equal(Base().step(_x()), 2.0 * _x())
        np.testing.assert_array_equal(Sub().step(_x()), 3.0 * _x())


def test_closures_made_in_a_loop_see_the_loop_variable_as_eagerly(backend):
    fs = []
    for s in (1.0, 2.0, 3.0):
        @tg.compile(backend=backend)
        def f(x):
            out = tg.empty_like(x)
            scale[1, N](x, s, out)  # noqa: B023 - late binding is the point
            return out
        np.testing.assert_array_equal(f(_x()), s * _x())
        fs.append(f)
    for f in fs:  # one cell, late binding: each sees the last value
        np.testing.assert_array_equal(f(_x()), 3.0 * _x())


# --- what a checked value is ----------------------------------------------------------

def test_a_property_in_a_chain_is_read_on_every_call(backend):
    class Model:
        _t = 2.0

        @property
        def t(self):
            return self._t * 1.0

        @tg.compile(backend=backend)
        def step(self, x):
            out = tg.empty_like(x)
            scale[1, N](x, self.t, out)
            return out

    m = Model()
    np.testing.assert_array_equal(m.step(_x()), 2.0 * _x())
    m._t = 5.0
    np.testing.assert_array_equal(m.step(_x()), 5.0 * _x())
    m.step(_x())
    assert m.step.cache_info().graphs == 2


def test_a_nan_or_a_new_numpy_scalar_does_not_trace_every_call(backend):
    cfg = _ns(clip=math.nan, s=np.float64(2.0))

    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty_like(x)
        scale[1, N](x, cfg.s if math.isnan(cfg.clip) else 0.0, out)
        return out

    for _ in range(4):
        cfg.s = np.float64(2.0)  # a new object, the same value
        np.testing.assert_array_equal(f(_x()), 2.0 * _x())
    assert f.cache_info().graphs == 1


@cuda.jit
def _divide(x, a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] / a


@pytest.mark.filterwarnings("ignore:divide by zero")
def test_negative_zero_is_another_value_than_zero(backend):
    cfg = _ns(d=0.0)

    @tg.compile(backend=backend)
    def f(x, a):
        out = tg.empty_like(x)
        _divide[1, N](x, cfg.d if a is None else a, out)
        return out

    x = _x() + 1.0
    np.testing.assert_array_equal(f(x, None), np.full(N, np.inf))
    cfg.d = -0.0
    np.testing.assert_array_equal(f(x, None), np.full(N, -np.inf))
    np.testing.assert_array_equal(f(x, 0.0), np.full(N, np.inf))
    np.testing.assert_array_equal(f(x, -0.0), np.full(N, -np.inf))


def test_an_attribute_that_appears_or_goes_later_is_seen(backend):
    cfg = _ns()

    @tg.compile(backend=backend)
    def f(x):
        try:
            b = cfg.bias
        except AttributeError:
            b = 1.0
        out = tg.empty_like(x)
        scale[1, N](x, b * (cfg.gain if hasattr(cfg, "gain") else 1.0), out)
        return out

    np.testing.assert_array_equal(f(_x()), _x())
    cfg.bias = 4.0
    np.testing.assert_array_equal(f(_x()), 4.0 * _x())
    cfg.gain = 0.5
    np.testing.assert_array_equal(f(_x()), 2.0 * _x())
    del cfg.bias
    np.testing.assert_array_equal(f(_x()), 0.5 * _x())


def test_a_dict_config_with_attribute_access_is_checked(backend):
    class AttrDict(dict):
        __getattr__ = dict.__getitem__
        __setattr__ = dict.__setitem__

    cfg = AttrDict(scale=2.0)  # missing keys raise KeyError, not AttributeError

    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty_like(x)
        scale[1, N](x, cfg.scale * (cfg.bias if "bias" in cfg else 1.0), out)
        return out

    np.testing.assert_array_equal(f(_x()), 2.0 * _x())
    cfg.scale = 3.0
    np.testing.assert_array_equal(f(_x()), 3.0 * _x())
    cfg.bias = 2.0
    np.testing.assert_array_equal(f(_x()), 6.0 * _x())


def test_a_property_raising_on_an_untaken_branch_is_not_an_error(backend):
    class Model:
        _w = None

        @property
        def w(self):
            if self._w is None:
                raise RuntimeError("not loaded")
            return self._w

        @tg.compile(backend=backend)
        def step(self, x):
            out = tg.empty_like(x)
            if self._w is not None:
                add[1, N](x, self.w, out)
            else:
                scale[1, N](x, 1.0, out)
            return out

    m = Model()
    np.testing.assert_array_equal(m.step(_x()), _x())
    np.testing.assert_array_equal(m.step(_x()), _x())
    m._w = cuda.to_device(np.ones(N))
    np.testing.assert_array_equal(m.step(_x()), _x() + 1.0)


# --- the direct replay, call forms, key= with max_graphs and dynamic= -------------------

def test_the_direct_replay_follows_scalar_arguments_in_every_call_form(backend):
    @tg.compile(backend=backend)
    def f(x, out, a=1.0):
        scale[1, N](x, a, out)

    x, out = cuda.to_device(_x()), cuda.device_array(N)
    calls = [(lambda: f(x, out, 2.0), 2.0), (lambda: f(x, out, a=2.0), 2.0),
             (lambda: f(x=x, out=out, a=2.0), 2.0), (lambda: f(x, out), 1.0),
             (lambda: f(out=out, x=x), 1.0), (lambda: f(x, out, 3.0), 3.0),
             (lambda: f(x, out, 3.0), 3.0), (lambda: f(x, out, -0.0), -0.0),
             (lambda: f(x, out, 3), 3.0), (lambda: f(x, out, True), 1.0)]
    for k, (call, want) in enumerate(calls * 2):
        call()
        np.testing.assert_array_equal(out.copy_to_host(), want * _x(), err_msg=str(k))


def test_key_with_max_graphs_evicts_and_traces_again_on_the_direct_replay(
        backend):
    state = _ns(v=2.0)
    hidden = (lambda: state.v)

    @tg.compile(backend=backend, key=lambda: state.v, max_graphs=2)
    def f(x, out):
        scale[1, N](x, hidden(), out)

    x, out = cuda.to_device(_x()), cuda.device_array(N)
    for v in (1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 1.0, 1.0, 2.0, 3.0, 1.0, 1.0, 1.0):
        state.v = v
        f(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), v * _x())
    assert f.cache_info().graphs == 2


def test_key_with_dynamic_lengths_and_values(backend):
    state = _ns(v=2.0)
    hidden = (lambda: state.v)

    @tg.compile(backend=backend, dynamic={"x": 0, "a": "value"}, buckets=(8, 32),
                key=lambda: state.v)
    def f(x, a):
        out = tg.empty_like(x)
        scale[1, N](x, a, out)
        scale[1, N](out, hidden(), out)
        return out

    for v, n, a in ((2.0, 5, 1.0), (3.0, 5, 1.0), (3.0, 20, 2.0), (2.0, 20, 3.0),
                    (2.0, 6, 1.0), (3.0, 7, 5.0)):
        state.v = v
        x = np.arange(n, dtype=np.float64)
        np.testing.assert_array_equal(f(x, a), v * a * x)


# --- verify= ------------------------------------------------------------------------

def test_verify_catches_state_read_through_a_local_alias(backend):
    cfg = _ns(scale=1.0)

    @tg.compile(backend=backend, verify=True)
    def f(x):
        c = cfg  # a local: outside the checked names
        out = tg.empty_like(x)
        scale[1, N](x, c.scale, out)
        return out

    f(_x())
    cfg.scale = 2.0
    with pytest.raises(tg.StaleGraphError, match=r"was 1\.0 .* is 2\.0"):
        f(_x())


def test_verify_raises_no_error_for_objects_a_trace_makes_anew(backend):
    """A lambda callback, a kernel defined inside and arrays allocated inside are new
    objects on every trace: the same graph all the same."""
    log = []

    @tg.compile(backend=backend, verify=True)
    def f(x):
        @cuda.jit
        def plus_one(x, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = x[i] + 1
        tmp = cuda.device_array(N)
        plus_one[1, N](x, tmp)
        out = tg.zeros(N, np.float64)
        add[1, N](tmp, x, out)
        tg.callback(lambda: log.append(1), out)
        return out

    for _ in range(3):
        np.testing.assert_array_equal(f(_x()), 2.0 * _x() + 1.0)
    assert len(log) == 3


def test_verify_every_nth_call_also_counts_direct_replays(backend):
    state = _ns(v=2.0)
    hidden = (lambda: state.v)

    @tg.compile(backend=backend, verify=2)
    def f(x, out):
        scale[1, N](x, hidden(), out)

    x, out = cuda.to_device(_x()), cuda.device_array(N)
    for _ in range(5):
        f(x, out)
    state.v = 3.0
    with pytest.raises(tg.StaleGraphError):
        f(x, out)
        f(x, out)


def test_verify_with_dynamic_and_key(backend):
    state = _ns(v=2.0, w=1.0)
    hidden = (lambda: state.v * state.w)

    @tg.compile(backend=backend, verify=True, dynamic={"x": 0}, buckets=(8, 32),
                key=lambda: state.v)
    def f(x):
        out = tg.empty_like(x)
        scale[1, N](x, hidden(), out)
        return out

    for v, n in ((2.0, 5), (2.0, 20), (3.0, 7), (2.0, 6)):
        state.v = v
        x = np.arange(n, dtype=np.float64)
        np.testing.assert_array_equal(f(x), v * x)
    state.w = 2.0
    with pytest.raises(tg.StaleGraphError):
        f(np.arange(5, dtype=np.float64))


# --- threads --------------------------------------------------------------------------

def _in_threads(work, values):
    errors: list = []

    def run(v):
        try:
            work(v, errors)
        except Exception as e:  # reported below with the others
            errors.append(repr(e))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=run, args=(v,)) for v in values]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    return errors


def test_threads_with_a_thread_local_key_and_shared_inputs(backend):
    local = threading.local()
    hidden = (lambda: local.v)

    @tg.compile(backend=backend, key=lambda: local.v)
    def f(x, out):
        scale[1, N](x, hidden(), out)

    x = cuda.to_device(_x())

    def work(v, errors):
        local.v, out = v, cuda.device_array(N)
        for _ in range(12):
            f(x, out)
            got = out.copy_to_host()
            if not np.array_equal(got, v * _x()):
                errors.append((v, got[1]))

    assert not _in_threads(work, [1.0, 2.0, 3.0])


def test_threads_making_the_first_call_at_once_trace_one_graph(backend):
    f = _scaled(backend, lambda: 2.0)

    def work(v, errors):
        got = f(_x())
        if not np.array_equal(got, 2.0 * _x()):
            errors.append((v, got[1]))

    assert not _in_threads(work, range(4))
    assert f.cache_info().graphs == 1


# --- whole programs against eager Numba -----------------------------------------------

TPB = 16


@cuda.jit
def _accel(pos, acc, soft2):
    tile = cuda.shared.array((TPB, 2), float64)
    i = cuda.grid(1)
    tx = cuda.threadIdx.x
    ax = 0.0
    ay = 0.0
    for t in range(cuda.gridDim.x):
        tile[tx, 0] = pos[t * TPB + tx, 0]
        tile[tx, 1] = pos[t * TPB + tx, 1]
        cuda.syncthreads()
        for k in range(TPB):
            dx = tile[k, 0] - pos[i, 0]
            dy = tile[k, 1] - pos[i, 1]
            r2 = dx * dx + dy * dy + soft2
            inv = 1.0 / (r2 * r2 ** 0.5)
            ax += dx * inv
            ay += dy * inv
        cuda.syncthreads()
    acc[i, 0] = ax
    acc[i, 1] = ay


@cuda.jit
def _kick_drift(pos, vel, acc, dt):
    i = cuda.grid(1)
    if i < pos.shape[0]:
        for d in range(2):
            vel[i, d] += acc[i, d] * dt
            pos[i, d] += vel[i, d] * dt


@cuda.jit
def _drift(pos, vel, acc, dt):
    i = cuda.grid(1)
    if i < pos.shape[0]:
        for d in range(2):
            pos[i, d] += vel[i, d] * dt


SIM = _ns(dt=0.01, soft=0.1, substeps=2, integrator=_kick_drift)


def _nbody_step(pos, vel):
    acc = cuda.device_array_like(pos)
    for _ in range(SIM.substeps):
        _accel[N // TPB, TPB](pos, acc, SIM.soft ** 2)
        SIM.integrator[N // TPB, TPB](pos, vel, acc, SIM.dt)


def test_a_notebook_n_body_simulation_rebinding_its_settings_and_kernel(backend):
    f = tg.compile(_nbody_step, backend=backend)
    rng = np.random.default_rng(0)
    start = rng.random((N, 2))
    mine = cuda.to_device(start), cuda.to_device(np.zeros((N, 2)))
    eager = cuda.to_device(start), cuda.to_device(np.zeros((N, 2)))
    changes = [("dt", 0.02), ("substeps", 3), ("integrator", _drift),
               ("integrator", _kick_drift), ("dt", 0.01)]
    try:
        for name, value in [(None, None), *changes]:
            if name:
                setattr(SIM, name, value)
            f(*mine)
            _nbody_step(*eager)
            np.testing.assert_array_equal(mine[0].copy_to_host(), eager[0].copy_to_host(),
                                          err_msg=str(name))
    finally:
        SIM.__dict__.update(dt=0.01, soft=0.1, substeps=2, integrator=_kick_drift)


@cuda.jit
def _physics(pos, vel, dt, g):
    i = cuda.grid(1)
    if i < pos.size:
        vel[i] += g * dt
        pos[i] += vel[i] * dt


@cuda.jit
def _reward(pos, target, r):
    i = cuda.grid(1)
    if i < pos.size:
        r[i] = -abs(pos[i] - target)


class _Env:
    def __init__(self):
        self.n, self.gravity, self.dt, self.target = N, -9.8, 0.01, 1.0
        self.reset()

    def reset(self):
        self.pos = cuda.to_device(np.zeros(self.n))
        self.vel = cuda.to_device(np.zeros(self.n))

    def step(self, r):
        _physics[1, self.n](self.pos, self.vel, self.dt, self.gravity)
        _reward[1, self.n](self.pos, self.target, r)
        return r


def test_an_environment_step_follows_reset_and_new_parameters(backend):
    mine, eager = _Env(), _Env()
    f = tg.compile(mine.step, backend=backend)
    rm, re = cuda.device_array(N), cuda.device_array(N)
    for k in range(12):
        for env in (mine, eager):
            if k in (3, 9):
                env.n = 8 if k == 9 else env.n
                env.reset()
            env.gravity = -1.6 if k >= 5 else env.gravity
            env.target = 2.0 if k >= 7 else env.target
        f(rm)
        eager.step(re)
        np.testing.assert_array_equal(rm.copy_to_host(), re.copy_to_host(), err_msg=str(k))
        np.testing.assert_array_equal(mine.pos.copy_to_host(), eager.pos.copy_to_host())


class _Scaler:
    def forward(self, opts, x):
        out = tg.empty_like(x)
        scale[1, 16](x, opts.scale, out)
        return out


def test_compiling_a_partial_of_a_bound_method_checks_the_partials_argument(backend):
    """partial(model.forward, opts): opts fills the parameter after self."""
    opts = types.SimpleNamespace(scale=2.0)
    f = tg.compile(functools.partial(_Scaler().forward, opts), backend=backend)
    x = np.arange(16, dtype=np.float64)
    np.testing.assert_array_equal(f(x), 2.0 * x)
    opts.scale = 3.0
    np.testing.assert_array_equal(f(x), 3.0 * x)
