"""The Python-state contract's automatic checks (tracegraph/contract/): the global and
closure names a traced function's own code loads, and the attribute chains it loads from
them and from its parameters, choose its graph with the call's signature. A changed value
traces a new graph, a value seen before reuses its graph, on both backends and through the
direct replay of a call of the very same objects. What the contract leaves out (state read
inside callees or through computed names) is baked in: key= and verify= serve it
(test_key_and_verify.py)."""
from __future__ import annotations

import types

import numpy as np
import pytest
from numba import cuda
from small_kernels import add, scale

import tracegraph as tg

N = 32


def _x():
    return np.arange(N, dtype=np.float64)


class _Config:
    pass


CFG = _Config()
CFG.scale = 2.0
DEEP = _Config()


def _chain(depth: int, value: float) -> _Config:
    """DEEP.a.a. ... .a.value, `depth` attributes down."""
    node = leaf = _Config()
    leaf.value = value
    for _ in range(depth):
        parent = _Config()
        parent.a = node
        node = parent
    return node


def test_a_global_attribute_chain_changed_between_calls_traces_again(backend):
    CFG.scale = 2.0

    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty_like(x)
        scale[1, N](x, CFG.scale, out)
        return out

    x = _x()
    np.testing.assert_array_equal(f(x), 2.0 * x)
    CFG.scale = 3.0
    np.testing.assert_array_equal(f(x), 3.0 * x)
    CFG.scale = 2.0  # seen before: its graph again, no trace
    np.testing.assert_array_equal(f(x), 2.0 * x)
    info = f.cache_info()
    assert (info.graphs, info.misses[0], info.hits[0]) == (2, 2, 1)


def test_a_chain_nine_attributes_deep_is_checked(backend):
    DEEP.root = _chain(8, 2.0)

    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty_like(x)
        scale[1, N](x, DEEP.root.a.a.a.a.a.a.a.a.value, out)
        return out

    x = _x()
    np.testing.assert_array_equal(f(x), 2.0 * x)
    DEEP.root.a.a.a.a.a.a.a.a.value = 5.0  # changed in place, nine steps down
    np.testing.assert_array_equal(f(x), 5.0 * x)


def test_a_closure_variable_rebound_between_calls_traces_again(backend):
    factor = 2.0

    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty_like(x)
        scale[1, N](x, factor, out)
        return out

    x = _x()
    np.testing.assert_array_equal(f(x), 2.0 * x)
    factor = 4.0
    np.testing.assert_array_equal(f(x), 4.0 * x)


def test_a_chain_from_a_parameter_is_checked_on_a_method(backend):
    class Model:
        def __init__(self):
            self.cfg = _Config()
            self.cfg.temperature = 2.0

        @tg.compile(backend=backend)
        def step(self, x):
            out = tg.empty_like(x)
            scale[1, N](x, self.cfg.temperature, out)
            return out

    m, x = Model(), _x()
    np.testing.assert_array_equal(m.step(x), 2.0 * x)
    m.cfg.temperature = 0.5
    np.testing.assert_array_equal(m.step(x), 0.5 * x)
    m.cfg = _Config()  # a new object holding an equal value: the same graph
    m.cfg.temperature = 0.5
    np.testing.assert_array_equal(m.step(x), 0.5 * x)
    assert m.step.cache_info().graphs == 2


def test_names_loaded_by_nested_functions_are_checked(backend):
    CFG.scale = 2.0

    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty_like(x)
        factor = (lambda: CFG.scale)()
        scale[1, N](x, factor, out)
        return out

    x = _x()
    np.testing.assert_array_equal(f(x), 2.0 * x)
    CFG.scale = 7.0
    np.testing.assert_array_equal(f(x), 7.0 * x)
    CFG.scale = 2.0


@cuda.jit
def _double(x, a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2.0 * a * x[i]


KERNEL = scale


def test_a_kernel_name_rebound_launches_the_new_kernel(backend):
    global KERNEL
    KERNEL = scale

    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty_like(x)
        KERNEL[1, N](x, 1.0, out)
        return out

    x = _x()
    np.testing.assert_array_equal(f(x), x)
    KERNEL = _double  # a notebook cell run again: eagerly the new kernel runs
    try:
        np.testing.assert_array_equal(f(x), 2.0 * x)
    finally:
        KERNEL = scale


W = None


def test_a_global_device_array_rebound_is_followed(backend):
    global W
    W = cuda.to_device(np.full(N, 1.0))

    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty_like(x)
        add[1, N](x, W, out)
        return out

    x = cuda.to_device(_x())
    np.testing.assert_array_equal(f(x).copy_to_host(), _x() + 1.0)
    W = cuda.to_device(np.full(N, 10.0))  # the name finds another array: another graph
    np.testing.assert_array_equal(f(x).copy_to_host(), _x() + 10.0)


def test_the_direct_replay_sees_a_changed_name(backend):
    """A call of the very same device arrays replays without describing them (the C helper
    where it is built): it checks the names too."""
    CFG.scale = 2.0

    @tg.compile(backend=backend)
    def f(x, out):
        scale[1, N](x, CFG.scale, out)

    x, out = cuda.to_device(_x()), cuda.device_array(N)
    for _ in range(3):  # armed, then direct
        f(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), 2.0 * _x())
    CFG.scale = 3.0
    f(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), 3.0 * _x())
    CFG.scale = 2.0
    f(x, out)
    f(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), 2.0 * _x())


