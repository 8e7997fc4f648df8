"""What the cuda backend asks of CUDA, in one narrow interface (`Platform`), and its real
implementation over cuda.core (graph definitions: memcpy, memset, conditional and child
graph nodes; streams; NVRTC), cuda.bindings (rawnodes.py: kernel, host and event nodes,
edges, instantiation and executable updates; handles.py: what cuda.core has no API for)
and Numba (allocations, compiled overloads). fake.py implements the same interface on the
CPU for tests.

Why cuda.bindings where cuda.core has the API (measured on an H100): a graph whose
kernel node cuda.core made, or which cuda.core instantiated,
launches 0.6 us or more dearer on the host every time (a retained user object). Re-pointing
a kernel node writes parameter storage we own and makes one driver call
(cuGraphExecKernelNodeSetParams, about 1.5 us on an H200). Replays on the default stream
launch through the small C helper where it is built (_graphlaunch.c: an armed call is
checked and launched in C); 0.4-1.5 us faster than through Python.
"""
from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from ... import _numba, config
from ...device_memory import MemoryExhausted
from ...ir import ForeignKernel
from . import handles, rawnodes


class Platform(Protocol):
    """Everything the cuda backend does to a device. Graph definitions follow cuda.core's
    GraphDefinition (the builder makes nodes at a graph's root only: memcpy, memset,
    empty, embed, the conditional nodes; kernel, host and event nodes through add_*, and
    every edge through add_edges), executables cuda.core's Graph (launch, update, upload,
    close, graph[node].update)."""

    def set_current(self) -> None: ...
    def new_graph(self) -> Any: ...
    def compile(self, kernel: Any, argtypes: tuple) -> tuple[Any, bool]: ...
    def baked_arrays(self, kernel: Any, argtypes: tuple) -> list[Any]: ...
    def alloc_device(self, nbytes: int) -> Any: ...
    def alloc_pinned(self, nbytes: int) -> np.ndarray: ...
    def address(self, owner: Any) -> int: ...
    def holders(self, owner: Any) -> int: ...
    def device_view(self, owner: Any, offset: int, shape: tuple, strides: tuple,
                    dtype: np.dtype) -> Any: ...
    def stream(self, user_stream: Any) -> Any: ...
    def graph_launcher(self, graph: Any, stream: Any) -> Callable[[], None]: ...
    def fast_replay(self) -> Callable[[Any, tuple], Any] | None: ...
    def synchronize(self) -> None: ...
    def is_pinned(self, address: int, nbytes: int) -> bool: ...
    def kernel_patch(self, graph: Any, node: Any, args: list) -> Any: ...
    def add_kernel(self, graph: Any, grid: tuple, block: tuple, sharedmem: int, kernel: Any,
                   args: list) -> Any: ...
    def add_kernels(self, graph: Any, launches: list[tuple]) -> list[Any]: ...
    def add_host(self, graph: Any, fn: Callable[[], None]) -> Any: ...
    def add_event(self, graph: Any, record: bool, event: Any) -> Any: ...
    def add_edges(self, graph: Any, edges: list[tuple[Any, Any]]) -> None: ...
    def set_cooperative(self, node: Any) -> None: ...
    def cooperative_grid_limit(self, kernel: Any, argtypes: tuple, block: tuple,
                               sharedmem: int) -> int: ...
    def set_priority(self, node: Any, priority: int) -> None: ...
    def set_access_policy(self, node: Any, address: int, nbytes: int,
                          hit_ratio: float) -> None: ...
    def instantiate(self, gdef: Any, use_priority: bool) -> Any: ...
    def capture_library(self, node: Any, args: list, warm: bool = True) -> Any: ...
    def set_child_graph(self, graph: Any, node: Any, gdef: Any) -> None: ...
    def dot(self, gdef: Any) -> str: ...
    def condition_helper(self, name: str) -> Any: ...
    def read_bytes(self, address: int, nbytes: int) -> np.ndarray: ...


