"""The access analysis through indexes it must see through: slices from device functions,
tuples and namedtuples, indexes a device function returns (a read stays a read), empty
tuples however they are made. Each store is recorded as a write and the graph matches
eager Numba."""
from __future__ import annotations

import math
from collections import namedtuple

import networkx as nx
import numpy as np
import pytest
from access_checks import orders_differing_from_eager
from eager import matches_eager
from numba import cuda
from small_kernels import copy, fill

import tracegraph as tg

N = 8


def _mode_of(prog, kernel, buffer_pred):
    op = next(op for op in prog.ops if op.name == kernel.py_func.__name__)
    return "".join(("r" if a.reads else "") + ("w" if a.writes else "")
                   for a in op.accesses if buffer_pred(prog.buffers[a.buffer]))


@cuda.jit(device=True)
def _zero_part(a, part, j):
    sub = a[part]
    sub[j] = 0.0


@cuda.jit
def slice_passed_to_device_function(x):
    i = cuda.grid(1)
    if i < 4:
        _zero_part(x, slice(4, 8), i)


@cuda.jit(device=True)
def _upper_half(n):
    return slice(n // 2, n)


@cuda.jit
def slice_returned_by_device_function(x):
    i = cuda.grid(1)
    if i < 4:
        hi = x[_upper_half(x.size)]
        hi[i] = 0.0


PARTS = (slice(0, 4), slice(4, 8))


@cuda.jit
def slice_from_global_tuple(x):
    i = cuda.grid(1)
    if i < 4:
        x[PARTS[1]][i] = 0.0


@cuda.jit
def slice_from_local_tuple(x):
    i = cuda.grid(1)
    if i < 4:
        parts = (slice(0, 4), slice(4, 8))
        x[parts[1]][i] = 0.0


@cuda.jit
def slice_from_loop_over_tuple(x):
    i = cuda.grid(1)
    if i < 4:
        for s in (slice(0, 4), slice(4, 8)):
            x[s][i] = 0.0


SLICE_KERNELS = [slice_passed_to_device_function, slice_returned_by_device_function,
                 slice_from_global_tuple, slice_from_local_tuple, slice_from_loop_over_tuple]


@pytest.mark.parametrize("kernel", SLICE_KERNELS, ids=lambda k: k.py_func.__name__)
def test_store_through_view_made_by_an_unseen_slice(backend, monkeypatch, kernel):
    """`a[s][j] = v`, s a slice from a device function's parameter or result, or a tuple."""
    def step(x, out):
        fill[1, N](x, 3.0)
        kernel[1, N](x)          # writes x[4:8] through a view
        copy[1, N](x, out)
        return out

    def make():
        return cuda.to_device(np.zeros(N)), cuda.to_device(np.ones(N))

    f = matches_eager(step, make, backend, monkeypatch=monkeypatch)
    if f is not None:
        assert "w" in _mode_of(f.trace(*make()), kernel, lambda _: True)


def _modes(prog, kernel_name, pred=lambda _: True):
    return ["".join(("r" if a.reads else "", "w" if a.writes else ""))
            for op in prog.ops if op.name == kernel_name
            for a in op.accesses if pred(prog.buffers[a.buffer])]


Parts = namedtuple("Parts", "lo hi")


NT_PARTS = (Parts(slice(0, 4), slice(4, 8)), Parts(slice(0, 2), slice(2, 8)))


@cuda.jit
def nt_built_in_kernel(x):
    i = cuda.grid(1)
    if i < 4:
        p = Parts(slice(0, 4), slice(4, 8))
        x[p.hi][i] = 0.0


@cuda.jit(device=True)
def _zero_hi(a, p, j):
    a[p.hi][j] = 0.0


@cuda.jit
def nt_passed_to_device_function(x):
    i = cuda.grid(1)
    if i < 4:
        _zero_hi(x, Parts(slice(0, 4), slice(4, 8)), i)


@cuda.jit(device=True)
def _halves(n):
    return Parts(slice(0, n // 2), slice(n // 2, n))


@cuda.jit
def nt_returned_by_device_function(x):
    i = cuda.grid(1)
    if i < 4:
        x[_halves(x.size).hi][i] = 0.0


@cuda.jit
def nt_member_of_global_tuple(x):
    i = cuda.grid(1)
    if i < 4:
        x[NT_PARTS[0].hi][i] = 0.0


NT_KERNELS = [nt_built_in_kernel, nt_passed_to_device_function,
              nt_returned_by_device_function, nt_member_of_global_tuple]


@pytest.mark.parametrize("kernel", NT_KERNELS, ids=lambda k: k.py_func.__name__)
def test_namedtuple_field_slice_index_store_is_recorded(kernel, monkeypatch):
    """`x[p.hi][i] = v` with p a namedtuple of slices (local, parameter, result, tuple member)."""
    def step(x, out):
        fill[1, N](x, 3.0)
        kernel[1, N](x)          # zeroes x[4:8] through the view x[p.hi]
        copy[1, N](x, out)

    def make():
        return cuda.to_device(np.zeros(N)), cuda.to_device(np.ones(N))

    prog = tg.compile(step, backend="sim").trace(*make())
    assert "w" in "".join(_modes(prog, kernel.py_func.__name__)), \
        "store through x[p.hi] not recorded"
    assert orders_differing_from_eager(step, make, monkeypatch) == []


Cfg = namedtuple("Cfg", "buf part")


CFG = Cfg(cuda.to_device(np.zeros(N)), slice(4, 8))


@cuda.jit
def global_namedtuple_of_array_and_slice(x):
    i = cuda.grid(1)
    if i < 4:
        x[CFG.part][i] = CFG.buf[i]


def test_slice_member_of_a_global_namedtuple_of_arrays_makes_a_view(monkeypatch):
    """`x[CFG.part][i] = v`, CFG a global namedtuple (device array, slice)."""
    def step(x, out):
        fill[1, N](x, 3.0)
        global_namedtuple_of_array_and_slice[1, N](x)
        copy[1, N](x, out)

    def make():
        return cuda.to_device(np.zeros(N)), cuda.to_device(np.ones(N))

    prog = tg.compile(step, backend="sim").trace(*make())
    assert "w" in "".join(_modes(prog, "global_namedtuple_of_array_and_slice",
                                 lambda b: b.external is None)), \
        "store through x[CFG.part] not recorded"
    assert orders_differing_from_eager(step, make, monkeypatch) == []


N16 = 16


def _modes_of_op(prog, i):
    return {a.buffer: ("r" if a.reads else "") + ("w" if a.writes else "")
            for a in prog.ops[i].accesses}


def _independent(prog, a, b):
    return not nx.has_path(prog.graph, a, b) and not nx.has_path(prog.graph, b, a)


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
    "exp_by_global_id": (exp_by_global_id, (N16,), (N16,)),
    "sqrt_of_wrapped_neighbour": (sqrt_of_wrapped_neighbour, (N16,), (N16,)),
    "abs_of_clamped_neighbours": (abs_of_clamped_neighbours, (N16,), (N16,)),
    "sum_of_wrapped_neighbours": (sum_of_wrapped_neighbours, (N16,), (1,)),
    "abs_by_coords": (abs_by_coords, (4, 4), (4, 4)),
    "softmax_rows_by_global_id": (softmax_rows_by_global_id, (N16, 4), (N16, 4)),
}


@pytest.mark.parametrize("case", list(ELEMENT_CASES))
def test_element_read_through_helper_index_keeps_input_read_only(case):
    """a[helper(i)] handed to math/abs/max/atomic records read-only `a` as rw, ordering launches."""
    kernel, shape, out_shape = ELEMENT_CASES[case]

    def step(a, o1, o2):
        kernel[1, N16](a, o1)
        kernel[1, N16](a, o2)

    a = cuda.to_device(np.random.default_rng(0).random(shape))
    prog = tg.compile(step, backend="sim").trace(
        a, cuda.to_device(np.zeros(out_shape)), cuda.to_device(np.zeros(out_shape)))
    shared = set(_modes_of_op(prog, 0)) & set(_modes_of_op(prog, 1))   # the buffer of `a`
    assert [_modes_of_op(prog, 0)[b] for b in shared] == ["r"], _modes_of_op(prog, 0)
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
        row_sums_by_global_id[1, N16](a, o1)
        row_sums_by_global_id[1, N16](a, o2)

    a = cuda.to_device(np.ones((N16, 4)))
    prog = tg.compile(step, backend="sim").trace(
        a, cuda.to_device(np.zeros(N16)), cuda.to_device(np.zeros(N16)))
    assert sorted(_modes_of_op(prog, 0).values()) == ["r", "w"], _modes_of_op(prog, 0)
    assert _independent(prog, 0, 1)


@cuda.jit(device=True)
def everything():
    return ()


@cuda.jit
def store_through_empty_tuple_helper(x):
    i = cuda.grid(1)
    if i < x.size:
        x[everything()][i] = 0.0


def test_store_through_helper_returning_empty_tuple_index(monkeypatch):
    """x[helper()][i] = v with helper returning () is lost (silent wrong result on sim)."""
    def step(x, out):
        fill[1, N](x, 3.0)
        store_through_empty_tuple_helper[1, N](x)   # zeroes x
        copy[1, N](x, out)

    def make():
        return cuda.to_device(np.zeros(N)), cuda.to_device(np.zeros(N))

    assert not orders_differing_from_eager(step, make, monkeypatch)


@cuda.jit
def store_through_sliced_tuple_index(x):
    i = cuda.grid(1)
    if i < x.size:
        x[(i,)[:0]][i] = 0.0


def test_store_through_sliced_empty_tuple_index(monkeypatch):
    """x[(i,)[:0]][i] = v (an empty tuple made by slicing one) is lost (pre-existing)."""
    def step(x, out):
        fill[1, N](x, 3.0)
        store_through_sliced_tuple_index[1, N](x)
        copy[1, N](x, out)

    def make():
        return cuda.to_device(np.zeros(N)), cuda.to_device(np.zeros(N))

    assert not orders_differing_from_eager(step, make, monkeypatch)


def _fill_k_copy(kernel, *kargs):
    """fill(x, 3); kernel(x, *kargs) zeroes x; copy(x, out)."""
    def step(x, out):
        fill[1, N](x, 3.0)
        kernel[1, N](x, *kargs)
        copy[1, N](x, out)
    return step


def _make():
    return cuda.to_device(np.zeros(N)), cuda.to_device(np.zeros(N))


@cuda.jit
def zero_through_index_arg(x, t):
    i = cuda.grid(1)
    if i < x.size:
        x[t][i] = 0.0


def test_store_through_empty_tuple_kernel_argument(monkeypatch):
    """x[t][i] = 0 with t=() passed as a kernel argument: the store to x is lost."""
    assert not orders_differing_from_eager(_fill_k_copy(zero_through_index_arg, ()), _make,
                                   monkeypatch)
