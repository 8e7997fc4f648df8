"""Why equal scalars made anew took the full path on the H200
(tests/semantics/python_state/test_direct_path_checks.py): for each call, which path it took
(C direct, Python replay_same, full) and why replay_same missed."""
import numpy as np
from numba import cuda

import tracegraph as tg
from tracegraph.backends.cuda import executable as ex

N = 64


@cuda.jit
def scale_add(x, a, b):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a + b


def step(x, a, b):
    scale_add[1, 32](x, a, b)


log = []
orig_moved, orig_same = ex.CudaExecutable._moved, ex.CudaExecutable.replay_same


def moved(self, args, ks):
    r = orig_moved(self, args, ks)
    log.append(f"_moved({ks}) -> {'None' if r is None else 'infos'}; armed={self.armed!r} "
               f"infos={self._armed_infos!r} disjoint={self._armed_disjoint} "
               f"watched={self._watched_leaves!r}")
    return r


def same(self, args, stream=None):
    log.append(f"replay_same: fast={self._fast_replay is not None} armed={self.armed is not None} "
               f"platform={getattr(ex._thread, 'platform', None) is self.platform} "
               f"checks={bool(self._checks)}")
    r = orig_same(self, args, stream)
    log.append(f"  -> {'MISS' if r is ex.MISS else 'hit'}")
    return r


ex.CudaExecutable._moved, ex.CudaExecutable.replay_same = moved, same
f = tg.compile(step, backend="cuda")
entry = f._entry
f._entry = lambda *a, **k: log.append("FULL PATH (_entry)") or entry(*a, **k)
x = cuda.to_device(np.zeros(N))
half = 0.25
for a, b in [(2.0, 0.5), (2.0, 0.5), (2.0, 0.5), (3.0, 0.5), (3.0, 0.5), (2.0, -0.5)]:
    log.append(f"call a={a} b={b}: hot={f._hot is not None}")
    f(x, a * (half * 4), np.float32(b))
print("\n".join(log))
print("graphs", f.cache_info().graphs)
