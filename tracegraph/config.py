"""Environment switches, read in one place."""
from __future__ import annotations

import logging
import os

BACKEND = "TRACEGRAPH_BACKEND"      # auto | cuda | sim
LOGS = "TRACEGRAPH_LOGS"            # a logging level name, e.g. DEBUG
SIM_ORDER = "TRACEGRAPH_SIM_ORDER"  # "random" or an integer seed: sim runs a random valid order
MOVED_INPUTS = "TRACEGRAPH_MOVED_INPUTS"  # auto | repoint | copy: how cuda follows moved inputs
MOVED_INPUTS_MODES = ("auto", "repoint", "copy")
CUDA_PLATFORM = "TRACEGRAPH_CUDA_PLATFORM"  # "fake": the cuda backend on the CPU (tests)
MATMUL = "TRACEGRAPH_MATMUL"  # auto | cublas | kernel: what tracegraph.ops.matmul runs
C_LAUNCH = "TRACEGRAPH_C_LAUNCH"  # 1 (default) | 0: replays launch through the C helper
BATCH_NODES = "TRACEGRAPH_BATCH_NODES"  # 1 (default) | 0: kernel nodes made one call each
FUSE = "TRACEGRAPH_FUSE"  # 0 (default) | 1: chains of elementwise ops become one kernel
VERIFY = "TRACEGRAPH_VERIFY"  # N: every compiled function verifies every N-th call (1: all)


def verify_every() -> int:
    """TRACEGRAPH_VERIFY: 0 (unset) or N, every N-th call of every compiled function is
    traced again and compared with its cached graph's Program (tg.compile(verify=N))."""
    value = os.environ.get(VERIFY, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return 0
    if value in ("true", "yes", "on"):
        return 1
    try:
        return max(int(value), 0)
    except ValueError:
        from .errors import TracegraphError
        raise TracegraphError(f"{VERIFY}={value!r} is not a number",
                              fix="set it to 1 (verify every call), N (every N-th) or 0") \
            from None


def backend_override() -> str | None:
    value = os.environ.get(BACKEND, "").strip().lower()
    return value or None


def moved_inputs_mode() -> str:
    """How the cuda backend follows a device input that moved (backends/moved_inputs.py):
    chosen per input ("auto"), or forced one way for every input."""
    value = os.environ.get(MOVED_INPUTS, "").strip().lower() or "auto"
    if value not in MOVED_INPUTS_MODES:
        from .errors import TracegraphError
        raise TracegraphError(f"{MOVED_INPUTS}={value!r} is not a known mode",
                              fix=f"set it to one of {', '.join(MOVED_INPUTS_MODES)} or leave "
                                  "it unset")
    return value


def cuda_platform() -> str:
    """What the cuda backend runs on: "gpu", or "fake" (its CPU stand-in, for tests on a
    machine without a GPU, under NUMBA_ENABLE_CUDASIM=1)."""
    value = os.environ.get(CUDA_PLATFORM, "").strip().lower() or "gpu"
    if value not in ("gpu", "fake"):
        from .errors import TracegraphError
        raise TracegraphError(f"{CUDA_PLATFORM}={value!r} is not a known platform",
                              fix="set it to gpu or fake, or leave it unset")
    return value


def matmul_engine() -> str:
    """auto: cuBLAS (a captured library node) where nvmath-python and a GPU are there, the
    Numba kernel elsewhere; cublas: the library node always (its NumPy stand-in on sim);
    kernel: the Numba kernel always."""
    value = os.environ.get(MATMUL, "").strip().lower() or "auto"
    if value not in ("auto", "cublas", "kernel"):
        from .errors import TracegraphError
        raise TracegraphError(f"{MATMUL}={value!r} is not a known engine",
                              fix="set it to auto, cublas or kernel, or leave it unset")
    return value


def c_launch() -> bool:
    """Whether replays on the default stream launch through the optional C helper
    (backends/cuda/_graphlaunch.c) where it is built; 0 launches through cuda.core."""
    return os.environ.get(C_LAUNCH, "1").strip() != "0"


def batch_nodes() -> bool:
    """Whether a graph's plain kernel nodes are made in one call of the C helper
    (add_kernel_nodes) where it is built; TRACEGRAPH_BATCH_NODES=0 makes them one
    cuda.bindings call each (measured on an H100: W5's first call 17.3 against 19.4 ms)."""
    return os.environ.get(BATCH_NODES, "1").strip() != "0"


def sim_order_seed() -> int | None:
    value = os.environ.get(SIM_ORDER, "").strip().lower()
    if not value:
        return None
    if value == "random":
        return int.from_bytes(os.urandom(4), "little")
    return int(value)


def configure_logging() -> None:
    level = os.environ.get(LOGS, "").strip().upper()
    if level:
        logger = logging.getLogger("tracegraph")
        logger.setLevel(level)
        if not logger.handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
            logger.addHandler(handler)


def fusion() -> bool:
    """Whether chains of elementwise tracegraph.ops become one kernel (passes/fusion.py):
    TRACEGRAPH_FUSE=1. Off by default until a GPU run measures it faster, its first call
    (a new kernel to compile per chain) included: scripts/measure_fusion.py."""
    return os.environ.get(FUSE, "0").strip() == "1"
