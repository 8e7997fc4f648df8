"""A fourth hostile round, on the third's regressions (each case passed before the third's
fixes, failed after them, and passes again): reads through an index a device function
returns keep an input read-only, a tuple of the same device functions built again is no
rebinding, a host function sharing a name the kernel uses is not followed, an argument
object that only looks like an array is a static argument. On the simulator."""
from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
from numba import cuda
from numba.cuda import to_device as _to_device

import tracegraph as tg

N = 16


def _modes(prog, i):
    return {a.buffer: ("r" if a.reads else "") + ("w" if a.writes else "")
            for a in prog.ops[i].accesses}


def _independent(prog, a, b):
    return not nx.has_path(prog.graph, a, b) and not nx.has_path(prog.graph, b, a)


# ---------------------------------------------------------------------------------------
# Class 2 (lost parallelism). Since round 2 an index the analysis cannot prove a number
# (a device function's result) "may make a view", so `a[helper(i)]` aliases `a`; any call
# the value is then handed to (math.exp, abs, max, cuda.atomic.add: Numba's own functions,
# which touch only their arguments) escapes it, and the read-only input `a` is recorded
# "rw". Two launches reading one input into two outputs are then ordered.

@cuda.jit(device=True)
def global_id():
    return cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x


@cuda.jit(device=True)
def wrap(i, n):
    return (i + n) % n


@cuda.jit(device=True)
def clamp(i, n):
    return min(max(i, 0), n - 1)


@cuda.jit(device=True)
def coords(k, m):
    return k // m, k % m


@cuda.jit
def exp_by_global_id(a, out):
    i = global_id()
    if i < a.size:
        out[i] = math.exp(a[i])


