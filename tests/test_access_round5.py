"""A fifth hostile round, on the precision the fourth gave back (each case failed before its
fix): record fields named like array metadata (`r.size[0] = v` on a record element of
unknown rank), indexes a device function returns as a tuple (empty, or of two), `cuda.grid(2)`
as an index, and an empty tuple sliced from another. The record-field kernels cannot run
under Numba's simulator (NumPy's `np.record.size` wins over the field), so those tests check
what the trace records; the empty-tuple ones also run in random orders against eager."""
from __future__ import annotations

import networkx as nx
import numpy as np
from numba import cuda
from small_kernels import copy, fill

import tracegraph as tg

N = 8
SEEDS = range(8)

# a record whose sub-array field is named like array metadata
SREC = np.dtype([("size", np.float64, (2,)), ("v", np.float64)])
HREC = np.dtype([("shape", np.float64, (2,)), ("v", np.float64)])
NREC = np.dtype([("inner", [("size", np.float64, (2,)), ("w", np.float64)]), ("v", np.float64)])


@cuda.jit
def read_v(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i].v


def _writes(prog, op, arg=0):
    """Whether op `op` is recorded writing the buffer of the step's argument `arg`."""
    bufs = [b for b, buf in enumerate(prog.buffers) if buf.input_index == arg]
    assert bufs, "no buffer for the argument"
    return any(a.writes for a in prog.ops[op].accesses if a.buffer in bufs)


def _check_recorded_write(kernel, x, *extra):
    """kernel(x, *extra) then read_v(x, out): the kernel's store to x must be recorded and
    ordered before the reader."""
    def step(x, out, *extra):
        kernel[1, N](x, *extra)
        read_v[1, N](x, out)

    out = cuda.to_device(np.zeros(x.shape[0]))
    prog = tg.compile(step, backend="sim").trace(x, out, *extra)
    assert _writes(prog, 0), "the kernel's store into x is not recorded"
    assert nx.has_path(prog.graph, 0, 1), "the reader of x is not ordered after the writer"


def _differs_from_eager(step, make, monkeypatch):
    want = make()
    step(*want)
    want = [a.copy_to_host() for a in want]
    bad = []
    for seed in SEEDS:
        monkeypatch.setenv("TRACEGRAPH_SIM_ORDER", str(seed))
        args = make()
        tg.compile(step, backend="sim")(*args)
        if not all(np.array_equal(g.copy_to_host(), w) for g, w in zip(args, want)):
            bad.append(seed)
    return bad


# ---------------------------------------------------------------------------------------
# array_sources (f87c5c5): `.size`/`.shape` of a value of unknown rank viewing an array
# argument is taken for metadata, also when the argument is a RECORD array and the value is
# a record (element or nested struct), whose `.size` is a field. Before f87c5c5 all three
# were recorded "rw".

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


# ---------------------------------------------------------------------------------------
# returns_number (c710942): a followed device function returning a tuple of numbers is
# "a number", and its result as an index is taken to consume ONE dimension. An empty
# tuple consumes none (x[()] is x itself), so `x[helper()][i] = v` is taken for a store
# into an element-read value and lost. Before c710942 recorded "rw".

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

    assert not _differs_from_eager(step, make, monkeypatch)


# The same through a 2-D record array: ident((i, j)) is taken to consume one dimension, so
# x[ident((i, j))] is "a view of records" whose `.size` is metadata: the field store is lost.

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
    assert _writes(prog, 0), "the kernel's store into x is not recorded"


# ---------------------------------------------------------------------------------------
# Older (not from the last commits), same family: an index's consumed rank is guessed as 1.

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
    assert _writes(prog, 0), "the kernel's store into x is not recorded"


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

    assert not _differs_from_eager(step, make, monkeypatch)
