"""The access analysis with Numba in real (GPU) mode, on the CPU: Numba's intrinsics are
stubs there, not missing as under the simulator every other test runs in, and a helper's
`cuda.threadIdx.x + ...` made a read-only input "rw" on the GPU only. The analysis needs
no GPU, so a process of its own without NUMBA_ENABLE_CUDASIM checks it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _real_mode(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    tests = Path(__file__).resolve().parents[1]  # the helper modules' folder
    env["PYTHONPATH"] = os.pathsep.join([str(tests.parent), str(tests),
                                         env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, str(tests / "access_real_mode_kernels.py"), *args],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def test_intrinsics_are_numbers_in_real_mode():
    lines = _real_mode().strip().splitlines()
    assert len(lines) == 4 and all(line.endswith(" ok") for line in lines), lines


def test_the_analysis_agrees_in_real_and_simulator_mode():
    """Every kernel of tracegraph's ops, examples and benchmarks: what the analysis says in
    the simulator (where every other test runs) is what it says on a GPU."""
    import access_real_mode_kernels
    real = {k: tuple(v) for k, v in json.loads(_real_mode("--sweep")).items()}
    sim = access_real_mode_kernels.sweep()
    assert len(sim) > 50 and real == sim, {k: (sim.get(k), real.get(k))
                                           for k in set(sim) | set(real)
                                           if sim.get(k) != real.get(k)}
