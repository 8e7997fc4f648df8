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


# Must happen before anything imports numba. Without a GPU the cuda backend runs on its CPU
# stand-in (backends/cuda/fake.py): its build, re-pointing and replay logic is tested too.
if "NUMBA_ENABLE_CUDASIM" not in os.environ and not _driver_has_gpu():
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    os.environ.setdefault("TRACEGRAPH_CUDA_PLATFORM", "fake")

import pytest  # noqa: E402

from tracegraph import backends  # noqa: E402

GPU = backends.gpu_usable()


def pytest_report_header(config):
    return f"tracegraph: GPU usable: {GPU}; simulator mode: {os.environ.get('NUMBA_ENABLE_CUDASIM') == '1'}"


FAKE_CUDA = os.environ.get("TRACEGRAPH_CUDA_PLATFORM") == "fake"


@pytest.fixture(params=["sim", "cuda"])
def backend(request):
    """Each behaviour test runs on both backends: cuda on the GPU, or on its CPU stand-in."""
    if request.param == "cuda" and not (GPU or FAKE_CUDA):
        pytest.skip("no CUDA GPU usable here")
    return request.param


@pytest.fixture
def gpu():
    if not GPU:
        pytest.skip("no CUDA GPU usable here")
