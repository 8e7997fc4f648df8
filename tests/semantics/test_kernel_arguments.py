"""What a kernel is given, as eager Numba gives it: record arrays and their fields,
*args kernels (and declared writes through *args), explicit signatures (the overload
eager picks, scalars converted to it, no match a LoweringError), namedtuples, enums, and
random states made inside the trace."""
from __future__ import annotations

import collections

import networkx as nx
import numpy as np
import pytest
from eager import fresh, matches_eager, to_device
from numba import cuda

import tracegraph as tg

N = 8


GRID, BLOCK = 1, N


REC = np.dtype([("x", np.float64), ("y", np.float64)])


@cuda.jit
def set_fields(a, v):
    i = cuda.grid(1)
    if i < a.size:
        a[i].x = v + i
        a[i]["y"] = 2.0 * v


@cuda.jit
def sum_fields(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i].x + a[i].y


@cuda.jit
def star_copy(*args):
    i = cuda.grid(1)
    if i < args[1].size:
        args[1][i] = args[0][i] + 1.0


@pytest.mark.parametrize("place", ["host", "device"])
def test_record_field_stores_are_writes(backend, monkeypatch, place):
    def step(a):
        out = cuda.device_array(N, np.float64)
        set_fields[GRID, BLOCK](a, 3.0)
        sum_fields[GRID, BLOCK](a, out)
        return out

    def make():
        a = np.zeros(N, REC)
        return (a,) if place == "host" else (cuda.to_device(a),)

    f = matches_eager(step, make, backend, monkeypatch=monkeypatch)
    (op,) = [o for o in f.latest.program.ops if o.name == "set_fields"]
    assert [a.mode for a in op.accesses] == ["w"]


def test_star_args_kernels_write_their_arguments(backend, monkeypatch):
    if not tg._numba.SIMULATOR:  # numba-cuda cannot compile *args kernels: nor can we
        with pytest.raises(TypeError, match="Signature mismatch"):
            star_copy[GRID, BLOCK](cuda.to_device(np.zeros(N)), cuda.to_device(np.zeros(N)))
        if backend == "cuda":  # tracegraph packs the star arguments as Numba's typing does
            x, y = cuda.to_device(np.arange(N, dtype=np.float64)), cuda.to_device(np.zeros(N))
            tg.compile(lambda x, y: star_copy[GRID, BLOCK](x, y), backend=backend)(x, y)
            np.testing.assert_array_equal(y.copy_to_host(), np.arange(N) + 1.0)
        return

    def step(x):
        y, z = cuda.device_array_like(x), cuda.device_array_like(x)
        star_copy[GRID, BLOCK](x, y)
        star_copy[GRID, BLOCK](y, z)
        return z

    f = matches_eager(step, fresh(np.arange(N, dtype=np.float64)), backend,
                      monkeypatch=monkeypatch)
    p = f.latest.program
    first, second = [i for i, o in enumerate(p.ops) if o.name == "star_copy"]
    # the members of *args share one answer: read and written
    assert ["w" in a.mode for a in p.ops[first].accesses] == [True, True]
    assert nx.has_path(p.graph, first, second)


@cuda.jit("void(float32[:], float32)")
def scale32(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= a


@cuda.jit(["void(float32[:], int32)", "void(float64[:], float64)"])
def shift_two_ways(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += a


@pytest.mark.parametrize("place", ["host", "device"])
def test_explicit_signature_converts_scalars_as_eager(backend, monkeypatch, place):
    def step(x, y):
        scale32[GRID, BLOCK](x, 2.0)       # a Python float reaches a float32 parameter
        shift_two_ways[GRID, BLOCK](x, 3)  # float32[:] and an int: the int32 overload
        shift_two_ways[GRID, BLOCK](y, 1)  # float64[:]: the float64 overload, 1 -> 1.0
        return x, y

    def make():
        args = (np.arange(N, dtype=np.float32), np.arange(N, dtype=np.float64))
        return args if place == "host" else to_device(args)

    f = matches_eager(step, make, backend, monkeypatch=monkeypatch)
    kinds = [tuple(str(t) for t in n.argtypes) for n in f.latest.plan.nodes
             if n.kind == "kernel"]
    assert kinds[0][1] == "float32" and kinds[1][1] == "int32" and kinds[2][1] == "float64"


def test_no_matching_signature_is_a_lowering_error_like_eager(backend):
    def step(x):
        scale32[GRID, BLOCK](x, 2.0)
        return x

    x = np.arange(N, dtype=np.int8)
    with pytest.raises(tg.LoweringError, match="No matching definition"):
        tg.compile(step, backend=backend)(x)


def test_random_states_made_inside_the_trace_match_eager(backend, monkeypatch):
    from numba.cuda.random import create_xoroshiro128p_states, xoroshiro128p_uniform_float32

    @cuda.jit
    def draw(states, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = xoroshiro128p_uniform_float32(states, i)

    def step(x):
        states = create_xoroshiro128p_states(N, seed=7)
        out = cuda.device_array(N, np.float32)
        draw[GRID, BLOCK](states, out)
        return out

    matches_eager(step, fresh(np.zeros(N)), backend, monkeypatch=monkeypatch)


Point = collections.namedtuple("Point", "x y")


@cuda.jit
def set_from_point(r, p):
    r[0] = p.x
    r[1] = p.y


@cuda.jit
def add_pair(pair, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = pair.x[i] + pair.y[i]


def test_namedtuples_as_kernel_arguments(backend, monkeypatch):
    def step(r, a, b):
        set_from_point[1, 1](r, Point(1, 2))
        out = cuda.device_array_like(a)
        add_pair[1, 8](Point(a, b), out)
        return out

    matches_eager(step, fresh(np.zeros(2, np.int64), np.arange(8.0), np.ones(8)), backend,
                  monkeypatch=monkeypatch)


def test_declared_writes_through_star_args(backend):
    @cuda.jit
    def k(a, *rest):
        i = cuda.grid(1)
        if i < a.size:
            rest[1][i] = a[i] + rest[0][i]

    tg.access(k, reads=("a",), writes=("rest",))

    @tg.compile(backend=backend)
    def step(a, b, c):
        k[GRID, BLOCK](a, b, c)

    a, b, c = np.arange(N, dtype=np.float64), np.ones(N), np.zeros(N)
    step(a, b, c)
    np.testing.assert_array_equal(c, a + b)
    tg.access(k, reads=(0, 1), writes=(2,))  # by position, past the named parameters


class Colour(__import__("enum").IntEnum):
    RED = 1
    BLUE = 3


@cuda.jit
def fill_enum(a, c):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = c


def test_enum_kernel_arguments(backend, monkeypatch):
    def step(a):
        fill_enum[GRID, BLOCK](a, Colour.BLUE)
        return a

    matches_eager(step, fresh(np.zeros(N, np.int64)), backend, monkeypatch=monkeypatch)
