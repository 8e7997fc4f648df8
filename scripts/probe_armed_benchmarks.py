"""Which benchmark workloads' tracegraph replays take the direct path (armed: the very
objects of the last call, checked and launched in C), and the host cost of a replay on
this CPU: the direct path with a dry launch (graph exec 0), or else the full Python path
with the launch stubbed. Run where no CUDA driver loads.

    python scripts/probe_armed_benchmarks.py
"""
from __future__ import annotations

import os
import sys
import timeit

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
os.environ["TRACEGRAPH_CUDA_PLATFORM"] = "fake"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np
from numba import cuda

import tracegraph as tg
from tracegraph.signature import arguments

# device arrays of fixed metadata take the direct path, as Numba's do on a GPU
arguments._FIXED = arguments._FIXED | {type(cuda.to_device(np.ones(1)))}


def workloads() -> list:
    from benchmarks import w2_forkjoin as w2
    from benchmarks import w4_cartpole as w4
    from benchmarks.w1_chain import axpb, make_chain
    x = cuda.to_device(np.zeros(1024, np.float32))
    fj_args = [cuda.to_device(a) for a in w2.inputs(1024)] + \
        [cuda.device_array(1024, np.float32)]
    state0, w0 = w4.initial(4096)
    z = np.zeros(4096, np.float32)
    cp_args = [cuda.to_device(a) for a in (state0, w0, z, z, z)]
    return [("W1 N=100", make_chain(axpb, 100, 4, 256), [x]),
            ("W2 fork/join", w2.make_forkjoin(16, 4, 256), fj_args),
            ("W4 cart-pole", w4.make_rollout(16, 16, 256), cp_args)]


def measure(name: str, fn, args: list) -> None:
    from tracegraph.backends.cuda import _graphlaunch
    f = tg.compile(fn, backend="cuda")
    f(*args)
    f.replay(*args)
    ex = f.latest.executable
    armed = ex.armed is not None
    if armed:
        ex._fast_replay = _graphlaunch.replay
        ex.fast = (0, 0, -1, None, ex.fast[4] if ex.fast else ex._checks)  # a dry run
        k = 20_000
    else:
        type(ex)._launch = lambda *_: None  # the launch stubbed
        k = 1_000
    t = min(timeit.repeat(lambda: f.replay(*args), number=k, repeat=3)) / k * 1e6
    print(f"{name}: {len(ex.replayer.watched)} watched inputs; "
          f"{'direct' if armed else 'full Python path'}: {t:.2f} us a replay")


def main() -> None:
    for name, fn, args in workloads():
        measure(name, fn, args)


if __name__ == "__main__":
    main()