@cuda.jit
def sqrt_of_wrapped_neighbour(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = math.sqrt(a[wrap(i + 1, a.size)])


@cuda.jit
def abs_of_clamped_neighbours(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = abs(a[clamp(i - 1, a.size)]) + max(a[clamp(i + 1, a.size)], 0.0)


@cuda.jit
def sum_of_wrapped_neighbours(a, out):
    i = cuda.grid(1)
    if i < a.size:
        cuda.atomic.add(out, 0, a[wrap(i - 1, a.size)])


@cuda.jit
def abs_by_coords(a, out):
    k = cuda.grid(1)
    if k < a.size:
        i, j = coords(k, a.shape[1])
        out[i, j] = abs(a[i, j])


@cuda.jit
def softmax_rows_by_global_id(a, out):
    r = global_id()
    if r < a.shape[0]:
        m = -1e300
        for c in range(a.shape[1]):
            m = max(m, a[r, c])
        s = 0.0
        for c in range(a.shape[1]):
            s += math.exp(a[r, c] - m)
        for c in range(a.shape[1]):
            out[r, c] = math.exp(a[r, c] - m) / s


ELEMENT_CASES = {  # kernel, input shape, output shape
    "exp_by_global_id": (exp_by_global_id, (N,), (N,)),
    "sqrt_of_wrapped_neighbour": (sqrt_of_wrapped_neighbour, (N,), (N,)),
    "abs_of_clamped_neighbours": (abs_of_clamped_neighbours, (N,), (N,)),
    "sum_of_wrapped_neighbours": (sum_of_wrapped_neighbours, (N,), (1,)),
    "abs_by_coords": (abs_by_coords, (4, 4), (4, 4)),
    "softmax_rows_by_global_id": (softmax_rows_by_global_id, (N, 4), (N, 4)),
}


@pytest.mark.parametrize("case", list(ELEMENT_CASES))
def test_element_read_through_helper_index_keeps_input_read_only(case):
    """a[helper(i)] handed to math/abs/max/atomic records read-only `a` as rw, ordering launches."""
    kernel, shape, out_shape = ELEMENT_CASES[case]

    def step(a, o1, o2):
        kernel[1, N](a, o1)
        kernel[1, N](a, o2)

    a = cuda.to_device(np.random.default_rng(0).random(shape))
    prog = tg.compile(step, backend="sim").trace(
        a, cuda.to_device(np.zeros(out_shape)), cuda.to_device(np.zeros(out_shape)))
    shared = set(_modes(prog, 0)) & set(_modes(prog, 1))   # the buffer of `a`
    assert [_modes(prog, 0)[b] for b in shared] == ["r"], _modes(prog, 0)
    assert _independent(prog, 0, 1), "two launches that only read `a` are ordered"


@cuda.jit(device=True)
def row_sum(row):
    s = 0.0
    for k in range(row.shape[0]):
        s += row[k]
    return s


@cuda.jit
def row_sums_by_global_id(a, out):
    i = global_id()
    if i < a.shape[0]:
        out[i] = row_sum(a[i])


def test_row_view_through_helper_index_passed_to_device_function_is_read_only():
    """row_sum(a[global_id()]) (row.shape in range()) records read-only `a` as rw."""
    def step(a, o1, o2):
        row_sums_by_global_id[1, N](a, o1)
        row_sums_by_global_id[1, N](a, o2)

    a = cuda.to_device(np.ones((N, 4)))
    prog = tg.compile(step, backend="sim").trace(
        a, cuda.to_device(np.zeros(N)), cuda.to_device(np.zeros(N)))
    assert sorted(_modes(prog, 0).values()) == ["r", "w"], _modes(prog, 0)
    assert _independent(prog, 0, 1)


# ---------------------------------------------------------------------------------------
# Class 1 (false refusals). A global tuple of device functions rebuilt with the SAME
# functions (a config/registry helper that reassigns it) is taken for a rebinding: the
# depends check compares the tuple by identity. Eager Numba (GPU: compiled in once; sim:
# the same functions) and 55e865e run it.



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
    return (_to_device(np.linspace(-1.0, 1.0, N)), _to_device(np.zeros(N)),
            _to_device(np.zeros(N)))


def _want():
    x = np.linspace(-1.0, 1.0, N)
    return np.maximum(x, 0) + x * x


def test_tuple_of_same_device_functions_rebuilt_inside_trace_is_not_a_rebinding():
    """A global tuple of device functions rebuilt with equal contents inside the trace."""
    def step(x, o1, o2):
        apply_activations[1, N](x, o1)
        configure_activations()
        apply_activations[1, N](x, o2)
        return o1, o2

    _, o2 = tg.compile(step, backend="sim")(*_mk())
    np.testing.assert_allclose(o2.copy_to_host(), _want())


def test_tuple_of_same_device_functions_rebuilt_between_calls_is_not_a_rebinding():
    """The same tuple rebuilt between calls on sim."""
    def step(x, o1, o2):
        apply_activations[1, N](x, o1)
        apply_activations[1, N](x, o2)
        return o1, o2

    f = tg.compile(step, backend="sim")
    f(*_mk())
    configure_activations()
    o1, _ = f(*_mk())
    np.testing.assert_allclose(o1.copy_to_host(), _want())


# An argument object whose __getattr__ answers every missing name with a dict holding a
# "data" key is now read as a CUDA Array Interface (captured.py/arguments.py accept any
# dict with "data") and crashes with KeyError: 'typestr'; 55e865e took it as a static
# argument.

class _LenientConfig:
    def __init__(self):
        self.scale = 2.0
        self.paths = {"data": "train.csv", "out": "runs/"}

    def __getattr__(self, name):   # unknown keys fall back to the paths section
        return self.paths


@cuda.jit
def _scale(x, out, s):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * s


def test_object_answering_a_dict_with_data_is_a_static_argument():
    """A config object whose __getattr__ returns a dict with 'data' crashes (KeyError 'typestr')."""
    def step(x, out, cfg):
        _scale[1, N](x, out, cfg.scale)
        return out

    out = tg.compile(step, backend="sim")(_to_device(np.ones(N)), _to_device(np.zeros(N)),
                                          _LenientConfig())
    np.testing.assert_allclose(out.copy_to_host(), np.full(N, 2.0))


# ---------------------------------------------------------------------------------------
# Classes 1 and 2. A kernel the analysis cannot fully follow (a kernel-local lambda makes
# an unknown callee) is given every array `reach()` finds; reach() now follows ANY plain
# Python function a name in the kernel's code resolves to among its module's globals. The
# attribute name `add` of `cuda.atomic.add` resolves to this module's host API `add`, whose
# helper names a lazily (re)allocated workspace: the kernel is given the workspace "rw"
# (two independent launches ordered) and a host-side reallocation is refused as a
# rebinding. At 55e865e only device functions were followed.

_workspace = cuda.device_array(N)


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
    sum_of_squares[1, N](x1, o1)
    sum_of_squares[1, N](x2, o2)
    return o1, o2


def _sos_args():
    return (_to_device(np.ones(N)), _to_device(np.zeros(1)), _to_device(np.ones(N)),
            _to_device(np.zeros(1)))


def test_host_function_sharing_an_attribute_name_is_not_followed():
    """A host `add`, named like cuda.atomic.add, is not followed into its workspace."""
    prog = tg.compile(_sos_step, backend="sim").trace(*_sos_args())
    assert not any(b.external is _workspace for b in prog.buffers)
    assert _independent(prog, 0, 1)


def test_host_workspace_reallocation_is_not_a_rebinding():
    """The host API reallocating its workspace between calls is no rebinding."""
    global _workspace
    f = tg.compile(_sos_step, backend="sim")
    f(*_sos_args())
    saved = _workspace
    try:
        _get_workspace(4 * N)   # the host API grew its workspace
        o1, _ = f(*_sos_args())
        np.testing.assert_allclose(o1.copy_to_host(), [float(N)])
    finally:
        _workspace = saved
