"""Numba's CUDA ufuncs (`@vectorize` / `@guvectorize` with target="cuda") inside a traced
function, and on Numba's simulator.

Numba's own call machinery runs over traced arrays: its signature resolution, dtype
choice, scalar arguments, broadcasting, `out=` handling and the kernels it generated.
Only its device primitives are answered by the tracer (is this a device array, copy host
data in, allocate, a broadcast view, a copy made contiguous), and its kernel launches go
through the forall hook like any other launch, so they become kernel nodes.

What cannot be a graph node is refused at the user's line: a call whose result Numba
returns on the host (no argument on the device, or a host `out=`), and `ufunc.reduce`,
which always returns a host scalar.
"""
from __future__ import annotations

import functools
from typing import Any

from .hooks import current_tracer, refuse
from .kernels import SIMULATOR


def install_ufunc_hooks() -> None:
    """Route CUDA ufunc and gufunc calls made while tracing through the tracer; on the
    simulator, also make Numba's CUDA ufuncs build and run eagerly (numba-cuda leaves
    them out there: "ufunc API unsupported in the simulator")."""
    from numba.cuda import vectorizers as v
    if getattr(v.CUDAUFuncDispatcher.__call__, "_tracegraph", False):
        return
    if SIMULATOR:
        _support_simulator(v)
    call, reduce = v.CUDAUFuncDispatcher.__call__, v.CUDAUFuncDispatcher.reduce

    def __call__(self: Any, *args: Any, **kws: Any) -> Any:
        if current_tracer() is None:
            return call(self, *args, **kws)
        return _traced_mechanism().call_traced(self.__name__, self.functions, args, kws)

    def reduce_(self: Any, *args: Any, **kws: Any) -> Any:
        if current_tracer() is not None:
            raise refuse(f"{self.__name__}.reduce() of a CUDA ufunc returns its result as a "
                         "host scalar, which a graph cannot give back at trace time",
                         f"use cuda.reduce(fn)(x, res=out) with a device array `out` "
                         "(its kernels become graph nodes), tg.ops.sum/max/min, or call "
                         f"{self.__name__}.reduce outside the traced function")
        return reduce(self, *args, **kws)

    __call__._tracegraph = True  # type: ignore[attr-defined]
    v.CUDAUFuncDispatcher.__call__ = __call__
    v.CUDAUFuncDispatcher.reduce = reduce_
    _hook_gufuncs(v)


def _hook_gufuncs(v: Any) -> None:
    cls = v.CUDAGeneralizedUFunc
    steps = cls._call_steps.fget
    scalar_input, add_axis = cls._broadcast_scalar_input, cls._broadcast_add_axis

    def _call_steps(self: Any) -> type:
        tracer = current_tracer()
        if tracer is None:
            return steps(self)
        return _traced_steps()

    def _broadcast_scalar_input(self: Any, ary: Any, shape: Any) -> Any:
        tracer = current_tracer()
        if tracer is not None:  # every array of a traced call is a traced array by now
            return tracer.numba_api.restrided(ary, (shape,), (0,))
        return scalar_input(self, ary, shape)

    def _broadcast_add_axis(self: Any, ary: Any, newshape: Any) -> Any:
        tracer = current_tracer()
        if tracer is not None:
            return tracer.numba_api.restrided(ary, newshape, _added_axes_strides(ary, newshape))
        return add_axis(self, ary, newshape)

    cls._call_steps = property(_call_steps)
    cls._broadcast_scalar_input = _broadcast_scalar_input
    cls._broadcast_add_axis = _broadcast_add_axis


def _added_axes_strides(ary: Any, newshape: Any) -> tuple:
    """Numba's gufunc broadcast of an array over new leading axes (stride 0)."""
    return (0,) * (len(newshape) - len(ary.shape)) + tuple(ary.strides)


def _broadcast_strides(ary: Any, shape: Any) -> tuple:
    """Numba's ufunc broadcast of a device array to `shape` (CUDAUFuncMechanism.
    broadcast_device): stride 0 along new axes and along axes it stretches."""
    missing = len(shape) - len(ary.shape)
    strides = [0] * missing + list(ary.strides)
    for ax in range(len(shape)):
        if ax >= ary.ndim or ary.shape[ax] != shape[ax]:
            strides[ax] = 0
    return tuple(strides)


def _api() -> Any:
    """The active trace's handler of Numba's host API (trace/hostapi.py)."""
    return current_tracer().numba_api


class _HostRoundTrip:
    """What Numba's ufunc call gets back where it copies a device array to the host to
    make it contiguous (`to_host(a).ravel()`, then `to_device`): the same values made
    contiguous on the device, by a copy node."""

    def __init__(self, array: Any):
        self.array = array

    def ravel(self) -> _HostRoundTrip:
        return self


