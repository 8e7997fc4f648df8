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
# The simulator (and the CPU stand-in of the GPU) run graph nodes in a random valid order,
# a new one each test run (the seed is in the report header): program order hides missing
# dependency edges. TRACEGRAPH_SIM_ORDER=<seed> replays a run's order.
os.environ.setdefault("TRACEGRAPH_SIM_ORDER", str(int.from_bytes(os.urandom(4), "little")))
# The tests' grids are small on purpose: Numba's low-occupancy warning (GPU only) would turn
# into an error in the tests that make every warning one, depending on which test of the
# worker first launched from that line (seen on an H100)
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import pytest  # noqa: E402

from tracegraph import backends  # noqa: E402

GPU = backends.gpu_usable()
if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    # eager references launch on Numba's simulator itself: one shared array per block
    from tracegraph import _numba
    _numba.fix_eager_shared_arrays()
    # a kernel a class holds binds to an instance on a GPU (CUDADispatcher.__get__), so
    # `type(self).k` and `self.k` differ there: the simulator's kernels do the same here
    import types as _types

    from numba.cuda.simulator.kernel import FakeCUDAKernel as _Kernel

    if not hasattr(_Kernel, "__get__"):
        _Kernel.__get__ = lambda k, obj, cls=None: k if obj is None else \
            _types.MethodType(k, obj)


def pytest_report_header(config):
    return (f"tracegraph: GPU usable: {GPU}; simulator mode: "
            f"{os.environ.get('NUMBA_ENABLE_CUDASIM') == '1'}; cuda platform: "
            f"{os.environ.get('TRACEGRAPH_CUDA_PLATFORM', 'gpu')}; "
            f"TRACEGRAPH_SIM_ORDER={os.environ['TRACEGRAPH_SIM_ORDER']}")


FAKE_CUDA = os.environ.get("TRACEGRAPH_CUDA_PLATFORM") == "fake"
if FAKE_CUDA and os.environ.get("TRACEGRAPH_TEST_DIRECT") == "1":
    # the simulator's device arrays count as of fixed metadata, as Numba's do on a GPU:
    # calls of the very same objects replay directly (replay_same) on the CPU stand-in
    from numba import cuda as _cuda

    from tracegraph.signature import arguments as _arguments
    _arguments._FIXED.add(type(_cuda.device_array(1)))
# which of the two the backend fixture runs (a GPU run may take only cuda's)
BACKENDS = os.environ.get("TRACEGRAPH_TEST_BACKENDS", "sim,cuda").split(",")


@pytest.fixture(params=["sim", "cuda"])
def backend(request):
    """Each behaviour test runs on both backends: cuda on the GPU, or on its CPU stand-in."""
    if request.param == "cuda" and not (GPU or FAKE_CUDA):
        pytest.skip("no CUDA GPU usable here")
    if request.param not in BACKENDS:
        pytest.skip(f"TRACEGRAPH_TEST_BACKENDS={','.join(BACKENDS)}")
    return request.param


@pytest.fixture
def gpu():
    """A test that needs a real GPU (deselected where none is usable)."""


def pytest_collection_modifyitems(config, items):
    """Without a GPU, GPU-only tests are deselected, not skipped: a skip would say
    something was meant to run here. Under several pytest-xdist workers, the tests that
    read the GPU's free memory are deselected too: the other workers move it."""
    shared_gpu = GPU and int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1
    keep, drop = [], []
    for item in items:
        needs_gpu = "gpu" in getattr(item, "fixturenames", ()) or item.get_closest_marker("gpu")
        needs_fake = item.get_closest_marker("fake_platform") is not None
        needs_alone = item.get_closest_marker("gpu_memory") is not None
        off = (needs_gpu and not GPU) or (needs_fake and not FAKE_CUDA) or \
            (needs_alone and shared_gpu)
        (drop if off else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
