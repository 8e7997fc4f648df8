"""The C helper's replay (backends/cuda/_graphlaunch.c) as its tests drive it: importing
this module skips the importing test module where the helper is not built. A graph exec
of 0 only checks, without launching, where no CUDA driver is loaded (`dry_run`)."""
from __future__ import annotations

import ctypes

import pytest

graphlaunch = pytest.importorskip("tracegraph.backends.cuda._graphlaunch")
replay = graphlaunch.replay


def _driver_loads() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


# a graph exec of 0 is only a dry run where no driver is loaded (a GPU machine launches it;
# the GPU suite covers the C replay through the cuda backend's direct-replay tests)
dry_run = pytest.mark.skipif(_driver_loads(), reason="a CUDA driver is loaded: 0 would launch")


class Armed:
    """An executable as the C replay reads it: the armed arguments and the fast-path tuple."""

    def __init__(self, armed, fast):
        self.armed, self.fast = armed, fast


class Obj:
    pass
