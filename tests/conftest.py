"""Test setup: the simulator when no GPU is usable, and a `backend` fixture that runs
each behaviour test on `sim` and, where a GPU is usable, on `cuda`."""
from __future__ import annotations

import os


def _driver_has_gpu() -> bool:
    try:
        from cuda.bindings import driver
        err, = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False
        err, count = driver.cuDeviceGetCount()
        return err == driver.CUresult.CUDA_SUCCESS and count > 0
    except Exception:  # noqa: BLE001 - no driver library at all
        return False


# Must happen before anything imports numba.
if "NUMBA_ENABLE_CUDASIM" not in os.environ and not _driver_has_gpu():
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

import pytest  # noqa: E402

from tracegraph import backends  # noqa: E402

GPU = backends.gpu_usable()


def pytest_report_header(config):
    return f"tracegraph: GPU usable: {GPU}; simulator mode: {os.environ.get('NUMBA_ENABLE_CUDASIM') == '1'}"


@pytest.fixture(params=["sim", "cuda"])
def backend(request):
    """Each behaviour test runs on both backends; cuda only where a GPU is usable."""
    if request.param == "cuda" and not GPU:
        pytest.skip("no CUDA GPU usable here (the cuda backend runs in the GPU suite)")
    return request.param


@pytest.fixture
def gpu():
    if not GPU:
        pytest.skip("no CUDA GPU usable here")
