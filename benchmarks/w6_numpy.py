"""W6: NumPy in / NumPy out. A two-kernel pipeline (y = (2x + 1)^2) over a
16 MB float32 array that starts and ends in host memory, against the copy
bandwidth bound: a plain H2D + D2H of the same bytes (pinned and pageable)."""
import numpy as np
from numba import cuda

from benchmarks.common import Bench, Skip, compare, run_bench
from benchmarks.contenders import tg_compile

ID = "W6"
TITLE = "NumPy in / NumPy out pipeline vs copy bound"
PRIMARY = "step_us"
BASELINE = "copy_bound_pinned"


@cuda.jit
def affine(x, a, b, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = x[i] * a + b


@cuda.jit
def square(y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = y[i] * y[i]


def sizes(cfg):
    if cfg.smoke:
        return {"n": 16, "block": 4}
    return {"n": 4 * 1024 * 1024, "block": 256}   # 16 MiB of float32


def builders(env, n, block):
    grid = (n + block - 1) // block
    host = np.linspace(-1.0, 1.0, n, dtype=np.float32)
    ref = (host * np.float32(2.0) + np.float32(1.0)) ** 2
    nbytes = 2 * host.nbytes                      # in and out

    def pinned_copy(a):
        p = cuda.pinned_array(a.shape, a.dtype)
        p[...] = a
        return p

    def numba_eager(pinned):
        x_in = pinned_copy(host) if pinned else host.copy()
        y_out = cuda.pinned_array(n, np.float32) if pinned else np.empty(n, np.float32)
        dx, dy = cuda.device_array(n, np.float32), cuda.device_array(n, np.float32)

        def step():
            dx.copy_to_device(x_in)
            affine[grid, block](dx, 2.0, 1.0, dy)
            square[grid, block](dy)
            dy.copy_to_host(y_out)

        def check():
            y_out[...] = 0
            step()
            env.sync()
            return compare(y_out, ref, rtol=1e-5, atol=1e-5)
        return Bench(step, bytes_moved=nbytes, check=check,
                     note="preallocated device buffers; " + ("pinned" if pinned else "pageable") + " host arrays")

    def copy_bound(pinned):
        x_in = pinned_copy(host) if pinned else host.copy()
        y_out = cuda.pinned_array(n, np.float32) if pinned else np.empty(n, np.float32)
        d = cuda.device_array(n, np.float32)

        def step():
            d.copy_to_device(x_in)
            d.copy_to_host(y_out)
        return Bench(step, bytes_moved=nbytes, note="H2D + D2H of the same bytes, no kernels")

    def tracegraph(pinned):
        tg = env.tg
        if tg is None:
            raise Skip(f"import tracegraph failed: {env.tg_error}")

        def pipeline(x):
            y = tg.empty_like(x)
            affine[grid, block](x, 2.0, 1.0, y)
            square[grid, block](y)
            return y
        x_in = pinned_copy(host) if pinned else host.copy()
        f = tg_compile(env, pipeline)
        f(x_in)
        env.sync()
        box = {}

        def step():
            box["y"] = f.replay(x_in)

        def check():
            step()
            env.sync()
            return compare(np.asarray(box["y"]), ref, rtol=1e-5, atol=1e-5)
        return Bench(step, bytes_moved=nbytes, check=check, keep=f,
                     note=("pinned" if pinned else "pageable") + " NumPy input; NumPy output from replay")

    return [("copy_bound_pinned", lambda: copy_bound(True)),
            ("copy_bound_pageable", lambda: copy_bound(False)),
            ("numba_eager_pinned", lambda: numba_eager(True)),
            ("numba_eager_pageable", lambda: numba_eager(False)),
            ("tracegraph_pinned", lambda: tracegraph(True)),
            ("tracegraph_pageable", lambda: tracegraph(False))]


def run(env, native=None):
    s = sizes(env.cfg)
    case = f"{s['n'] * 4 / 2**20:g} MiB" if s["n"] >= 2**18 else f"{s['n']} floats"
    return [run_bench(env, ID, case, name, build) for name, build in builders(env, s["n"], s["block"])]