# Numba cannot call cudaGraphSetConditional in a portable way, so the nodes that set a
# conditional node's condition are these, compiled once per device with NVRTC through
# cuda.core (seen working on an H200)
CONDITION_SOURCE = r"""
extern "C" __device__ __cudart_builtin__ void CUDARTAPI
cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);
#define HELPERS(T, S)                                                                     \
extern "C" __global__ void tg_while_start_##S(cudaGraphConditionalHandle h, const T* flag, \
                                              int* counter, int max_iterations) {          \
    counter[0] = 0;                                                                       \
    cudaGraphSetConditional(h, (flag[0] != 0 && max_iterations > 0) ? 1u : 0u);           \
}                                                                                         \
extern "C" __global__ void tg_while_next_##S(cudaGraphConditionalHandle h, const T* flag,  \
                                             int* counter, int max_iterations) {           \
    int c = counter[0] + 1;                                                               \
    counter[0] = c;                                                                       \
    cudaGraphSetConditional(h, (flag[0] != 0 && c < max_iterations) ? 1u : 0u);           \
}                                                                                         \
extern "C" __global__ void tg_if_##S(cudaGraphConditionalHandle h, const T* flag) {       \
    cudaGraphSetConditional(h, flag[0] != 0 ? 1u : 0u);                                   \
}                                                                                         \
extern "C" __global__ void tg_switch_##S(cudaGraphConditionalHandle h, const T* index) {  \
    T k = index[0];                                                                       \
    /* out of range (negative, or past 32 bits): no case, as on sim */                 \
    cudaGraphSetConditional(h, (k < 0 || k > (T)0x7fffffff) ? 0xffffffffu : (unsigned int)k); \
}
HELPERS(int, i32)
HELPERS(long long, i64)
"""