@functools.cache
def _traced_mechanism() -> Any:
    from numba.cuda.vectorizers import CUDAUFuncMechanism

    class TracedUFuncMechanism(CUDAUFuncMechanism):
        """Numba's ufunc call over traced arrays (see the module docstring)."""

        @classmethod
        def call_traced(cls, name: str, typemap: Any, args: tuple, kws: dict) -> Any:
            api = _api()
            out = kws.get("out")
            if out is not None and not api.is_device(out):
                raise refuse(f"the CUDA ufunc {name} was given a host array as out=: Numba "
                             "copies the result into it on the host, at trace time only",
                             "pass a device array (a traced array, or one made with "
                             "cuda.device_array) as out=")
            if out is None and not any(api.is_device(a) for a in args):
                raise refuse(f"the CUDA ufunc {name} got no device array, so Numba returns "
                             "its result as a host array, read at trace time only",
                             "pass at least one device array (an argument of the traced "
                             "function, or cuda.to_device(host) inside it)")
            return cls.call(typemap, args, dict(kws))

        def is_device_array(self, obj: Any) -> bool:
            return bool(_api().is_device(obj))

        def as_device_array(self, obj: Any) -> Any:
            return _api().device_stand_in(obj)

        def to_device(self, hostary: Any, stream: Any) -> Any:  # noqa: ARG002
            if isinstance(hostary, _HostRoundTrip):
                return _api().contiguous_copy(hostary.array).ravel()
            return _api().copy_in(hostary)

        def to_host(self, devary: Any, stream: Any) -> Any:  # noqa: ARG002
            return _HostRoundTrip(devary)

        def allocate_device_array(self, shape: Any, dtype: Any, stream: Any) -> Any:  # noqa: ARG002
            return _api().device_array(shape, dtype)

        def broadcast_device(self, ary: Any, shape: Any) -> Any:
            return _api().restrided(ary, shape, _broadcast_strides(ary, shape))

    return TracedUFuncMechanism


@functools.cache
def _traced_steps() -> type:
    from numba.cuda.vectorizers import _CUDAGUFuncCallSteps

    class TracedGUFuncCallSteps(_CUDAGUFuncCallSteps):
        """Numba's gufunc call steps over traced arrays."""

        def __init__(self, nin: int, nout: int, args: tuple, kwargs: dict):
            super().__init__(nin, nout, args, kwargs)
            if self._copy_result_to_host:
                raise refuse("a CUDA gufunc got no device array, so Numba returns its "
                             "results as host arrays, read at trace time only",
                             "pass at least one device array (an argument of the traced "
                             "function, or cuda.to_device(host) inside it)")
            if any(o is not None and not self.is_device_array(o) for o in self.outputs):
                raise refuse("a CUDA gufunc was given a host array as an output: Numba "
                             "copies the result into it on the host, at trace time only",
                             "pass device arrays (traced arrays, or cuda.device_array) as "
                             "outputs")

        def is_device_array(self, obj: Any) -> bool:
            return bool(_api().is_device(obj))

        def as_device_array(self, obj: Any) -> Any:
            return _api().device_stand_in(obj)

        def to_device(self, hostary: Any) -> Any:
            return _api().copy_in(hostary)

        def to_host(self, devary: Any, hostary: Any) -> Any:  # noqa: ARG002 - refused in __init__
            raise AssertionError("a traced gufunc call copies nothing to the host")

        def allocate_device_array(self, shape: Any, dtype: Any) -> Any:
            return _api().device_array(shape, dtype)

    return TracedGUFuncCallSteps


# ---------------------------------------------------------------------------
# Numba's simulator: its CUDA ufuncs neither build (the simulator's overloads carry no
# signature) nor run (it has no cuda.is_cuda_array or as_cuda_array, and broadcasts by
# building a DeviceNDArray). These give it what the GPU version does, over simulator
# arrays.

def _support_simulator(v: Any) -> None:
    from numba import cuda
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray, is_cuda_ndarray

    def _compile_core(self: Any, sig: Any) -> Any:
        core = cuda.jit(sig, device=True, inline="always")(self.pyfunc)
        return core, sig.return_type or _cpu_return_type(self.pyfunc, sig.args)

    def strided(ary: Any, shape: Any, strides: Any) -> Any:
        import numpy as np
        return FakeCUDAArray(np.lib.stride_tricks.as_strided(
            ary._ary, tuple(shape), tuple(strides)))

    v.CUDAVectorize._compile_core = _compile_core
    v.CUDAUFuncMechanism.broadcast_device = \
        lambda _, ary, shape: strided(ary, shape, _broadcast_strides(ary, shape))
    v.CUDAGeneralizedUFunc._broadcast_scalar_input = \
        lambda _, ary, shape: strided(ary, (shape,), (0,))
    v.CUDAGeneralizedUFunc._broadcast_add_axis = \
        lambda _, ary, newshape: strided(ary, newshape, _added_axes_strides(ary, newshape))
    if not hasattr(cuda, "is_cuda_array"):
        def is_cuda_array(obj: Any) -> bool:
            """The simulator's device arrays, and objects with a CUDA array interface."""
            return bool(is_cuda_ndarray(obj)) or hasattr(obj, "__cuda_array_interface__")
        cuda.is_cuda_array = is_cuda_array
    if not hasattr(cuda, "as_cuda_array"):
        def as_cuda_array(obj: Any, sync: bool = True) -> Any:  # noqa: ARG001 - Numba's
            """The simulator's device arrays as they are."""
            if not is_cuda_ndarray(obj):
                raise TypeError("*obj* doesn't implement the cuda array interface.")
            return obj
        cuda.as_cuda_array = as_cuda_array


def _cpu_return_type(pyfunc: Any, argtypes: tuple) -> Any:
    """The return type Numba infers for a signature given without one (what the GPU
    build infers, by compiling the device function)."""
    import numba
    return numba.njit(tuple(argtypes))(pyfunc).nopython_signatures[0].return_type
