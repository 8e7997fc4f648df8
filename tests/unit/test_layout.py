"""Numba's kernel parameter layout, as tracegraph flattens it, against PTX compiled for
sm_90 without a GPU (in a subprocess: the tests may run on the simulator)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(r"""
    import json, re, sys
    import numpy as np
    from numba import cuda
    from tracegraph import _numba
    from tracegraph.ir import View
    from tracegraph.plan import CScalar, Ptr

    @cuda.jit
    def k1(x, a, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i]

    @cuda.jit
    def k2(m, n, flag, pair, z):
        i, j = cuda.grid(2)
        if i < m.shape[0] and j < m.shape[1] and flag:
            m[i, j] = n + pair[0][i] + pair[1] + z.real

    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    cases = {
        "k1": (k1, (View(0, 0, (64,), (4,), f32), 2.5, View(1, 0, (64,), (4,), f32))),
        "k2": (k2, (View(0, 0, (8, 8), (8, 64), f64), np.int32(3), True,
                    (View(1, 0, (8,), (8,), f64), 1.5), 1 + 2j)),
    }
    out = {}
    for name, (kernel, args) in cases.items():
        def ty(a):
            if isinstance(a, View):
                return _numba.array_type(a.dtype, len(a.shape),
                                         _numba.layout_of(a.shape, a.strides, a.itemsize))
            if isinstance(a, tuple):
                return _numba.tuple_type([ty(x) for x in a])
            return _numba.scalar_type(a)
        argtypes = tuple(ty(a) for a in args)
        params = _numba.flatten_params(argtypes, args, lambda v: (
            v.size, v.itemsize, Ptr(v.buffer, v.offset), v.shape, v.strides))
        ptx = _numba.ptx_for(kernel, argtypes, cc=(9, 0))
        entry = re.search(r"\.entry\s+\S+\s*\((.*?)\)", ptx, re.S).group(1)
        widths = [int(w) for w in re.findall(r"\.param\s+\.[bsuf](\d+)", entry)]
        mine = []
        for p in params:
            if isinstance(p, CScalar):
                import ctypes
                mine.append(8 * ctypes.sizeof(getattr(ctypes, p.ctype)))
            elif isinstance(p, bool):
                mine.append(8)
            else:
                mine.append(64)
        out[name] = {"ptx": widths, "ours": mine, "layout": [str(t) for t in argtypes]}
    print(json.dumps(out))
""")


def test_flattened_layout_matches_ptx_parameters():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["NUMBA_ENABLE_CUDASIM"] = "0"
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                       timeout=300, env=env)
    if r.returncode != 0 and ("NVVM" in r.stderr or "libnvvm" in r.stderr):
        pytest.skip(f"no NVVM to compile PTX here: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    for name, case in result.items():
        assert case["ours"] == case["ptx"], (name, case)
    # k1: two 1-D arrays of 7 fields each around one float64 scalar
    assert len(result["k1"]["ours"]) == 15