def test_a_method_called_on_self_does_not_trace_every_call(backend):
    """`self.helper(x)` reads a new bound method each time: the same instance and
    function, so the same graph."""
    class Model:
        factor = 3.0

        def helper(self, x, out):
            scale[1, N](x, self.factor, out)

        @tg.compile(backend=backend)
        def step(self, x, out):
            self.helper(x, out)

    m = Model()
    x, out = cuda.to_device(_x()), cuda.device_array(N)
    for _ in range(4):
        m.step(x, out)
    assert m.step.cache_info().graphs == 1
    np.testing.assert_array_equal(out.copy_to_host(), 3.0 * _x())


def test_state_the_function_sets_itself_is_not_checked_and_is_warned_about(backend):
    """A counter the traced method bumps is its own state: its Python runs only when it
    traces, so the graph keeps the value the trace read (a warning at the first trace
    says so) rather than tracing again on every call."""
    class Env:
        def __init__(self):
            self.t = 0

        @tg.compile(backend=backend)
        def step(self, x):
            out = tg.empty_like(x)
            scale[1, N](x, float(self.t), out)
            self.t += 1
            return out

    env, x = Env(), _x()
    with pytest.warns(UserWarning, match=r"sets self\.t, which it also reads") as caught:
        np.testing.assert_array_equal(env.step(x), 0.0 * x)
    assert caught[0].filename == __file__
    for _ in range(3):
        np.testing.assert_array_equal(env.step(x), 0.0 * x)
    assert env.t == 1 and env.step.cache_info().graphs == 1


def test_state_outside_the_function_it_reads_and_sets_is_one_warning(backend):
    class Counter:
        t = 0

    counter = Counter()

    @tg.compile(backend=backend)
    def step(x):
        out = tg.empty_like(x)
        scale[1, N](x, float(counter.t), out)
        counter.t += 1
        return out

    with pytest.warns(UserWarning) as caught:
        step(_x())
    said = [str(w.message) for w in caught if "counter.t" in str(w.message)]
    assert len(said) == 1 and "which it also reads" in said[0]


def test_a_value_changed_on_every_call_warns_after_eight_traces(backend):
    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty_like(x)
        scale[1, N](x, CFG.scale, out)
        return out

    x = _x()
    with pytest.warns(UserWarning, match=r"traced again 8 times because .*CFG\.scale") \
            as caught:
        for t in range(9):
            CFG.scale = float(t)
            np.testing.assert_array_equal(f(x), float(t) * x)
    assert caught[0].filename == __file__
    CFG.scale = 2.0


def test_an_array_made_while_tracing_kept_in_state_warns(backend):
    class Lazy:
        buf = None

    lazy = Lazy()

    @tg.compile(backend=backend)
    def f(x):
        if lazy.buf is None:
            lazy.buf = cuda.device_array(N)
        scale[1, N](x, 2.0, lazy.buf)
        return lazy.buf

    with pytest.warns(UserWarning,
                      match=r"keeps an array it made while tracing in lazy\.buf") as caught:
        f(_x())
    assert caught[0].filename == __file__


def test_state_outside_the_checked_names_is_baked_in(backend):
    """The documented limit: a value read through a computed name (or inside a function
    the traced function calls) is not checked; the graph keeps what the trace read."""
    import operator
    CFG.hidden = 2.0

    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty_like(x)
        scale[1, N](x, operator.attrgetter("hidden")(CFG), out)
        return out

    x = _x()
    np.testing.assert_array_equal(f(x), 2.0 * x)
    CFG.hidden = 3.0
    np.testing.assert_array_equal(f(x), 2.0 * x)  # baked in: key= or verify= see it


def test_checks_are_made_once_per_function_from_its_bytecode():
    def f(x):
        return CFG.scale, KERNEL, tg.empty_like(x), x.shape

    chains = tg.compile(f)._contract.chains
    assert [c.describe() for c in chains] == ["CFG.scale", "KERNEL", "tg.empty_like",
                                              "x.shape"]


def test_an_unchanged_builtin_or_missing_global_is_not_a_change(backend):
    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty_like(x)
        for _ in range(len([1])):
            scale[1, N](x, 1.0, out)
        return out

    x = _x()
    f(x)
    f(x)
    assert f.cache_info().graphs == 1


def test_a_module_attribute_function_is_checked_by_identity(backend):
    mod = types.SimpleNamespace(k=scale)

    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty_like(x)
        mod.k[1, N](x, 1.0, out)
        return out

    x = _x()
    np.testing.assert_array_equal(f(x), x)
    mod.k = _double
    np.testing.assert_array_equal(f(x), 2.0 * x)


def test_a_compiled_method_warms_up_bound_to_its_instance(backend):
    class Model:
        factor = 2.0

        @tg.compile(backend=backend)
        def step(self, x):
            out = tg.empty_like(x)
            scale[1, N](x, self.factor, out)
            return out

    m = Model()
    m.step.warmup(_x())
    assert m.step.cache_info().graphs == 1
    np.testing.assert_array_equal(m.step(_x()), 2.0 * _x())
    assert m.step.cache_info().misses[0] == 1
