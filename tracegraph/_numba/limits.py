"""The current device's launch limits, from Numba's device attributes; CUDA's documented
limits for compute capability 9.0 on the simulator or where no device answers."""
from __future__ import annotations

from typing import NamedTuple

from .kernels import SIMULATOR


class LaunchLimits(NamedTuple):
    grid: tuple[int, int, int]    # blocks per grid along x, y, z
    block: tuple[int, int, int]   # threads per block along x, y, z
    threads: int                  # threads per block in all
    shared: int                   # dynamic shared memory per block without an opt-in
    device: str                   # what they are the limits of, for messages


# CUDA C++ Programming Guide, "Compute capabilities", 9.0; the shared memory a block may
# have without cudaFuncAttributeMaxDynamicSharedMemorySize, which Numba never sets
CC_90 = LaunchLimits((2**31 - 1, 65535, 65535), (1024, 1024, 64), 1024, 48 * 1024,
                     "compute capability 9.0")

_by_device: dict[int, LaunchLimits] = {}


def launch_limits() -> LaunchLimits:
    """The limits of the current device (CC_90 on the simulator)."""
    if SIMULATOR:
        return CC_90
    try:
        from numba import cuda
        device = cuda.get_current_device()
        found = _by_device.get(device.id)
        if found is None:
            found = _by_device[device.id] = LaunchLimits(
                (device.MAX_GRID_DIM_X, device.MAX_GRID_DIM_Y, device.MAX_GRID_DIM_Z),
                (device.MAX_BLOCK_DIM_X, device.MAX_BLOCK_DIM_Y, device.MAX_BLOCK_DIM_Z),
                device.MAX_THREADS_PER_BLOCK, device.MAX_SHARED_MEMORY_PER_BLOCK,
                f"GPU {device.id} ({_name(device)})")
        return found
    except Exception:  # no device to ask (compiling without a GPU): CUDA's documented ones
        return CC_90


def _name(device: object) -> str:
    name = getattr(device, "name", "")
    return name.decode() if isinstance(name, bytes) else str(name)
