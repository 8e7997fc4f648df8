"""Argument typing, Numba's flattened kernel parameter layout (each array is meminfo,
parent, nitems, itemsize, data, shape..., strides...), and the compiled overload."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..ir import ScalarArg
from ..plan import CScalar, ScalarSlot
from .kernels import SIMULATOR, kernel_py_func

_array_types: dict[tuple, Any] = {}


def array_type(dtype: np.dtype, ndim: int, layout: str, readonly: bool = False) -> Any:
    key = (dtype, ndim, layout, readonly)
    ty = _array_types.get(key)
    if ty is None:
        from numba import from_dtype, types
        ty = _array_types[key] = types.Array(from_dtype(dtype), ndim, layout,
                                             readonly=readonly)
    return ty


def dtype_problem(dtype: np.dtype) -> str | None:
    """Why Numba cannot pass an array of this dtype to a kernel, or None if it can."""
    if dtype.hasobject:
        return "it holds Python objects"
    try:
        from numba import from_dtype
        from_dtype(dtype)
    except Exception:
        return "Numba has no type for it"
    return None


def layout_of(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int, *,
              host: bool = False) -> str:
    """Numba's layout letter for an array of this shape and strides, as Numba types the
    argument eager code passes: a NumPy array (`host`) by NumPy's contiguity flags; a
    device array as numba-cuda's `_numba_type_` does, where an array with a zero stride
    is "A" (a broadcast: hard-coded strides would be wrong) unless it has no elements
    (every empty array is "C"); the simulator's device arrays count a zero stride even
    then."""
    c, f = _contiguous(shape, strides, itemsize)
    if not host and 0 in strides and (SIMULATOR or math.prod(shape) != 0):
        return "A"
    return "C" if c else "F" if f else "A"


def _contiguous(shape: tuple[int, ...], strides: tuple[int, ...],
                itemsize: int) -> tuple[bool, bool]:
    """(C, F) contiguity as NumPy (and numba-cuda's dummy arrays) flag it: dimensions of
    one element are skipped, and an array without elements is both."""
    if 0 in shape:
        return True, True

    def contiguous(dims: Any) -> bool:
        expected = itemsize
        for n, s in dims:
            if n != 1 and s != expected:
                return False
            expected *= n
        return True
    pairs = list(zip(shape, strides))
    return contiguous(reversed(pairs)), contiguous(pairs)


_scalar_types: dict[type, Any] = {}


def scalar_type(value: Any) -> Any:
    """Numba's type for a scalar argument, or None when Numba cannot pass it to a kernel."""
    t = type(value)
    ty = _scalar_types.get(t)
    if ty is not None and not (t is int and not -2**63 <= value < 2**63):
        return ty
    from numba import typeof, types
    try:
        ty = typeof(value)
    except Exception:
        return None
    if isinstance(ty, (types.Integer, types.Float, types.Complex, types.Boolean,
                       types.NPDatetime, types.NPTimedelta, types.EnumMember)):
        if t in (bool, float, complex) or issubclass(t, np.number) or (
                t is int and ty == types.int64):
            _scalar_types[t] = ty  # these types always map to the same Numba type
        return ty
    return None


def tuple_type(item_types: list, pyclass: type = tuple) -> Any:
    """Numba's type for a tuple (or a namedtuple, `pyclass`) of these item types."""
    from numba import types
    return types.BaseTuple.from_types(item_types, pyclass)


def flatten_params(argtypes: tuple, values: tuple, view_fields: Callable) -> tuple:
    """Numba's kernel parameter list for these argument types and values.

    Mirrors numba-cuda's `_Kernel._prepare_args`: arrays become meminfo, parent, nitems,
    itemsize, data, shape..., strides...; scalars become ctypes values. `view_fields(v)`
    gives (nitems, itemsize, Ptr, shape, strides) for a traced array value.
    """
    from numba import types
    out: list = []

    def add(ty: Any, val: Any) -> None:
        if isinstance(val, ScalarArg):  # a dynamic scalar: its value comes per call
            if isinstance(ty, types.Boolean):
                out.append(ScalarSlot(val.leaf, "c_bool"))
            elif isinstance(ty, types.Integer):
                out.append(ScalarSlot(val.leaf, f"c_{ty}"))
            elif isinstance(ty, types.Float) and ty.bitwidth in (32, 64):
                out.append(ScalarSlot(val.leaf, "c_float" if ty.bitwidth == 32 else "c_double"))
            else:
                raise TypeError(f"a dynamic scalar of type {ty} (only booleans, integers "
                                "and float32/float64 can be dynamic)")
            return
        if isinstance(ty, types.Array):
            nitems, itemsize, ptr, shape, strides = view_fields(val)
            out.extend((0, 0, nitems, itemsize, ptr))
            out.extend(shape)
            out.extend(strides)
        elif isinstance(ty, types.Boolean):
            out.append(bool(val))
        elif isinstance(ty, types.EnumMember):
            add(ty.dtype, val.value)
        elif isinstance(ty, types.Integer):
            # ctypes converts (and refuses a float) exactly as Numba's launch does
            out.append(_checked(CScalar(f"c_{ty}", val)))
        elif isinstance(ty, types.Float):
            if ty.bitwidth == 16:
                out.append(CScalar("c_uint16", int(np.float16(val).view(np.uint16))))
            else:
                out.append(_checked(CScalar("c_float" if ty.bitwidth == 32 else "c_double",
                                            val)))
        elif isinstance(ty, types.Complex):
            part = "c_float" if ty.bitwidth == 64 else "c_double"
            out.extend((CScalar(part, val.real), CScalar(part, val.imag)))
        elif isinstance(ty, (types.NPDatetime, types.NPTimedelta)):
            out.append(CScalar("c_int64", int(np.asarray(val).view(np.int64))))
        elif isinstance(ty, types.BaseTuple):
            for t, v in zip(ty, val):
                add(t, v)
        else:
            raise TypeError(f"no kernel parameter layout for Numba type {ty}")

    for ty, val in zip(argtypes, values):
        add(ty, val)
    return tuple(out)


def unflatten_params(argtypes: tuple, params: list, array_at: Callable) -> list:
    """The kernel arguments a flattened parameter list stands for (flatten_params run
    backwards, as the kernel's prologue reads them): `array_at(data address, shape,
    strides, dtype, readonly)` makes each array; ctypes scalars become Python values."""
    from numba import types
    at = iter(params)

    def value(p: Any) -> Any:
        return p.value if hasattr(p, "value") and not isinstance(p, (bool, int)) else p

    def take(ty: Any) -> Any:
        if isinstance(ty, types.Array):
            _meminfo, _parent, _nitems, _itemsize, data = (next(at) for _ in range(5))
            shape = tuple(int(next(at)) for _ in range(ty.ndim))
            strides = tuple(int(next(at)) for _ in range(ty.ndim))
            from numba.np.numpy_support import as_dtype
            return array_at(int(value(data)), shape, strides, as_dtype(ty.dtype),
                            not ty.mutable)
        if isinstance(ty, types.EnumMember):
            return ty.instance_class(take(ty.dtype))
        if isinstance(ty, types.Float) and ty.bitwidth == 16:
            return np.uint16(value(next(at))).view(np.float16)
        if isinstance(ty, types.Complex):
            return complex(value(next(at)), value(next(at)))
        if isinstance(ty, (types.NPDatetime, types.NPTimedelta)):
            from numba.np.numpy_support import as_dtype
            return np.int64(value(next(at))).view(as_dtype(ty))
        if isinstance(ty, types.BaseTuple):
            items = [take(t) for t in ty]
            cls = getattr(ty, "instance_class", tuple)
            return cls(*items) if hasattr(cls, "_fields") else tuple(items)
        return value(next(at))

    return [take(ty) for ty in argtypes]


def _checked(scalar: CScalar) -> CScalar:
    scalar.as_ctype()  # raises TypeError where Numba's launch would
    return scalar


def select_overload(kernel: Any, argtypes: tuple) -> tuple:
    """The parameter types of the overload eager Numba launches for arguments of these
    types: the exact types where the dispatcher may compile, else the declared signature
    it converts them to (unsafe conversions allowed, as Numba's dispatcher does when
    compilation is disabled). Raises TypeError as the eager launch would."""
    if SIMULATOR:
        signatures = getattr(kernel, "_tracegraph_signatures", None)
        if not signatures:
            return tuple(argtypes)
        from numba.core.typing import Context
        return _resolve(Context(), kernel, signatures, argtypes)
    # a kernel with signatures (specialized or not) converts to one of them, or refuses:
    # taking a specialized kernel's one overload unchecked launched an int8 array as
    # float32[:] (a misaligned address on an H200)
    if kernel._can_compile and not kernel.specialized:
        return tuple(argtypes)
    return _resolve(kernel.typingctx, kernel, kernel.nopython_signatures, argtypes)


def _resolve(typingctx: Any, kernel: Any, signatures: list, argtypes: tuple) -> tuple:
    sig = typingctx.resolve_overload(kernel_py_func(kernel), signatures, tuple(argtypes), {},
                                     allow_ambiguous=False, unsafe_casting=True)
    if sig is None:
        raise TypeError("No matching definition for argument type(s) "
                        + ", ".join(map(str, argtypes)) + "; the kernel is compiled for "
                        + "; ".join(str(tuple(s.args)) for s in signatures))
    return tuple(sig.args)


def record_simulator_signatures() -> None:
    """The CUDA simulator drops the signatures given to @cuda.jit; keep them on the kernel
    so tracing converts arguments to the declared types as a real dispatcher would."""
    from numba import cuda
    from numba.cuda.simulator import api
    original = api.jit
    if getattr(original, "_tracegraph", False):
        return

    def jit(func_or_sig=None, *args: Any, **kwargs: Any) -> Any:
        made = original(func_or_sig, *args, **kwargs)
        if callable(func_or_sig) and not isinstance(func_or_sig, str):
            return made
        signatures = _parse_signatures(func_or_sig)
        if not signatures:
            return made

        def wrap(fn: Any) -> Any:
            kernel = made(fn)
            kernel._tracegraph_signatures = signatures
            return kernel
        return wrap

    setattr(jit, "_tracegraph", True)  # noqa: B010 - a mark on a function
    api.jit = jit
    if getattr(cuda, "jit", None) is original:
        cuda.jit = jit


def _parse_signatures(spec: Any) -> list:
    from numba.core import sigutils, typing
    specs = spec if isinstance(spec, list) else [spec] if spec is not None else []
    out = []
    for one in specs:
        try:
            args, ret = sigutils.normalize_signature(one)
        except Exception:
            return []
        out.append(typing.signature(ret, *args))
    return out


def compiled_kernel(kernel: Any, argtypes: tuple) -> tuple[Any, bool]:
    """(cuda.core Kernel, is_cooperative) of the overload Numba picks for `argtypes`."""
    overload = kernel.compile(_star_packed(kernel, argtypes))
    cufunc = overload._codelibrary.get_cufunc()
    return cufunc.kernel, bool(getattr(overload, "cooperative", False))


def baked_device_arrays(kernel: Any, argtypes: tuple) -> list[Any]:
    """The device arrays Numba compiled into the overload for `argtypes` by address (the
    globals and closure variables it and its device functions name, as they were bound when
    each was first compiled)."""
    overload = kernel.compile(_star_packed(kernel, argtypes))
    referenced = getattr(overload._codelibrary, "referenced_objects", {}) or {}
    return [obj for obj in referenced.values()
            if getattr(obj, "__cuda_array_interface__", None) is not None]


def _star_packed(kernel: Any, argtypes: tuple) -> tuple:
    """Argument types as Numba compiles a `*args` kernel: the trailing ones in one
    StarArgTuple (its parameters are the same flattened fields)."""
    import inspect

    from numba.core import types
    params = list(inspect.signature(kernel_py_func(kernel)).parameters.values())
    if not any(p.kind == p.VAR_POSITIONAL for p in params):
        return tuple(argtypes)
    n = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    star = getattr(types, "StarArgTuple")  # noqa: B009 - untyped in numba's stubs
    return (*argtypes[:n], star.from_types(tuple(argtypes[n:])))


def cooperative_grid_limit(kernel: Any, argtypes: tuple, blockdim: tuple,
                           sharedmem: int) -> int:
    """The most blocks a cooperative launch of this overload may have on the current
    device (all of them must be resident at once)."""
    overload = kernel.compile(_star_packed(kernel, argtypes))
    return int(overload.max_cooperative_grid_blocks(tuple(blockdim), sharedmem))


def ptx_for(kernel: Any, argtypes: tuple, cc: tuple[int, int] = (9, 0)) -> str:
    """PTX of the kernel for these argument types, without a GPU (not under the simulator)."""
    from numba.cuda import compile_ptx
    ptx, _ = compile_ptx(kernel_py_func(kernel), tuple(argtypes), cc=cc)
    return ptx


def simulator_scalar(ty: Any, value: Any) -> Any:
    """A scalar argument as the declared parameter type holds it (float32 arithmetic on
    the simulator, as on the GPU), for kernels compiled with explicit signatures."""
    from numba import types
    if isinstance(ty, (types.Integer, types.Float)) and not isinstance(value, bool):
        return np.dtype(str(ty)).type(value)
    if isinstance(ty, types.Boolean):  # NumPy's bool, as Numba types it (~True is False)
        return np.bool_(value)
    return value
