"""Host cost of a direct replay on the CPU, the launch a dry run (no driver): the C
Entry (f(x), f.replay(x)) against the Python frames before the C replay. Run where no
CUDA driver loads (a graph exec of 0 would launch on a GPU machine).

    python scripts/probe_entry_cost.py
"""
import os, timeit
os.environ["NUMBA_ENABLE_CUDASIM"]="1"; os.environ["TRACEGRAPH_CUDA_PLATFORM"]="fake"
import numpy as np
from numba import cuda
import tracegraph as tg
from tracegraph.signature import arguments
from tracegraph.backends.cuda import _graphlaunch
arguments._FIXED = arguments._FIXED | {type(cuda.to_device(np.ones(1)))}

@cuda.jit
def k(x):
    i = cuda.grid(1)
    if i < x.size: x[i] += 1

def step(x):
    k[1, 4](x)

f = tg.compile(step, backend="cuda")
x = cuda.to_device(np.zeros(4))
f(x); f(x)
ex = f._hot
ex._fast_replay = _graphlaunch.replay
ex.fast = (0, 0, -1, None, ())
assert f(x) is None and f.replay(x) is None
old = type(f).replay
n = 200000
for name, fn in (("f(x) through the C Entry", lambda: f(x)),
                 ("f.replay(x) through the C Entry", lambda: f.replay(x)),
                 ("the Python frames, then the C replay (before)", lambda: old(f, x))):
    t = min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6
    print(f"{name}: {t:.3f} us")
