"""The access analysis with Numba in real (GPU) mode, on the CPU: Numba's intrinsics are
stubs there, not missing as under the simulator every other test runs in, and a helper's
`cuda.threadIdx.x + ...` made a read-only input "rw" on the GPU only. The analysis needs
no GPU, so a process of its own without NUMBA_ENABLE_CUDASIM checks it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_intrinsics_are_numbers_in_real_mode():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    here = Path(__file__).parent
    env["PYTHONPATH"] = os.pathsep.join([str(here.parent), str(here),
                                         env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, str(here / "access_real_mode_kernels.py")],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 4 and all(line.endswith(" ok") for line in lines), run.stdout
