"""A sixth hostile round, on which indexes count as numbers and which of Numba's functions
only read (each case failed before its fix): a kernel argument that is a tuple of numbers
(`x[()]` is all of x), Numba's cache-hinted stores (`cuda.stcs`), a namedtuple field named
`size` holding a tuple, `divmod` as an index, a variable assigned a number in one block and
a shape in another. Some kernels cannot run on the simulator: those check the trace."""
from __future__ import annotations

import collections

import networkx as nx
import numpy as np
from numba import cuda
from small_kernels import copy, fill

import tracegraph as tg

N = 8
SEEDS = range(8)
SREC = np.dtype([("size", np.float64, (2,)), ("v", np.float64)])


@cuda.jit
def read_v(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i].v


def _writes(prog, op, arg):
    bufs = [b for b, buf in enumerate(prog.buffers) if buf.input_index == arg]
    assert bufs, "no buffer for the argument"
    return any(a.writes for a in prog.ops[op].accesses if a.buffer in bufs)


def _differs_from_eager(step, make, monkeypatch):
    """Seeds whose graph run (random valid order) differs from eager execution."""
    want = make()
    step(*want)
    want = [a.copy_to_host() if hasattr(a, "copy_to_host") else a for a in want]
    bad = []
    for seed in SEEDS:
        monkeypatch.setenv("TRACEGRAPH_SIM_ORDER", str(seed))
        args = make()
        tg.compile(step, backend="sim")(*args)
        got = [a.copy_to_host() if hasattr(a, "copy_to_host") else a for a in args]
        if not all(np.array_equal(g, w) for g, w in zip(got, want)
                   if isinstance(g, np.ndarray)):
            bad.append(seed)
    return bad


def _fill_k_copy(kernel, *kargs):
    """fill(x, 3); kernel(x, *kargs) zeroes x; copy(x, out)."""
    def step(x, out):
        fill[1, N](x, 3.0)
        kernel[1, N](x, *kargs)
        copy[1, N](x, out)
    return step


def _make():
    return cuda.to_device(np.zeros(N)), cuda.to_device(np.zeros(N))


# ---------------------------------------------------------------------------------------
# 1. A kernel argument that is a tuple without arrays is given rank None by the tracer
# (tracer._rank), so ir.Arg marks it "a number": an index made from it takes one dimension.
# `()` takes none: x[t] is x itself, a view, and the store through it is lost. (A slice
# argument is refused at trace time: loud, not silent.) Real mode: ('r', '').

@cuda.jit
def zero_through_index_arg(x, t):
    i = cuda.grid(1)
    if i < x.size:
        x[t][i] = 0.0


def test_store_through_empty_tuple_kernel_argument(monkeypatch):
    """x[t][i] = 0 with t=() passed as a kernel argument: the store to x is lost."""
    assert not _differs_from_eager(_fill_k_copy(zero_through_index_arg, ()), _make,
                                   monkeypatch)


# ---------------------------------------------------------------------------------------
# 2. `cuda.stcs/stcg/stwb/stwt(array, i, value)` are Numba's cache-hinted STORES (numba.cuda.
# cache_hints). As attributes of `cuda` they pass is_stub, become Intrinsic("stcs"), and
# is_pure says only atomics write: the array is recorded read-only. TRACE-ONLY (the
# simulator sets cuda.stcs to None); real mode: infer_kernel_access gives ('r', 'r').

@cuda.jit
def store_cache_hinted(x, out):
    i = cuda.grid(1)
    if i < out.size:
        cuda.stcs(out, i, x[i])


def test_cuda_stcs_store_is_recorded():
    """cuda.stcs(out, i, v) stores into out: recorded as a read only."""
    def step(x, out, y):
        store_cache_hinted[1, N](x, out)
        copy[1, N](out, y)

    args = [cuda.to_device(np.zeros(N)) for _ in range(3)]
    prog = tg.compile(step, backend="sim").trace(*args)
    assert _writes(prog, 0, 1), "cuda.stcs's store into out is not recorded"
    assert nx.has_path(prog.graph, 0, 1)


# ---------------------------------------------------------------------------------------
# 3. A namedtuple built in the kernel from an array argument aliases that array with rank -1
# ("of_arrays"), so its field named `size` (or ndim/itemsize/nbytes) is taken for array
# metadata, "a number". Here the field holds `()`: x[nt.size] is x, and the store is lost.

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

    assert not _differs_from_eager(step, make, monkeypatch)


# ---------------------------------------------------------------------------------------
# 4. `divmod` is in the "pure" list and _pure_call marks its result "a number" (all arguments
# are numbers), but it returns a PAIR: as an index into a 2-D record array it takes a
# record, not a row, so `.size` is the field, not metadata. TRACE-ONLY (the simulator's
# np.record.size wins over the field, as in round 5); real mode: ('',).

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
    assert _writes(prog, 0, 0), "the kernel's store into x is not recorded"


# ---------------------------------------------------------------------------------------
# 5. A variable assigned a number, then (in another block, so the untyped IR keeps one name;
# Numba's SSA types the two definitions separately) a `.shape` tuple: it is in `numbers` and
# `number_tuples` but not `others`, and `.shape` sets no index_rank, so _number() says "a
# number". TRACE-ONLY (record field named size); real mode: ('r', '', 'w', '').

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
    assert _writes(prog, 0, 0), "the kernel's store into y is not recorded"
