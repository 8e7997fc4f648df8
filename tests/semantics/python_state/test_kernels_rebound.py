"""Kernels and device functions rebound: a launched kernel (a global, a closure cell, an
attribute, a class attribute, a callable object's, one held by a functools.partial)
rebound between calls is the new one; a device function a kernel calls by a global name
rebound between traces is seen (and refused where the graph was traced for the old one,
or inside the trace); a tuple of the same device functions rebuilt, or a host API
reallocating its workspace, is no rebinding."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from access_checks import orders_differing_from_eager
from eager import matches_eager
from numba import cuda
from numba.cuda import to_device as _to_device
from small_kernels import copy, increment

import tracegraph as tg
from tracegraph.errors import SignatureError


@cuda.jit
def _times_two(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2 * x[i]


@cuda.jit
def _plus_100(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + 100


@cuda.jit
def _negate(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = -x[i]


ACT = _times_two


def test_a_launched_kernel_rebound_between_calls_is_the_new_one(backend, monkeypatch):
    global ACT
    from tracegraph.signature import arguments
    # device arrays of fixed metadata take the direct replay path, as Numba's do on a GPU
    monkeypatch.setattr(arguments, "_FIXED", arguments._FIXED | {type(cuda.to_device(np.ones(1)))})
    ACT = _times_two
    x, out = cuda.to_device(np.arange(4.0)), cuda.device_array(4)

    def step(x, out):
        ACT[1, 32](x, out)

    f = tg.compile(step, backend=backend)
    for _ in range(3):  # the first call arms the direct replay, the next ones take it
        f(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), 2 * np.arange(4.0))
    ACT = _plus_100  # a notebook cell run again
    f(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(4.0) + 100)
    f.replay(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(4.0) + 100)
    ACT = _times_two
    f(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), 2 * np.arange(4.0))

    def make(kernel):
        def closed(x, out):
            kernel[1, 32](x, out)
        return closed, lambda k: closed.__closure__[0].__setattr__("cell_contents", k)
    closed, rebind = make(_times_two)
    g = tg.compile(closed, backend=backend)
    g(x, out)
    g(x, out)
    rebind(_negate)
    g(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), -np.arange(4.0))


class Model:
    def __init__(self, kernel):
        self.kernel = kernel

    def __eq__(self, other):
        return isinstance(other, Model)

    def __hash__(self):
        return 0

    def step(self, x, out):
        self.kernel[1, 32](x, out)


def test_a_kernel_held_by_an_attribute_rebound_is_the_new_one(backend):
    x, out = cuda.to_device(np.arange(4.0)), cuda.device_array(4)
    m = Model(_times_two)
    f = tg.compile(Model.step, backend=backend)
    f(m, x, out)
    m.kernel = _negate
    f(m, x, out)
    np.testing.assert_array_equal(out.copy_to_host(), -np.arange(4.0))
    with pytest.raises(SignatureError, match="another kernel"):
        m.kernel = _plus_100
        f.replay(m, x, out)


class KernelHolder:
    act = _times_two
    W = np.full(4, 2.0)


class Block:
    act = _times_two

    def __eq__(self, other):
        return isinstance(other, Block)

    def __hash__(self):
        return 1

    def step(self, x, out):
        type(self).act[1, 32](x, out)  # (through the class: a Numba kernel binds to an instance)


class Callable:
    def __init__(self):
        self.k = _times_two

    def __call__(self, x, out):
        self.k[1, 32](x, out)


T2 = np.full(8, 2.0)


@cuda.jit
def twice(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= 2


def _ones():
    return cuda.to_device(np.ones(4))


def _launch(kernel, x):
    kernel[1, 32](x)


STEP = functools.partial(_launch, increment)


def test_a_kernel_held_by_a_partial(backend):
    global STEP

    def step(x):
        STEP(x)

    f, x = tg.compile(step, backend=backend), _ones()
    saved = STEP
    try:
        f(x)
        STEP = functools.partial(_launch, twice)
        f(x)
    finally:
        STEP = saved
    np.testing.assert_allclose(x.copy_to_host(), 4.0)


N = 8


def _mode_of(prog, kernel, buffer_pred):
    op = next(op for op in prog.ops if op.name == kernel.py_func.__name__)
    return "".join(("r" if a.reads else "") + ("w" if a.writes else "")
                   for a in op.accesses if buffer_pred(prog.buffers[a.buffer]))


OLD = cuda.to_device(np.zeros(N))


NEW = cuda.to_device(np.zeros(N))


@cuda.jit(device=True)
def _write_old(i):
    OLD[i] = 7.0


@cuda.jit(device=True)
def _write_new(i):
    NEW[i] = 7.0


OP = _write_old


@cuda.jit
def calls_the_global_op(out):
    i = cuda.grid(1)
    if i < out.size:
        OP(i)


def test_rebinding_a_global_device_function_is_seen_by_a_new_trace(monkeypatch):
    """A global device-function name (`OP = ...`) rebound after the kernel's first trace
    (sim: the simulator calls what the name holds when the kernel runs; on a GPU Numba keeps
    the first callee it compiled, which the baked-array check refuses)."""
    global OP

    def step(out):
        calls_the_global_op[1, N](out)
        copy[1, N](NEW, out)
        return out

    def make():
        return (cuda.to_device(np.ones(N)),)

    def reset():
        OLD.copy_to_device(np.zeros(N))
        NEW.copy_to_device(np.zeros(N))

    f = tg.compile(step, backend="sim")
    f(*make())   # first trace: OP is _write_old
    OP = _write_new
    try:
        with pytest.raises(tg.TracegraphError, match="bound to another array or function"):
            f(*make())  # the graph traced for the old callee is refused
        prog = tg.compile(step, backend="sim").trace(*make())
        assert "w" in _mode_of(prog, calls_the_global_op, lambda b: b.external is NEW), \
            "new trace still records the old callee's array"
        reset()
        matches_eager(step, make, "sim", monkeypatch=monkeypatch)
    finally:
        OP = _write_old


def test_a_device_function_name_rebound_inside_the_traced_function_is_refused(backend):
    global OP

    def step(out):
        global OP
        calls_the_global_op[1, N](out)
        OP = _write_new
        calls_the_global_op[1, N](out)
        OP = _write_old

    with pytest.raises(tg.TraceError, match="bound to another function"):
        tg.compile(step, backend=backend)(cuda.to_device(np.zeros(N)))
    OP = _write_old


def _modes(prog, kernel_name, pred=lambda _: True):
    return ["".join(("r" if a.reads else "", "w" if a.writes else ""))
            for op in prog.ops if op.name == kernel_name
            for a in op.accesses if pred(prog.buffers[a.buffer])]


H1 = cuda.to_device(np.zeros(N))


H2 = cuda.to_device(np.zeros(N))


@cuda.jit(device=True)
def _put1(i, v):
    H1[i] = v


@cuda.jit(device=True)
def _put2(i, v):
    H2[i] = v


PUT = _put1


@cuda.jit(device=True)
def _put(i, v):
    PUT(i, v)


@cuda.jit
def calls_put_with_star_args(x):
    i = cuda.grid(1)
    if i < x.size:
        t = (i, x[i])
        _put(*t)


def test_rebinding_a_name_an_unfollowed_callee_calls_is_seen(monkeypatch):
    """Global device function PUT called by a callee reached through `f(*t)`, rebound."""
    global PUT

    def step(x, out):
        calls_put_with_star_args[1, N](x)
        copy[1, N](H2, out)

    def make():
        H1.copy_to_device(np.zeros(N))
        H2.copy_to_device(np.zeros(N))
        return cuda.to_device(np.arange(N) + 1.0), cuda.to_device(np.zeros(N))

    tg.compile(step, backend="sim").trace(*make())      # analysed with PUT = _put1
    PUT = _put2
    try:
        prog = tg.compile(step, backend="sim").trace(*make())
        assert "w" in "".join(_modes(prog, "calls_put_with_star_args",
                                     lambda b: b.external is H2)), \
            "the new trace still records the old callee's array (H1), not H2"
        assert orders_differing_from_eager(step, make, monkeypatch) == []
    finally:
        PUT = _put1


@cuda.jit(device=True)
def _no_sync():
    pass


@cuda.jit(device=True)
def _grid_sync():
    cuda.cg.this_grid().sync()


SYNC = _no_sync


@cuda.jit
def rotate_with_global_sync(a, out):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = i
    SYNC()
    if i < a.size:
        out[i] = a[(i + 33) % a.size]


def test_rebinding_to_a_grid_syncing_device_function_launches_cooperatively():
    """Global SYNC rebound from a no-op to a grid-syncing device function between traces."""
    global SYNC

    def step(a, out):
        rotate_with_global_sync[2, 32](a, out)

    def make():
        return cuda.to_device(np.zeros(64)), cuda.to_device(np.zeros(64))

    tg.compile(step, backend="sim")(*make())
    SYNC = _grid_sync
    try:
        a, out = make()
        tg.compile(step, backend="sim")(a, out)
        np.testing.assert_array_equal(out.copy_to_host(), (np.arange(64) + 33) % 64)
    finally:
        SYNC = _no_sync


N16 = 16


@cuda.jit(device=True)
def _relu(v):
    return v if v > 0 else 0.0


@cuda.jit(device=True)
def _square(v):
    return v * v


ACTIVATIONS = (_relu, _square)


def configure_activations():
    global ACTIVATIONS
    ACTIVATIONS = (_relu, _square)   # equal contents, a new tuple


@cuda.jit
def apply_activations(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = ACTIVATIONS[0](x[i]) + ACTIVATIONS[1](x[i])


def _mk():
    return (_to_device(np.linspace(-1.0, 1.0, N16)), _to_device(np.zeros(N16)),
            _to_device(np.zeros(N16)))


def _want():
    x = np.linspace(-1.0, 1.0, N16)
    return np.maximum(x, 0) + x * x


def test_tuple_of_same_device_functions_rebuilt_inside_trace_is_not_a_rebinding():
    """A global tuple of device functions rebuilt with equal contents inside the trace."""
    def step(x, o1, o2):
        apply_activations[1, N16](x, o1)
        configure_activations()
        apply_activations[1, N16](x, o2)
        return o1, o2

    _, o2 = tg.compile(step, backend="sim")(*_mk())
    np.testing.assert_allclose(o2.copy_to_host(), _want())


def test_tuple_of_same_device_functions_rebuilt_between_calls_is_not_a_rebinding():
    """The same tuple rebuilt between calls on sim."""
    def step(x, o1, o2):
        apply_activations[1, N16](x, o1)
        apply_activations[1, N16](x, o2)
        return o1, o2

    f = tg.compile(step, backend="sim")
    f(*_mk())
    configure_activations()
    o1, _ = f(*_mk())
    np.testing.assert_allclose(o1.copy_to_host(), _want())


# A kernel the analysis cannot fully follow (a kernel-local lambda makes an unknown callee)
# is given every array its names reach. The attribute name `add` of `cuda.atomic.add` names
# this module's host API `add` too, whose workspace (reallocated lazily) the kernel must
# not be given: two independent launches would be ordered, and a host-side reallocation
# refused as a rebinding.
_workspace = cuda.device_array(N16)


def _get_workspace(n):
    global _workspace
    if _workspace.size < n:
        _workspace = cuda.device_array(n)
    return _workspace


def add(x, out):
    """Host API: out[0] += sum(x * x), through a reusable workspace."""
    _get_workspace(x.size)


@cuda.jit
def sum_of_squares(x, out):
    i = cuda.grid(1)
    sq = lambda v: v * v
    if i < x.size:
        cuda.atomic.add(out, 0, sq(x[i]))


def _sos_step(x1, o1, x2, o2):
    sum_of_squares[1, N16](x1, o1)
    sum_of_squares[1, N16](x2, o2)
    return o1, o2


def _sos_args():
    return (_to_device(np.ones(N16)), _to_device(np.zeros(1)), _to_device(np.ones(N16)),
            _to_device(np.zeros(1)))


def test_host_workspace_reallocation_is_not_a_rebinding():
    """The host API reallocating its workspace between calls is no rebinding."""
    global _workspace
    f = tg.compile(_sos_step, backend="sim")
    f(*_sos_args())
    saved = _workspace
    try:
        _get_workspace(4 * N16)   # the host API grew its workspace
        o1, _ = f(*_sos_args())
        np.testing.assert_allclose(o1.copy_to_host(), [float(N16)])
    finally:
        _workspace = saved
