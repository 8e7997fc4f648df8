"""tracegraph.ops' GPU kernels as the GPU gets them: PTX for sm_90, compiled on the CPU with
numba.cuda.compile_ptx (no GPU: the device query is stubbed) in a process without
NUMBA_ENABLE_CUDASIM. The simulator runs the same Python, but neither caches nor registers:

- the last block of a split reduction (gemv_rows' column tiles, decode_attention's
  chunks) reads the partials other blocks wrote. Their writes are fenced before their
  ticket (release); the reader's ticket is followed by a fence (acquire) before the
  barrier after which the block reads, or a line its SM's L1 held from before could be
  read stale;
- the decode kernels' per-thread arrays (accumulators, a warp's row) stay in registers:
  no local memory."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

MAIN = str(Path(__file__).resolve().parents[2])

_PROBE = """
import json
from types import SimpleNamespace as _NS
import numba.cuda.dispatcher as _d
_d.get_current_device = lambda: _NS(compute_capability=(9, 0))
from numba import cuda, types as T
from tracegraph.ops import attention, gemv, nn
f32, i64, i32 = T.float32, T.int64, T.int32
def a(nd, dt=f32): return T.Array(dt, nd, "A")
kernels = {
    "gemv_rows": (gemv.gemv_rows, (a(2), a(2), a(1), a(2), i64, f32, a(3), a(1, i32), a(2))),
    "gemv_cols": (gemv.gemv_cols, (a(2), a(2), a(1), a(2), i64, f32, a(2))),
    "layer_norm_warp8": (nn._layer_norm_warp[8], (a(2), a(1), a(1), i64, f32, f32, f32, a(2))),
}
split = (a(3), a(3), a(3), a(4), a(4), i64, i64, f32, f32, f32, f32, a(3), a(3), a(4),
         a(2, i32), a(3))
kernels["decode_attention"] = (attention.attend, split)
kernels["decode_attention_append"] = (attention.append_attend, split)
out = {}
for name, (k, sig) in kernels.items():
    ptx, _ = cuda.compile_ptx(k.py_func, sig, cc=(9, 0))
    out[name] = [line.strip() for line in ptx.splitlines()]
print(json.dumps(out))
"""


def _ptx() -> dict[str, list[str]]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = os.pathsep.join([MAIN, env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def _index(lines: list[str], start: int, *prefixes: str) -> int:
    """The first line from `start` beginning with one of `prefixes` (len(lines): none)."""
    return next((i for i in range(start, len(lines)) if lines[i].startswith(prefixes)),
                len(lines))


FENCE = ("membar.gl", "fence.sc.gpu", "fence.acq_rel.gpu")


def test_split_reductions_fence_both_sides_of_the_ticket_and_keep_registers():
    ptx = _ptx()
    for name in ("gemv_rows", "decode_attention", "decode_attention_append"):
        lines = ptx[name]
        ticket = _index(lines, 0, "atom.add", "atom.global.add")
        assert any(line.startswith(FENCE) for line in lines[:ticket]), name  # release
        fence = _index(lines, ticket, *FENCE)                                 # acquire
        barrier = _index(lines, ticket, "bar.sync", "barrier.sync")
        assert fence < barrier, f"{name}: no fence between the ticket and the barrier"
    for name, lines in ptx.items():
        assert not [line for line in lines if line.startswith(("ld.local", "st.local"))], \
            f"{name} uses local memory"
