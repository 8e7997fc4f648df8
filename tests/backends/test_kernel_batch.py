"""Kernel nodes made in one batch: the packed parameter block the C helper hands the
driver holds each value as the per-node path's ctypes storage does, and a build makes the
root's plain kernel nodes in one platform call."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg
from tracegraph.backends.cuda.handles import ctype_value
from tracegraph.backends.cuda.rawnodes import pack_values


class _Condition:
    handle = 0xDEADBEEF


@pytest.mark.parametrize("args", [
    [],
    [7],
    [True, 5, -3, 2**63 + 1, ctypes.c_float(1.5), ctypes.c_int32(-7), ctypes.c_uint8(200),
     ctypes.c_double(2.25), 9],
    [ctypes.c_int8(-1), ctypes.c_int64(-2), ctypes.c_uint16(3), ctypes.c_bool(True),
     ctypes.c_uint32(2**32 - 1), _Condition()],
])
def test_packed_values_match_ctypes_storage(args):
    blob, offsets = pack_values(args)
    assert len(offsets) == len(args)
    for a, at in zip(args, offsets):
        v = ctype_value(a)
        assert at % ctypes.alignment(v) == 0
        assert blob[at:at + ctypes.sizeof(v)] == bytes(v), (a, at)


def test_unknown_values_take_the_per_node_path():
    assert pack_values([1, ctypes.c_char(b"x")]) is None
    assert pack_values([object()]) is None


@cuda.jit
def _scale(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a


@pytest.mark.fake_platform
def test_one_batch_per_build():
    from tracegraph.backends.cuda.platform import platform
    x = cuda.to_device(np.arange(8, dtype=np.float32))

    def f(x):
        for k in range(5):
            _scale[1, 8](x, np.float32(k + 1))
        _scale[1, 8](x, np.float32(0.5))

    counts = platform(None).counts
    before = counts["add_kernels"]
    tg.compile(f, backend="cuda")(x)
    assert counts["add_kernels"] == before + 1
    want = np.arange(8, dtype=np.float32) * 120 * 0.5
    np.testing.assert_array_equal(x.copy_to_host(), want)


def test_the_per_node_path_makes_one_struct_per_shared_arguments(monkeypatch):
    """Without the C batch, each node is one cuGraphAddKernelNode call; the parameter
    struct is made once per kernel, configuration and shared argument list, and each call
    sees the values of its own node's arguments."""
    from types import SimpleNamespace

    from cuda.bindings import driver as real

    from tracegraph.backends.cuda import rawnodes

    class Params:
        pass
    seen = []

    def add(graph, deps, n, p):
        count = 2
        pointers = (ctypes.c_void_p * count).from_address(p.kernelParams)
        values = [ctypes.c_int64.from_address(pointers[i]).value for i in range(count)]
        seen.append((graph, id(p), p.func, (p.gridDimX, p.blockDimX), values))
        return real.CUresult.CUDA_SUCCESS, len(seen)
    fake = SimpleNamespace(CUDA_KERNEL_NODE_PARAMS=Params, cuGraphAddKernelNode=add)
    monkeypatch.setattr(rawnodes, "driver", lambda: fake)
    monkeypatch.setattr(rawnodes, "function_of", lambda k: f"fn-{k}")
    a, b = [1, 2], [3, 4]
    graph = SimpleNamespace(handle="g")
    made = rawnodes.add_kernels(graph, [((1, 1, 1), (8, 1, 1), 0, "k", a),
                                        ((1, 1, 1), (8, 1, 1), 0, "k", b),
                                        ((1, 1, 1), (8, 1, 1), 0, "k", a),
                                        ((2, 1, 1), (8, 1, 1), 0, "k", a)], None)
    assert [m.handle for m in made] == [1, 2, 3, 4]
    assert [s[4] for s in seen] == [[1, 2], [3, 4], [1, 2], [1, 2]]
    assert [s[3] for s in seen] == [(1, 8), (1, 8), (1, 8), (2, 8)]
    assert seen[0][1] == seen[2][1] != seen[1][1]  # one struct for the shared list
    assert {s[2] for s in seen} == {"fn-k"}


def test_a_launch_with_more_parameters_than_the_batch_holds_goes_per_node(monkeypatch):
    """add_kernel_nodes holds 64 parameters and 1 KiB of values a node: a build with a
    bigger launch makes its nodes one call each (the C batch failed the whole build with a
    ValueError before, on a GPU)."""
    from tracegraph.backends.cuda import rawnodes
    assert rawnodes.fits_batch(pack_values([1] * 64))
    assert not rawnodes.fits_batch(pack_values([1] * 65))
    monkeypatch.setattr(rawnodes, "function_of", lambda k: 1)
    small = ((1, 1, 1), (8, 1, 1), 0, "k", [1, 2])
    big = ((1, 1, 1), (8, 1, 1), 0, "k", [1] * 81)
    assert rawnodes._specs([small, small]) is not None
    assert rawnodes._specs([small, big]) is None


@cuda.jit
def _sum9(a0, a1, a2, a3, a4, a5, a6, a7, out):
    """Nine 2-D arrays: 81 kernel parameters, more than the C batch holds."""
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] += (a0[i, j] + a1[i, j] + a2[i, j] + a3[i, j] + a4[i, j] + a5[i, j]
                      + a6[i, j] + a7[i, j])


def test_a_kernel_of_many_array_parameters_matches_eager(backend):
    def step(arrays, out):
        for _ in range(3):
            _sum9[(2, 2), (4, 4)](*arrays, out)
        return out

    rng = np.random.default_rng(0)
    host = [rng.standard_normal((8, 8)) for _ in range(8)]
    want = step([cuda.to_device(a) for a in host], cuda.to_device(np.zeros((8, 8))))
    got = tg.compile(step, backend=backend)([cuda.to_device(a) for a in host],
                                            cuda.to_device(np.zeros((8, 8))))
    np.testing.assert_allclose(got.copy_to_host(), want.copy_to_host())
