"""Captured arrays and parameters reached only through constructs the access analysis must
see through or give up on (tests/hidden_access.py): the trace records at least the access
eager Numba makes, and the graph matches eager Numba (in random orders on sim) where Numba
on the GPU compiles the kernel. Also: a keyword after a skipped default reaches the device
function on the simulator, an object that only looks like an array (a __getattr__
answering everything, a dict with "data") is a static argument, and a host function
named like an attribute the kernel uses (`cuda.atomic.add`) is not followed."""
from __future__ import annotations

import hidden_access as ha
import networkx as nx
import numpy as np
import pytest
from eager import matches_eager
from numba import cuda
from numba.cuda import to_device as _to_device
from small_kernels import copy, fill

import tracegraph as tg

N, GRID, BLOCK = ha.N, 1, ha.N

WRITERS_OF_A_GLOBAL = [
    (ha.loop_over_writers, ha.H),
    (ha.call_an_alias_of_a_parameter, ha.H),
    (ha.store_through_reshape, ha.H),
    (ha.store_through_view, ha.H),
    (ha.store_through_transpose, ha.H),
    (ha.store_through_flat, ha.H),
    (ha.store_module_attribute_T, ha.T),
    (ha.store_module_attribute_size, ha.size),
    (ha.store_global_namedtuple_field, ha.H),
    (ha.call_global_namedtuple_function, ha.H),
    (ha.call_register_jitable, ha.H),
    (ha.call_with_a_default, ha.H),
    (ha.call_with_star_args, ha.H),
    (ha.call_with_keywords, ha.H),
    (ha.call_through_a_dotted_path, ha.H),
    (ha.store_through_an_instance_interface, ha.HELD),
    (ha.call_chosen_by_a_branch, ha.H),
    (ha.call_a_class_attribute, ha.H),
    (ha.pass_a_global_namedtuple, ha.H),
    (ha.call_a_deep_member_through_apply, ha.H),
]
READERS_OF_A_GLOBAL = [ha.read_through_sum, ha.read_through_cuda_register_jitable]


def _name(kernel):
    return kernel.py_func.__name__


def _modes(program, kernel, array):
    """The modes in which the launch of `kernel` touches the captured `array`."""
    op = next(op for op in program.ops if op.name == _name(kernel))
    return {("r" if a.reads else "") + ("w" if a.writes else "") for a in op.accesses
            if program.buffers[a.buffer].external is array}


@pytest.mark.parametrize("kernel,array", WRITERS_OF_A_GLOBAL,
                         ids=[_name(k) for k, _ in WRITERS_OF_A_GLOBAL])
def test_a_hidden_store_to_a_captured_array_is_recorded_and_ordered(backend, monkeypatch,
                                                                    kernel, array):
    def step(out):
        kernel[GRID, BLOCK](out)
        copy[GRID, BLOCK](array, out)  # reads what the kernel stored
        return out

    def make():
        getattr(array, "_keep", array).copy_to_device(np.zeros(N))  # a Holder's array
        return (cuda.to_device(np.ones(N)),)

    f = matches_eager(step, make, backend, monkeypatch=monkeypatch)
    if f is not None:
        assert any("w" in m for m in _modes(f.trace(*make()), kernel, array))


@pytest.mark.parametrize("kernel", READERS_OF_A_GLOBAL, ids=_name)
def test_a_hidden_read_of_a_captured_array_is_recorded_and_ordered(backend, monkeypatch, kernel):
    def step(out):
        fill[GRID, BLOCK](ha.H, 3.0)
        kernel[GRID, BLOCK](out)
        return out

    def make():
        ha.H.copy_to_device(np.zeros(N))
        return (cuda.to_device(np.zeros(N)),)

    f = matches_eager(step, make, backend, monkeypatch=monkeypatch)
    if f is not None:
        assert any("r" in m for m in _modes(f.trace(*make()), kernel, ha.H))


def _param_modes(program, kernel):
    op = next(op for op in program.ops if op.name == _name(kernel))
    return [("r" if a.reads else "") + ("w" if a.writes else "") for a in op.accesses]