class CudaPlatform:
    """The real device: the current CUDA device through cuda.core, cuda.bindings, Numba."""

    def __init__(self, device_id: int | None = None) -> None:
        import cuda.core as core
        self.core = core
        self.device = core.Device(device_id)
        self.device.set_current()
        self.device_id = int(self.device.device_id)
        self._helpers: Any = None

    def set_current(self) -> None:
        self.device.set_current()

    def new_graph(self) -> Any:
        from cuda.core.graph import GraphDefinition
        return GraphDefinition()

    def compile(self, kernel: Any, argtypes: tuple) -> tuple[Any, bool]:
        if isinstance(kernel, ForeignKernel):
            return _core_kernel(kernel), False
        return _numba.compiled_kernel(kernel, argtypes)

    def baked_arrays(self, kernel: Any, argtypes: tuple) -> list[Any]:
        if isinstance(kernel, ForeignKernel):
            return []
        return _numba.baked_device_arrays(kernel, argtypes)

    def alloc_device(self, nbytes: int) -> Any:
        from numba import cuda
        try:
            return cuda.device_array(max(nbytes, 1), np.uint8)
        except Exception as exc:
            if _numba.is_out_of_memory(exc):
                raise MemoryExhausted(nbytes, "device", *_numba.memory_info()) from exc
            raise

    def alloc_pinned(self, nbytes: int) -> np.ndarray:
        from numba import cuda
        try:
            return cuda.pinned_array(max(nbytes, 1), np.uint8)
        except Exception as exc:
            if _numba.is_out_of_memory(exc):
                raise MemoryExhausted(nbytes, "page-locked host") from exc
            raise

    def address(self, owner: Any) -> int:
        if isinstance(owner, np.ndarray):
            return int(owner.ctypes.data)
        return _numba.device_address(owner)

    def holders(self, owner: Any) -> int:
        """How many Numba device arrays hold `owner`'s memory (views and results too)."""
        return _numba.allocation_refs(owner)

    def device_view(self, owner: Any, offset: int, shape: tuple, strides: tuple,
                    dtype: np.dtype) -> Any:
        return _numba.device_view(owner, offset, shape, strides, dtype)

    def stream(self, user_stream: Any) -> Any:
        return handles.core_stream(user_stream or 0)

    def graph_launcher(self, graph: Any, stream: Any) -> Callable[[], None]:
        """A call of no arguments launching the instantiated `graph` on `stream`: the driver's
        cuGraphLaunch straight from C where the optional helper is built, else cuda.core."""
        c_launch = _c_launch()
        if c_launch is None:
            return graph.launcher(stream)
        return functools.partial(c_launch, int(graph.handle), int(stream.handle))

    def fast_replay(self) -> Callable[[Any, tuple], Any] | None:
        """The C helper's replay of an armed call (check the arguments, launch), if built."""
        return _c_function("replay")

    def synchronize(self) -> None:
        self.device.sync()

    def is_pinned(self, address: int, nbytes: int) -> bool:
        return handles.pinned(address, nbytes)

    def kernel_patch(self, graph: Any, node: Any, args: list) -> Any:
        return handles.KernelPatch(graph.handle, node.handle, args)

    def add_kernel(self, graph: Any, grid: tuple, block: tuple, sharedmem: int, kernel: Any,
                   args: list) -> Any:
        return rawnodes.add_kernel(graph, grid, block, sharedmem, kernel, args)

    def add_kernels(self, graph: Any, launches: list[tuple]) -> list[Any]:
        """Kernel nodes at the root of `graph`, one per (grid, block, sharedmem, kernel,
        args), in one C call where the helper is built."""
        batch = _c_function("add_kernel_nodes") if config.batch_nodes() else None
        return rawnodes.add_kernels(graph, launches, batch)

    def add_host(self, graph: Any, fn: Callable[[], None]) -> Any:
        return rawnodes.add_host(graph, fn)

    def add_event(self, graph: Any, record: bool, event: Any) -> Any:
        return rawnodes.add_event(graph, record, event)

    def add_edges(self, graph: Any, edges: list[tuple[Any, Any]]) -> None:
        rawnodes.add_edges(graph, edges)

    def set_cooperative(self, node: Any) -> None:
        handles.set_cooperative(node)

    def cooperative_grid_limit(self, kernel: Any, argtypes: tuple, block: tuple,
                               sharedmem: int) -> int:
        return _numba.cooperative_grid_limit(kernel, argtypes, block, sharedmem)

    def set_priority(self, node: Any, priority: int) -> None:
        handles.set_priority(node, priority)

    def set_access_policy(self, node: Any, address: int, nbytes: int,
                          hit_ratio: float) -> None:
        handles.set_access_policy(node, address, nbytes, hit_ratio)

    def instantiate(self, gdef: Any, use_priority: bool) -> Any:
        return rawnodes.Executable(gdef, use_priority)

    def capture_library(self, node: Any, args: list, warm: bool = True) -> Any:
        """The call's work as a child graph (None: it rightly enqueued nothing): run once
        on scratch arrays of the same shapes (handles, algorithm choice and workspaces
        happen outside the capture; not when `warm` is False, a capture again), then
        captured on a cuda.core GraphBuilder's stream over the real addresses."""
        from ...errors import LoweringError
        call = node.op.library
        scratch = [self.alloc_device(_span(a[1])) if isinstance(a, tuple) and warm else None
                   for a in args]
        warmup = [_numba.device_array_at(self.address(s) + _lowest(a[1]), a[1].shape,
                                       a[1].strides, a[1].dtype) if s is not None else a
                for a, s in zip(args, scratch)]
        real = [_numba.device_array_at(a[0], a[1].shape, a[1].strides, a[1].dtype)
                if isinstance(a, tuple) else a for a in args]
        builder = self.device.create_graph_builder()

        def refuse(why: str) -> LoweringError:
            return LoweringError(f"tg.library call {node.name} could not be captured into "
                                 f"the graph: {why}", where=node.location,
                                 fix="make the call stream-capturable: enqueue all its work "
                                     "on the stream it is given (int(stream.handle)), without "
                                     "synchronizing, copying to the host or allocating while "
                                     "it runs (give libraries a fixed workspace)")
        try:
            if warm:
                call.fn(builder.stream, *warmup)
                builder.stream.sync()
        except Exception as exc:
            raise refuse(f"its uncaptured warm-up call raised {type(exc).__name__}: {exc}") from exc
        builder.begin_building()
        try:
            call.fn(builder.stream, *real)
        except Exception as exc:
            try:
                builder.end_building()
            except Exception:
                handles.end_invalid_capture(builder.stream)
            raise refuse(f"{type(exc).__name__}: {exc} ({error_name(exc)})") from exc
        try:
            builder.end_building()
        except Exception as exc:
            handles.end_invalid_capture(builder.stream)
            raise refuse(f"ending the capture failed: {exc} ({error_name(exc)})") from exc
        if handles.captured_node_count(builder.graph_definition) == 0:
            if call.may_be_empty:
                return None
            raise refuse("it enqueued nothing on the stream it was given (work on another "
                         "stream would run once now, not in the graph)")
        return _Captured(builder, builder.graph_definition, scratch)

    def set_child_graph(self, graph: Any, node: Any, gdef: Any) -> None:
        handles.set_child_graph(graph, node, gdef)

    def condition_helper(self, name: str) -> Any:
        """A kernel setting a conditional node's condition (CONDITION_SOURCE)."""
        if self._helpers is None:
            from cuda.core import Program, ProgramOptions
            options = ProgramOptions(std="c++17", arch=f"sm_{self.device.arch}")
            self._helpers = Program(CONDITION_SOURCE, code_type="c++",
                                    options=options).compile("cubin")
        return self._helpers.get_kernel(name)

    def read_bytes(self, address: int, nbytes: int) -> np.ndarray:
        return _numba.device_bytes(address, nbytes).copy_to_host()

    def dot(self, gdef: Any) -> str:
        from cuda.core.graph import GraphDebugPrintOptions
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "graph.dot")
            gdef.debug_dot_print(path, GraphDebugPrintOptions(verbose=True))
            with open(path) as f:
                return f.read()


