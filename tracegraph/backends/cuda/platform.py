"""What the cuda backend asks of CUDA, in one narrow interface (`Platform`), and its real
implementation over cuda.core (graphs, launches, streams), cuda.bindings (where cuda.core
has no API or measured slower on the replay path) and Numba (allocations, compiled
overloads). fake.py implements the same interface on the CPU for tests.

Measured on an H200 (docs/performance.md): re-pointing a kernel node through cuda.core's
node update re-marshals every argument (about 22 us), through cuGraphExecKernelNodeSetParams
on parameter storage we own about 1.5 us; a memcpy node re-points faster through cuda.core
(1.1 us) than through the driver's CUDA_MEMCPY3D (2.2 us); launching costs the same both
ways (3.2 vs 3.4 us), so cuda.core launches.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Protocol

import numpy as np

from ... import _numba
from . import handles


class Platform(Protocol):
    """Everything the cuda backend does to a device. `graph` objects follow cuda.core's
    GraphDefinition / Graph API (nodes: launch, memcpy, memset, callback, record, wait,
    join, embed, pred; graph: launch, update, upload, close, graph[node].update)."""

    def set_current(self) -> None: ...
    def new_graph(self) -> Any: ...
    def compile(self, kernel: Any, argtypes: tuple) -> tuple[Any, bool]: ...
    def launch_config(self, grid: tuple, block: tuple, sharedmem: int) -> Any: ...
    def alloc_device(self, nbytes: int) -> Any: ...
    def alloc_pinned(self, nbytes: int) -> np.ndarray: ...
    def address(self, owner: Any) -> int: ...
    def holders(self, owner: Any) -> int: ...
    def device_view(self, owner: Any, offset: int, shape: tuple, strides: tuple,
                    dtype: np.dtype) -> Any: ...
    def stream(self, user_stream: Any) -> Any: ...
    def synchronize(self) -> None: ...
    def is_pinned(self, address: int, nbytes: int) -> bool: ...
    def kernel_patch(self, graph: Any, node: Any, args: list) -> Any: ...
    def new_event(self) -> Any: ...
    def set_event(self, node: Any, record: bool, event: Any) -> None: ...
    def set_cooperative(self, node: Any) -> None: ...
    def dot(self, gdef: Any) -> str: ...
    def condition_helper(self, name: str) -> Any: ...
    def read_bytes(self, address: int, nbytes: int) -> np.ndarray: ...


# Numba cannot call cudaGraphSetConditional in a portable way, so the nodes that set a
# conditional node's condition are these, compiled once per device with NVRTC through
# cuda.core (seen working on an H200: benchmarks/platform-probe-h200.json)
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
    cudaGraphSetConditional(h, k < 0 ? 0xffffffffu : (unsigned int)k);                   \
}
HELPERS(int, i32)
HELPERS(long long, i64)
"""


class CudaPlatform:
    """The real device: the current CUDA device through cuda.core, cuda.bindings, Numba."""

    def __init__(self) -> None:
        import cuda.core as core
        self.core = core
        self.device = core.Device()
        self.device.set_current()
        self._launch_configs: dict[tuple, Any] = {}
        self._helpers: Any = None

    def set_current(self) -> None:
        self.device.set_current()

    def new_graph(self) -> Any:
        from cuda.core.graph import GraphDefinition
        return GraphDefinition()

    def compile(self, kernel: Any, argtypes: tuple) -> tuple[Any, bool]:
        return _numba.compiled_kernel(kernel, argtypes)

    def launch_config(self, grid: tuple, block: tuple, sharedmem: int) -> Any:
        key = (grid, block, sharedmem)
        config = self._launch_configs.get(key)
        if config is None:
            config = self._launch_configs[key] = self.core.LaunchConfig(
                grid=grid, block=block, shmem_size=sharedmem)
        return config

    def alloc_device(self, nbytes: int) -> Any:
        from numba import cuda
        return cuda.device_array(max(nbytes, 1), np.uint8)

    def alloc_pinned(self, nbytes: int) -> np.ndarray:
        from numba import cuda
        return cuda.pinned_array(max(nbytes, 1), np.uint8)

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

    def synchronize(self) -> None:
        self.device.sync()

    def is_pinned(self, address: int, nbytes: int) -> bool:
        return handles.pinned(address, nbytes)

    def kernel_patch(self, graph: Any, node: Any, args: list) -> Any:
        return handles.KernelPatch(graph.handle, node.handle, args)

    def new_event(self) -> Any:
        return self.device.create_event()

    def set_event(self, node: Any, record: bool, event: Any) -> None:
        handles.set_event(node, record, event)

    def set_cooperative(self, node: Any) -> None:
        handles.set_cooperative(node)

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


_platform: Any = None


def platform() -> Any:
    """The platform the cuda backend runs on: the GPU, or the CPU fake when
    TRACEGRAPH_CUDA_PLATFORM=fake (tests without a GPU)."""
    global _platform
    from ... import config
    if config.cuda_platform() == "fake":
        from .fake import FakePlatform
        if not isinstance(_platform, FakePlatform):
            _platform = FakePlatform()
    elif _platform is None or not isinstance(_platform, CudaPlatform):
        _platform = CudaPlatform()
    return _platform


def error_name(exc: BaseException) -> str:
    """The CUDA error name in a driver or cuda.core exception's text."""
    for word in str(exc).replace(":", " ").replace(",", " ").split():
        if word.startswith("CUDA_ERROR_") or word.startswith("cudaError"):
            return word
    return type(exc).__name__
