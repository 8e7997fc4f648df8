"""What the caller passed: host or device array, where its bytes are, its shape and dtype."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import _numba
from ..ir import contiguous_strides

HOST = "host"
DEVICE = "device"


class ArrayInfo(NamedTuple):
    """What a caller's array is (a named tuple: built on every replay, so it must be cheap)."""
    placement: str              # HOST or DEVICE
    ptr: int                    # address of element [0, ...]
    shape: tuple[int, ...]
    strides: tuple[int, ...]    # bytes
    dtype: np.dtype
    readonly: bool = False      # the caller's array must not be written (eager Numba refuses)
    device: int = -1            # the GPU a device array lives on (-1: not known, or host)

    @property
    def extent(self) -> tuple[int, int]:
        """[lo, hi) addresses the array can touch."""
        lo = hi = self.ptr
        if 0 in self.shape:
            return (lo, lo)
        for n, s in zip(self.shape, self.strides):
            step = (n - 1) * s
            if step < 0:
                lo += step
            else:
                hi += step
        return (lo, hi + self.dtype.itemsize)


def describe(obj: Any) -> ArrayInfo | None:
    """ArrayInfo for a NumPy array or a device array; None for anything else.

    On the replay path: the way to read each type is looked up once per type.
    """
    reader = _readers.get(type(obj), _UNKNOWN)
    if reader is _UNKNOWN:
        reader = _readers[type(obj)] = _reader_for(type(obj))
    return reader(obj) if reader is not None else None


_UNKNOWN = object()
_readers: dict[type, Any] = {}


def _reader_for(t: type) -> Any:
    if issubclass(t, np.ndarray):
        return _describe_numpy
    if _numba.SIMULATOR and _numba.is_simulated_device_array_type(t):
        return _describe_simulated
    if not _numba.SIMULATOR and _numba.is_device_array_type(t):
        return _describe_numba
    module = t.__module__ or ""
    if module.startswith("cupy") and t.__name__ == "ndarray":
        return _describe_cupy
    if _has(t, "__cuda_array_interface__"):
        return _describe_cai
    if _has(t, "__dlpack__") and _has(t, "__dlpack_device__"):
        return _describe_dlpack
    if t.__module__ == "builtins" or issubclass(t, np.generic) or \
            not (t.__dictoffset__ or hasattr(t, "__slots__")):
        return None  # its instances have no attributes of their own
    # an object may carry the interface as an instance attribute (Numba accepts it, and
    # compiles one named as a global into a kernel)
    return _describe_cai


def _has(t: type, name: str) -> bool:
    """hasattr, False where a metaclass's __getattr__ raises something else (a registry's
    KeyError)."""
    try:
        return hasattr(t, name)
    except Exception:
        return False


def _describe_numpy(obj: np.ndarray) -> ArrayInfo:
    ptr, readonly = obj.__array_interface__["data"]
    return ArrayInfo(HOST, ptr, obj.shape, obj.strides, obj.dtype, readonly)


def _describe_simulated(obj: Any) -> ArrayInfo:
    host = _numba.simulated_device_array_host(obj)
    ptr, readonly = host.__array_interface__["data"]
    return ArrayInfo(DEVICE, ptr, host.shape, host.strides, host.dtype, readonly,
                     simulated_device(obj))


def simulated_device(obj: Any) -> int:  # noqa: ARG001 - tests give arrays other devices
    """The device a simulated device array stands on: 0 (the simulator has one)."""
    return 0


def _describe_numba(obj: Any) -> ArrayInfo:
    return ArrayInfo(DEVICE, _numba.device_address(obj), obj.shape, obj.strides, obj.dtype,
                     False, _numba.device_ordinal(obj))


def _describe_cupy(obj: Any) -> ArrayInfo:
    return ArrayInfo(DEVICE, obj.data.ptr, obj.shape, obj.strides, obj.dtype, False,
                     int(obj.device.id))


def _describe_cai(obj: Any) -> ArrayInfo | None:
    try:
        cai = getattr(obj, "__cuda_array_interface__", None)
    except Exception:  # a property that raises: not an array
        return None
    if not isinstance(cai, dict) or not {"data", "shape", "typestr"} <= cai.keys():
        return None
    dtype: np.dtype = np.dtype(cai["typestr"])
    if dtype.kind == "V" and cai.get("descr"):  # a record: the fields are in descr
        dtype = np.dtype([tuple(d) for d in cai["descr"]])
    shape = tuple(cai["shape"])
    strides = cai.get("strides")
    strides = tuple(strides) if strides else contiguous_strides(shape, dtype.itemsize)
    ptr, readonly = cai["data"]
    index = getattr(getattr(obj, "device", None), "index", None)  # a torch tensor's GPU
    return ArrayInfo(DEVICE, ptr, shape, strides, dtype, bool(readonly),
                     int(index) if isinstance(index, int) else -1)