class _Captured:
    """A captured child graph and what must outlive it."""

    def __init__(self, builder: Any, graph_definition: Any, keep: list):
        self.builder, self.graph_definition, self.keep = builder, graph_definition, keep


def _lowest(v: Any) -> int:
    """Bytes from a view's lowest touched byte to its element 0."""
    lo, _ = v.byte_range()
    return v.offset - lo


def _span(v: Any) -> int:
    lo, hi = v.byte_range()
    return max(hi - lo, 1)


def _core_kernel(kernel: ForeignKernel) -> Any:
    """What a kernel node launches for a foreign kernel: a cuda.core Kernel as given, or
    CuPy's CUfunction."""
    from cuda.core import Kernel
    handle = kernel.handle
    if isinstance(handle, Kernel):
        return handle
    return rawnodes.CuFunction(int(handle.kernel.ptr))


def _c_launch() -> Callable[[int, int], None] | None:
    """The C helper's launch (setup.py builds it where a C compiler is), if built and wanted."""
    return _c_function("launch")


def _c_function(name: str) -> Any:
    from ... import config
    if not config.c_launch():
        return None
    try:
        from . import _graphlaunch  # type: ignore[attr-defined, unused-ignore]
    except ImportError:
        return None
    return getattr(_graphlaunch, name, None)


_platforms: dict[int | None, Any] = {}  # device ordinal -> its platform


def platform(device: int | None = None) -> Any:
    """The platform the cuda backend runs on for GPU `device` (None: the current one): the
    GPU, or the CPU fake when TRACEGRAPH_CUDA_PLATFORM=fake (tests without a GPU)."""
    from ... import config
    fake = config.cuda_platform() == "fake"
    if device is None:
        device = 0 if fake else _current_device()
    found = _platforms.get(device)
    if fake:
        from .fake import FakePlatform
        if not isinstance(found, FakePlatform):
            found = _platforms[device] = FakePlatform(device)
    elif not isinstance(found, CudaPlatform):
        found = _platforms[device] = CudaPlatform(device)
    return found


def _current_device() -> int:
    import cuda.core as core
    return int(core.Device().device_id)


def error_name(exc: BaseException) -> str:
    """The CUDA error name in a driver or cuda.core exception's text."""
    for word in str(exc).replace(":", " ").replace(",", " ").split():
        if word.startswith("CUDA_ERROR_") or word.startswith("cudaError"):
            return word
    return type(exc).__name__
