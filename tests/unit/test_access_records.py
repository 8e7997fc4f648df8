"""The access analysis on record (structured) arrays and fields named like array metadata:
a store to a record's field (named `size` or `shape` too), however the record is reached
(nested, iterated, returned by a device function, indexed by a pair, cuda.grid(2), divmod
or a variable that may hold a shape), is a write of the record array; a namedtuple field
named `size` is the field."""
from __future__ import annotations

import collections

import networkx as nx
import numpy as np
from access_checks import orders_differing_from_eager, writes
from numba import cuda
from small_kernels import copy, fill

import tracegraph as tg

N = 8


# a record whose sub-array field is named like array metadata
SREC = np.dtype([("size", np.float64, (2,)), ("v", np.float64)])


HREC = np.dtype([("shape", np.float64, (2,)), ("v", np.float64)])


NREC = np.dtype([("inner", [("size", np.float64, (2,)), ("w", np.float64)]), ("v", np.float64)])


@cuda.jit
def read_v(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i].v


def _check_recorded_write(kernel, x, *extra):
    """kernel(x, *extra) then read_v(x, out): the kernel's store to x must be recorded and
    ordered before the reader."""
    def step(x, out, *extra):
        kernel[1, N](x, *extra)
        read_v[1, N](x, out)

    out = cuda.to_device(np.zeros(x.shape[0]))
    prog = tg.compile(step, backend="sim").trace(x, out, *extra)
    assert writes(prog, 0), "the kernel's store into x is not recorded"
    assert nx.has_path(prog.graph, 0, 1), "the reader of x is not ordered after the writer"


@cuda.jit
def nested_record_size_field(x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i].inner.size[0] = 7.0


def test_nested_record_field_named_size_store_is_recorded():
    """x[i].inner.size[0] = v (nested struct with a field `size`) records x read-only."""
    _check_recorded_write(nested_record_size_field, cuda.to_device(np.zeros(N, NREC)))


@cuda.jit
def iterate_records_store_size_field(x):
    i = cuda.grid(1)
    if i == 0:
        for r in x:
            r.size[0] = 7.0


def test_record_field_named_size_store_through_iteration_is_recorded():
    """`for r in x: r.size[0] = v` over a record array records x read-only."""
    _check_recorded_write(iterate_records_store_size_field, cuda.to_device(np.zeros(N, SREC)))


@cuda.jit(device=True)
def element(x, i):
    return x[i]


@cuda.jit
def helper_record_shape_field(x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        r = element(x, i)
        r.shape[1] = r.v


def test_record_field_named_shape_store_through_helper_result_is_recorded():
    """element(x, i).shape[1] = v (record returned by a device function) records x read-only."""
    _check_recorded_write(helper_record_shape_field, cuda.to_device(np.zeros(N, HREC)))


@cuda.jit(device=True)
def ident(t):
    return t


@cuda.jit
def store_record_field_through_helper_pair(x):
    i, j = cuda.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        x[ident((i, j))].size[1] = 7.0


def test_record_field_store_through_helper_returned_index_pair_is_recorded():
    """x[ident((i, j))].size[1] = v on a 2-D record array records x untouched."""
    x = cuda.to_device(np.zeros((2, N // 2), SREC))

    def step(x, out):
        store_record_field_through_helper_pair[1, (2, N // 2)](x)
        read_v[1, N](x[0], out)

    out = cuda.to_device(np.zeros(N // 2))
    prog = tg.compile(step, backend="sim").trace(x, out)
    assert writes(prog, 0), "the kernel's store into x is not recorded"


@cuda.jit
def store_record_field_through_grid2(x):
    i, j = cuda.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        x[cuda.grid(2)].size[1] = 7.0


def test_record_field_store_through_grid2_index_is_recorded():
    """x[cuda.grid(2)].size[1] = v on a 2-D record array: recorded as no access at all."""
    x = cuda.to_device(np.zeros((2, N // 2), SREC))

    def step(x, out):
        store_record_field_through_grid2[1, (2, N // 2)](x)
        read_v[1, N](x[0], out)

    out = cuda.to_device(np.zeros(N // 2))
    prog = tg.compile(step, backend="sim").trace(x, out)
    assert writes(prog, 0), "the kernel's store into x is not recorded"


NT = collections.namedtuple("NT", ["arr", "size"])


@cuda.jit
def zero_through_namedtuple_size_field(x, y):
    i = cuda.grid(1)
    if i < x.size:
        nt = NT(y, ())
        x[nt.size][i] = 0.0


def test_store_through_namedtuple_field_named_size(monkeypatch):
    """x[NT(y, ()).size][i] = 0: the namedtuple field `size` is taken for metadata."""
    def step(x, out, y):
        fill[1, N](x, 3.0)
        zero_through_namedtuple_size_field[1, N](x, y)
        copy[1, N](x, out)

    def make():
        return tuple(cuda.to_device(np.zeros(N)) for _ in range(3))

    assert not orders_differing_from_eager(step, make, monkeypatch)


@cuda.jit
def store_record_field_through_divmod(x):
    i = cuda.grid(1)
    if i < x.size:
        x[divmod(i, 4)].size[1] = 7.0


def test_record_field_store_through_divmod_index_is_recorded():
    """x[divmod(i, 4)].size[1] = v on a 2-D record array: recorded as no access at all."""
    x = cuda.to_device(np.zeros((2, N // 2), SREC))

    def step(x, out):
        store_record_field_through_divmod[1, N](x)
        read_v[1, N](x[0], out)

    out = cuda.to_device(np.zeros(N // 2))
    prog = tg.compile(step, backend="sim").trace(x, out)
    assert writes(prog, 0, 0), "the kernel's store into x is not recorded"


@cuda.jit
def store_record_field_through_reassigned_index(y, z, out, flag):
    v = cuda.grid(1)
    out[0] = y[v, 0].v
    if flag:
        v = z.shape
        y[v].size[1] = 7.0


def test_record_field_store_through_var_reassigned_to_shape_is_recorded():
    """v = i; ...; if flag: v = z.shape; y[v].size[1] = 7: the store to y is not recorded."""
    y = cuda.to_device(np.zeros((2, N // 2), SREC))
    z = cuda.to_device(np.zeros((1, 1)))

    def step(y, z, out, res):
        store_record_field_through_reassigned_index[1, 1](y, z, out, 1)
        read_v[1, N](y[1], res)

    out = cuda.to_device(np.zeros(1))
    res = cuda.to_device(np.zeros(N // 2))
    prog = tg.compile(step, backend="sim").trace(y, z, out, res)
    assert writes(prog, 0, 0), "the kernel's store into y is not recorded"
