"""Device arrays as Numba sees them: simulator arrays, addresses, views, ownership."""
from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba import cuda

from .kernels import _SimDeviceArray


def is_simulated_device_array_type(t: type) -> bool:
    return _SimDeviceArray is not None and issubclass(t, _SimDeviceArray)


def is_device_array_type(t: type) -> bool:
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    return issubclass(t, DeviceNDArray)


def is_simulated_device_array(obj: Any) -> bool:
    # by type: a traced array's __class__ answers as a device array's (traced_array_class)
    return _SimDeviceArray is not None and issubclass(type(obj), _SimDeviceArray)


@functools.cache
def traced_array_class() -> type:
    """What a traced array gives as its __class__, so isinstance() takes it for Numba's
    device array (the simulator's FakeCUDAArray there); never instantiated."""
    from numba.cuda.cudadrv import devicearray
    base: Any = _SimDeviceArray if _SimDeviceArray is not None else devicearray.DeviceNDArray

    class TracedDeviceArray(base):
        """A device array inside a traced function (tracegraph.Array)."""

        def __init__(self, *_: Any, **__: Any):
            raise TypeError("tracegraph's traced arrays are made by tracing only")
    return TracedDeviceArray


def simulated_device_array_host(obj: Any) -> np.ndarray:
    """The NumPy array holding a simulator 'device' array's data (shared, not copied)."""
    return obj._ary


def to_device(host: np.ndarray) -> Any:
    return cuda.to_device(host)


def device_address(array: Any) -> int:
    """Address of element 0 of a Numba device array (0 when it has no memory)."""
    gpu_data = array.gpu_data
    return gpu_data.device_ctypes_pointer.value or 0 if gpu_data is not None else 0


def device_ordinal(array: Any) -> int:
    """The GPU a Numba device array's memory was allocated on (-1 when not known)."""
    context = getattr(getattr(array, "gpu_data", None), "context", None)
    device = getattr(context, "device", None)
    return int(device.id) if device is not None else -1


def device_view(owner: Any, offset: int, shape: tuple[int, ...], strides: tuple[int, ...],
                dtype: np.dtype) -> Any:
    """A device array over `owner`'s memory from byte `offset`; it keeps `owner` alive."""
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    return DeviceNDArray(shape, strides, dtype, gpu_data=owner.gpu_data.view(offset))


class _HostWindow:
    """NumPy's array interface over memory `owner` holds (the array made from it keeps
    this object, so `owner`, alive)."""

    def __init__(self, owner: Any, address: int, shape: tuple, strides: tuple,
                 dtype: np.dtype, readonly: bool):
        self.owner = owner
        self.__array_interface__ = {"data": (address, readonly), "shape": tuple(shape),
                                    "strides": tuple(strides), "typestr": dtype.str,
                                    "descr": dtype.descr, "version": 3}


def view_at(owner: Any, address: int, shape: tuple[int, ...], strides: tuple[int, ...],
            dtype: np.dtype, readonly: bool = False) -> Any:
    """An array of owner's kind (NumPy, or a device array) over `address`, in owner's
    memory, keeping owner alive: a view the caller's array shares memory with."""
    from .kernels import SIMULATOR
    dtype = np.dtype(dtype)
    if isinstance(owner, np.ndarray):
        return np.asarray(_HostWindow(owner, address, shape, strides, dtype, readonly))
    if SIMULATOR:  # a simulated device array's memory is a NumPy array's
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
        host = np.asarray(_HostWindow(owner, address, shape, strides, dtype, readonly))
        return FakeCUDAArray(host)
    desc = {"shape": tuple(shape), "strides": tuple(strides), "typestr": dtype.str,
            "data": (address, readonly), "version": 3}
    if dtype.names:
        desc["descr"] = dtype.descr
    return cuda.from_cuda_array_interface(desc, owner=owner, sync=False)


def allocation_refs(owner: Any) -> int:
    """How many Numba device arrays (views included) currently hold `owner`'s allocation.

    Numba counts owned references on the root allocation (`refct`); views made with
    `device_view`, slices, and objects wrapping them through __cuda_array_interface__
    all keep one.
    """
    mem = owner.gpu_data._mem
    return int(mem.refct)


def device_bytes(ptr: int, nbytes: int) -> Any:
    """A uint8 Numba device array over raw device memory (no copy, not owned)."""
    desc = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3,
            "strides": None}
    return cuda.from_cuda_array_interface(desc, owner=None, sync=False)


def device_array_with_room(x: Any, info: Any, b: int) -> Any:
    """x grown to b rows in place, when x is a view of a Numba device array whose
    allocation goes on for b rows at its stride (a preallocated max-size buffer passed as
    buf[:n]); None otherwise."""
    from .kernels import SIMULATOR
    if SIMULATOR:
        return None
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    gpu_data = getattr(x, "gpu_data", None)
    owner = getattr(gpu_data, "_mem", None)
    if owner is None or not info.shape or info.strides[0] <= 0:
        return None
    start = info.ptr - int(owner.device_ctypes_pointer.value or 0)
    need = start + (b - 1) * info.strides[0] + (info.extent[1] - info.ptr - (info.shape[0] - 1)
                                                 * info.strides[0])
    if need > owner.size:
        return None
    shape = (b, *info.shape[1:])
    view = DeviceNDArray(shape, info.strides, info.dtype, gpu_data=owner.view(start))
    return view


def device_array_at(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...],
                    dtype: np.dtype) -> Any:
    """A Numba device array over raw device memory with element 0 at `ptr` (not owned)."""
    desc = {"shape": tuple(shape), "typestr": np.dtype(dtype).str, "data": (ptr, False),
            "version": 3, "strides": tuple(strides)}
    if np.dtype(dtype).names:
        desc["descr"] = np.dtype(dtype).descr
    return cuda.from_cuda_array_interface(desc, owner=None, sync=False)


def is_out_of_memory(exc: BaseException) -> bool:
    """Is this Numba's error for an allocation the driver had no memory for?"""
    code = getattr(exc, "code", None)
    return "OUT_OF_MEMORY" in str(getattr(code, "name", code)) or code == 2 or \
        "CUDA_ERROR_OUT_OF_MEMORY" in str(exc)


def memory_info() -> tuple[int | None, int | None]:
    """(free, total) bytes of the current device's memory; (None, None) where unknown."""
    try:
        free, total = cuda.current_context().get_memory_info()
        return int(free), int(total)
    except Exception:  # no context to ask
        return None, None