def test_a_store_in_a_kernel_local_closure_writes_the_parameter(backend, monkeypatch):
    def step(x):
        fill[GRID, BLOCK](x, 2.0)
        ha.store_through_a_local_closure[GRID, BLOCK](x)
        return x

    f = matches_eager(step, lambda: (cuda.to_device(np.zeros(N)),), backend,
                      monkeypatch=monkeypatch)
    if f is not None:
        assert "w" in "".join(_param_modes(f.trace(cuda.to_device(np.zeros(N))),
                                           ha.store_through_a_local_closure))


def test_namedtuple_fields_named_like_array_attributes_are_arrays(backend, monkeypatch):
    """`t.size` and `t.shape` of a namedtuple argument are its fields, not metadata."""
    def step(a, b, out):
        t = ha.Fields(a, b)
        ha.store_namedtuple_field_size[GRID, BLOCK](t)          # writes a
        ha.read_namedtuple_field_shape[GRID, BLOCK](ha.Fields(a, a), out)  # reads a
        return out

    def make():
        return (cuda.to_device(np.zeros(N)), cuda.to_device(np.zeros(N)),
                cuda.to_device(np.zeros(N)))

    f = matches_eager(step, make, backend, monkeypatch=monkeypatch)
    if f is not None:
        program = f.trace(*make())
        assert "w" in "".join(_param_modes(program, ha.store_namedtuple_field_size))
        assert "r" in "".join(_param_modes(program, ha.read_namedtuple_field_shape))


def test_a_device_function_called_with_keywords_runs_on_sim(backend):
    """The simulator's hook passed positional arguments only."""
    def step(out):
        ha.call_with_keywords[GRID, BLOCK](out)
        return out
    out = cuda.to_device(np.zeros(N))
    tg.compile(step, backend=backend)(out)
    np.testing.assert_array_equal(ha.H.copy_to_host(), np.full(N, 7.0))


class _AnswersEverything:
    """An object whose every attribute exists (a proxy, a mock): not an array."""

    def __getattr__(self, name):
        return lambda *a, **k: None


PROXY = _AnswersEverything()


@cuda.jit
def names_a_proxy(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 1.0 if PROXY is None else 2.0


def test_an_object_answering_every_attribute_is_not_taken_for_an_array():
    from tracegraph._numba.captured import is_device_array
    from tracegraph.signature.arguments import describe
    assert not is_device_array(PROXY) and describe(PROXY) is None

    def step(out):
        names_a_proxy[GRID, BLOCK](out)
        return out
    tg.compile(step, backend="sim").trace(cuda.to_device(np.zeros(N)))


DEFAULT = cuda.to_device(np.zeros(N))


@cuda.jit(device=True)
def _put(i, v=1.0, arr=DEFAULT):
    arr[i] = v


@cuda.jit
def put_with_a_keyword_after_a_skipped_default(x):
    i = cuda.grid(1)
    if i < x.size:
        _put(i, arr=x)


def test_keyword_after_a_skipped_default_reaches_the_device_function(backend):
    """Device-function call `put(i, arr=x)` skipping defaulted `v`: sim drops `arr=x`."""
    def step(x):
        put_with_a_keyword_after_a_skipped_default[1, N](x)
        return x

    DEFAULT.copy_to_device(np.zeros(N))
    x = cuda.to_device(np.zeros(N))
    tg.compile(step, backend=backend)(x)
    np.testing.assert_array_equal(x.copy_to_host(), np.ones(N))    # as Numba on a GPU
    np.testing.assert_array_equal(DEFAULT.copy_to_host(), np.zeros(N))


N16 = 16


def _independent(prog, a, b):
    return not nx.has_path(prog.graph, a, b) and not nx.has_path(prog.graph, b, a)


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
        _scale[1, N16](x, out, cfg.scale)
        return out

    out = tg.compile(step, backend="sim")(_to_device(np.ones(N16)), _to_device(np.zeros(N16)),
                                          _LenientConfig())
    np.testing.assert_allclose(out.copy_to_host(), np.full(N16, 2.0))


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


def test_host_function_sharing_an_attribute_name_is_not_followed():
    """A host `add`, named like cuda.atomic.add, is not followed into its workspace."""
    prog = tg.compile(_sos_step, backend="sim").trace(*_sos_args())
    assert not any(b.external is _workspace for b in prog.buffers)
    assert _independent(prog, 0, 1)