def _describe_dlpack(obj: Any) -> ArrayInfo | None:
    if hasattr(obj, "__cuda_array_interface__"):  # e.g. a CUDA torch tensor
        return _describe_cai(obj)
    device_type, device_id = obj.__dlpack_device__()
    if device_type not in (2, 3, 13):  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged
        return None
    from cuda.core.utils import StridedMemoryView
    view = StridedMemoryView(obj, stream_ptr=-1)
    dtype = np.dtype(view.dtype)
    shape = tuple(view.shape)
    strides = (tuple(s * dtype.itemsize for s in view.strides) if view.strides
               else contiguous_strides(shape, dtype.itemsize))
    return ArrayInfo(DEVICE, int(view.ptr), shape, strides, dtype,
                     bool(getattr(view, "readonly", False)),
                     int(device_id) if device_type == 2 else -1)  # pinned/managed: any GPU


def alias_groups(infos: list[ArrayInfo | None]) -> list[tuple[int, int] | None]:
    """For each array: (first leaf of its group, its lowest address minus the group's lowest).

    Arrays of the same placement whose bytes overlap share a group, so the graph sees
    them as one buffer and orders their accesses. Naming a group by its first leaf keeps
    the answer independent of where the allocator put things. Non-arrays get None.
    """
    result: list[tuple[int, int] | None] = [None] * len(infos)
    arrays_at = [i for i, info in enumerate(infos) if info is not None]
    if len(arrays_at) == 1:
        result[arrays_at[0]] = (arrays_at[0], 0)
        return result
    # an empty array shares no byte with anything: a group of its own, outside the sweep
    spans = []
    groups: list[list[tuple[int, int]]] = []  # [(leaf, lo)]
    for i in arrays_at:
        info = infos[i]
        assert info is not None
        lo, hi = info.extent
        if hi > lo:
            spans.append((info.placement, (lo, hi), i))
        else:
            groups.append([(i, lo)])
    spans.sort(key=lambda s: (s[0], s[1][0]))
    group_hi = 0
    placement = None
    start = len(groups)
    for place, (lo, hi), i in spans:
        if place != placement or lo >= group_hi or len(groups) == start:
            groups.append([])
            group_hi, placement = hi, place
        else:
            group_hi = max(group_hi, hi)
        groups[-1].append((i, lo))
    for members in groups:
        first = min(i for i, _ in members)
        base = min(lo for _, lo in members)
        for i, lo in members:
            result[i] = (first, lo - base)
    return result


def has_fixed_metadata(obj: Any) -> bool:
    """True for values whose shape, strides, dtype and address can never change, so a
    replay may reuse what it read from the same object last time; and for an object keyed
    by identity (its type keeps object's == and hash: a model, a config) that is no array,
    so the very object keys the signature the same (what its attributes hold is the
    Python-state contract's: contract/)."""
    t = type(obj)
    return t in _FIXED or _reader_for_fixed(t) or (
        t.__eq__ is object.__eq__ and t.__hash__ is object.__hash__ and
        not _has(t, "__cuda_array_interface__") and not _has(t, "__dlpack__") and
        "__cuda_array_interface__" not in getattr(obj, "__dict__", ()))


_FIXED = {int, float, bool, complex, str, type(None)}


def _reader_for_fixed(t: type) -> bool:
    # Numba's device arrays, and the simulator's stand-ins for them (so the simulator
    # takes the replay paths a GPU takes); not CuPy's: `a.shape = ...` reshapes a CuPy
    # array in place; NumPy's numbers are immutable (not np.void: a record scalar may be a
    # view)
    fixed = _readers.get(t) in (_describe_numba, _describe_simulated) or \
        issubclass(t, (np.number, np.bool_))
    if fixed:
        _FIXED.add(t)
    return fixed


def disjoint(infos: list[ArrayInfo | None]) -> bool:
    """No two of these arrays share memory."""
    firsts = [g[0] for g in alias_groups(infos) if g is not None]
    return len(set(firsts)) == len(firsts)
