"""`cuda.reduce(fn)(arr, res=out)` inside a traced function: Numba's own reduction
kernels become kernel nodes (the result stays on the device, in out[0]). Without `res=`
Numba returns the result on the host, which is refused.

Numba's simulator cannot run those kernels (they name `cuda` through a closure, which the
simulator does not swap, and synchronize warps, which it lacks), and its own cuda.reduce
is a Python loop. So the simulator runs a stand-in for each of them: the same algorithm,
step by step in the same order, by one thread of each block (what the GPU computes, bit
for bit where the arithmetic is the same).
"""
from __future__ import annotations

import functools
import types
import weakref
from typing import Any

from numba import cuda

from .hooks import current_tracer, refuse
from .kernels import SIMULATOR

_WARPSIZE = 32  # numba.cuda.kernels.reduction's
_NUMWARPS = 4
_stand_ins: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def stand_in(kernel: Any) -> Any:
    """The simulator's stand-in for one of Numba's reduction kernels, or None."""
    try:
        return _stand_ins.get(kernel)
    except TypeError:  # not weakly referable: not one of them
        return None


def hook_reduce(cuda: Any) -> None:
    from numba.cuda.kernels import reduction
    call = reduction.Reduce.__call__
    if getattr(call, "_tracegraph", False):
        return

    def traced_call(self: Any, arr: Any, size: Any = None, res: Any = None, init: Any = 0,
                    stream: Any = 0) -> Any:
        tracer = current_tracer()
        if tracer is None:
            return call(self, arr, size, res, init, stream)
        api = tracer.numba_api
        if res is None or not api.is_device(res):
            raise refuse("cuda.reduce without res= (or with a host array as res=) returns "
                         "its result on the host, at trace time only",
                         "pass res=out, a device array (traced, or cuda.device_array(1)) "
                         "that the reduction writes out[0] of on the device")
        if not api.is_device(arr):
            arr = api.copy_in(arr)  # eagerly: a host array copied in at each launch
        kernel = self._compile(arr.dtype)
        if kernel not in _stand_ins:
            _stand_ins[kernel] = _simulator_kernel(self._functor)
        return call(self, arr, size, res, init, stream)

    setattr(traced_call, "_tracegraph", True)  # noqa: B010 - a mark on a function
    reduction.Reduce.__call__ = traced_call
    if SIMULATOR:
        _simulator_reduce(cuda, reduction.Reduce)


def _simulator_reduce(cuda: Any, numba_reduce: type) -> None:
    """The simulator's cuda.reduce, but Numba's kernels (as graph nodes) while tracing."""
    simulated = cuda.reduce

    def make(func: Any) -> Any:
        eager, kernels = simulated(func), numba_reduce(func)

        def reduce_wrapper(*args: Any, **kwargs: Any) -> Any:
            tracer = current_tracer()
            if tracer is None:
                return eager(*args, **kwargs)
            return kernels(*args, **kwargs)
        return reduce_wrapper

    cuda.reduce = cuda.Reduce = make


@functools.cache
def _simulator_kernel(functor: Any) -> Any:
    """_gpu_reduce_block_strided for `functor`, with globals of its own (the simulator
    swaps `cuda` in a kernel's globals while it runs)."""
    from .simclone import _kernel_class
    code = _gpu_reduce_block_strided.__code__
    fn = types.FunctionType(code, {"cuda": cuda, "_block": _block}, code.co_name, (functor,))
    return _kernel_class()(fn, device=False)


def _gpu_reduce_block_strided(arr: Any, partials: Any, init: Any, use_init: Any,
                              op: Any = None) -> None:
    if cuda.threadIdx.x != 0:  # (the `cuda` _simulator_kernel gives it)
        return
    blkid = cuda.blockIdx.x
    partials[blkid] = _block(op, arr, blkid, cuda.blockDim.x, cuda.gridDim.x)
    if use_init and blkid == 0:
        partials[0] = op(partials[0], init)


def _block(op: Any, arr: Any, blkid: int, blksz: int, gridsz: int) -> Any:
    """What one block of Numba's gpu_reduce_block_strided leaves in partials[blkid]."""
    if blksz == _NUMWARPS * _WARPSIZE:  # device_reduce_full_block
        step = blksz * gridsz
        warps = []
        for w in range(_NUMWARPS):
            lanes = []
            for lane in range(_WARPSIZE):
                start = w * _WARPSIZE + lane + blksz * blkid
                tmp = arr[start]
                for i in range(start + step, arr.size, step):
                    tmp = op(tmp, arr[i])
                lanes.append(tmp)
            warps.append(_warp(op, lanes))
        for t in (0, 1):
            warps[t] = op(warps[t], warps[t + 2])
        return op(warps[0], warps[1])
    # device_reduce_partial_block: arr.size == blksz threads, one value each
    size = arr.size
    warps = []
    for w in range((blksz + _WARPSIZE - 1) // _WARPSIZE):
        base = w * _WARPSIZE
        lanes = [arr[base + lane] for lane in range(min(_WARPSIZE, size - base))]
        if (w + 1) * _WARPSIZE < size:
            warps.append(_warp(op, lanes))
        else:  # partially populated: lane 0 folds its warp in order
            acc = lanes[0]
            for value in lanes[1:]:
                acc = op(acc, value)
            warps.append(acc)
    result = warps[0]
    for value in warps[1:]:
        result = op(result, value)
    return result


def _warp(op: Any, lanes: list) -> Any:
    """inner_warp_reduction: halving strides over the warp's 32 lanes."""
    lanes = list(lanes)
    width = _WARPSIZE // 2
    while width:
        for lane in range(width):
            lanes[lane] = op(lanes[lane], lanes[lane + width])
        width //= 2
    return lanes[0]
