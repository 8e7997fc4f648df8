"""Kernel arguments are typed exactly as Numba types them: every layout (C, F, strided,
broadcast) and every empty array, 2-D and 3-D, gets the Numba type eager Numba gives the
same array, so an overload eager Numba compiles is the one the graph launches. On the
simulator against its device arrays' own type; on a GPU against numba-cuda's (and, without
a GPU, numba-cuda's rule run on its dummy arrays in a subprocess); NumPy arguments against
Numba's typeof of the NumPy array."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest
from numba import cuda

import tracegraph as tg
from tracegraph import _numba


@cuda.jit
def touch(x, out):
    if cuda.grid(1) == 0:
        out[0] = x.ndim


def _arrays() -> dict[str, np.ndarray]:
    """Host arrays of every layout, whose device copies (or views) are compared."""
    out: dict[str, np.ndarray] = {}
    for shape in [(0, 4), (4, 0), (0, 0), (3, 4), (1, 4), (4, 1), (0, 3, 4), (3, 0, 4),
                  (2, 3, 0), (2, 3, 4), (1, 1, 5)]:
        for order in "CF":
            out[f"{shape} {order}"] = np.zeros(shape, np.float32, order=order)
    base = np.zeros((6, 8), np.float32)
    out["strided columns"] = base[:, ::2]
    out["strided rows"] = base[::2]
    out["transposed"] = base.T
    out["empty strided"] = base[:, ::2][0:0]
    out["empty strided 3-D"] = np.zeros((4, 6, 8), np.float32)[:, ::2, ::3][:, 0:0]
    out["empty transposed"] = np.zeros((0, 5), np.float32).T
    return out


ARRAYS = _arrays()


def _traced_type(f, *args):
    plan = f.lower(*args)
    (node,) = [n for n in plan.nodes if n.name == "touch"]
    return node.argtypes[0]


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_a_device_argument_is_typed_as_numba_types_it(name):
    host = ARRAYS[name]
    if host.flags.c_contiguous or host.flags.f_contiguous:
        x = cuda.to_device(host)
    else:  # a view of a device array, as eager code makes one
        base = host.base if host.base is not None else host
        while base.base is not None:
            base = base.base
        x = _device_view(cuda.to_device(base), base, host)
    f = tg.compile(lambda x, out: touch[1, 1](x, out), backend="sim")
    out = cuda.device_array(1, np.float32)
    assert _traced_type(f, x, out) == numba.typeof(x), name


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_a_numpy_argument_is_typed_as_numba_types_it(name):
    host = np.ascontiguousarray(ARRAYS[name]) if not (
        ARRAYS[name].flags.c_contiguous or ARRAYS[name].flags.f_contiguous) else ARRAYS[name]
    f = tg.compile(lambda x, out: touch[1, 1](x, out), backend="sim")
    assert _traced_type(f, host, np.zeros(1, np.float32)) == numba.typeof(host), name


def test_a_zero_stride_is_a_broadcast_on_a_device_but_not_in_numpy():
    shape, strides = (1, 4), (0, 4)
    assert _numba.layout_of(shape, strides, 4, host=True) == "C"  # NumPy's flags
    assert _numba.layout_of(shape, strides, 4) == "A"  # numba-cuda: a broadcast
    assert _numba.layout_of((4, 0), (0, 4), 4) == ("A" if _numba.SIMULATOR else "C")


def _device_view(device_base, host_base, view):
    """The device array `view` is of `host_base`, made by slicing `device_base` the same
    way (offset and strides read off the host view)."""
    offset = view.__array_interface__["data"][0] - host_base.__array_interface__["data"][0]
    index = []
    rest = offset
    for n, s, bs in zip(view.shape, view.strides, host_base.strides):
        start, rest = divmod(rest, bs)
        index.append(slice(start, start + n * (s // bs) if n else start, s // bs))
    got = device_base[tuple(index)]
    assert got.shape == view.shape and tuple(got.strides) == view.strides
    return got


# numba-cuda's own rule for device arrays on a GPU, run on its dummy arrays (no GPU needed)
GPU_RULE = textwrap.dedent(r"""
    import json, sys
    from types import SimpleNamespace
    import numpy as np
    from numba.cuda.cudadrv import devicearray, dummyarray
    from tracegraph import _numba
    out = []
    for shape, strides in json.loads(sys.argv[1]):
        dummy = dummyarray.Array.from_desc(0, tuple(shape), tuple(strides), 4)
        size = int(np.prod(shape))
        fake = SimpleNamespace(strides=tuple(strides), size=size, flags=dummy.flags,
                               dtype=np.dtype(np.float32), ndim=len(shape))
        numba_says = devicearray.DeviceNDArray._numba_type_.func(fake).layout
        out.append([numba_says, _numba.layout_of(tuple(shape), tuple(strides), 4)])
    print(json.dumps(out))
""")


def test_the_gpu_rule_agrees_with_numba_cuda():
    cases = [(list(a.shape), list(a.strides)) for a in ARRAYS.values()]
    cases += [([1, 4], [0, 4]), ([4, 0], [0, 4]), ([0, 4], [4, 0]), ([3, 1], [4, 0]),
              ([2, 0, 3], [0, 12, 4]), ([5], [0]), ([], [])]
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run([sys.executable, "-c", GPU_RULE, json.dumps(cases)], env=env,
                          capture_output=True, text=True, timeout=300,
                          cwd=os.path.dirname(os.path.dirname(tg.__file__)))
    assert done.returncode == 0, done.stderr[-2000:]
    for (shape, strides), (numba_says, ours) in zip(cases, json.loads(done.stdout)):
        assert ours == numba_says, (shape, strides)
