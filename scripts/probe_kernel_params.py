"""Why a Numba kernel node costs more GPU time than a C++ one (issue 15 item 3): 1,000-node
chains of x = x*a + b on 1,024 float32, built with cuda.core, GPU time per node by CUDA
events over pipelined replays. Four kernels separate the parameter block from the code:

- numba_array: Numba's kernel as tracegraph launches it (an array is 7 words: meminfo,
  parent, nitems, itemsize, data, shape, stride; 64 bytes of parameters);
- numba_pointer: the same body in Numba over a raw pointer and a constant shape
  (numba.cuda.np.numpy_support.carray; 16 bytes), what a shape-specialized launch would be;
- cpp: the C++ benchmark's kernel through NVRTC (float*, int, float, float; 20 bytes);
- cpp_wide: the C++ kernel with Numba's 64-byte parameter block.

    python scripts/probe_kernel_params.py [out.json]
"""
from __future__ import annotations

import ctypes
import json
import statistics
import sys

import numpy as np
from numba import cuda, types
from numba.cuda.np.numpy_support import carray

N_NODES, SIZE, BLOCK = 1000, 1024, 256
A, B = 0.999, 0.001

CPP = r"""
extern "C" __global__ void axpb(float* x, int n, float a, float b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + b;
}
extern "C" __global__ void axpb_wide(long long meminfo, long long parent, long long nitems,
                                     long long itemsize, float* x, long long n,
                                     long long stride, float a, float b) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + b;
}
"""


def numba_array(x, a, b):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a + b


def numba_pointer(p, a, b):
    x = carray(p, (SIZE,))
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a + b


def kernels(dev):
    from cuda.core import Program, ProgramOptions

    from tracegraph import _numba
    f32 = types.float32
    k_arr, _ = _numba.compiled_kernel(cuda.jit(numba_array), (f32[::1], f32, f32))
    k_ptr, _ = _numba.compiled_kernel(cuda.jit(numba_pointer),
                                      (types.CPointer(f32), f32, f32))
    prog = Program(CPP, code_type="c++",
                   options=ProgramOptions(std="c++17", arch=f"sm_{dev.arch}"))
    mod = prog.compile("cubin")
    u64, fl = ctypes.c_uint64, ctypes.c_float
    return {
        "numba_array": (k_arr, lambda p: [u64(0), u64(0), u64(SIZE), u64(4), u64(p), u64(SIZE),
                                          u64(4), fl(A), fl(B)]),
        "numba_pointer": (k_ptr, lambda p: [u64(p), fl(A), fl(B)]),
        "cpp": (mod.get_kernel("axpb"), lambda p: [u64(p), ctypes.c_int(SIZE), fl(A), fl(B)]),
        "cpp_wide": (mod.get_kernel("axpb_wide"),
                     lambda p: [u64(0), u64(0), u64(SIZE), u64(4), u64(p), u64(SIZE), u64(4),
                                fl(A), fl(B)]),
    }


def chain(kernel, args, config):
    from cuda.core.graph import GraphDefinition
    g = GraphDefinition()
    node = g.launch(config, kernel, *args)
    for _ in range(N_NODES - 1):
        node = node.launch(config, kernel, *args)
    return g.instantiate()


def gpu_us_per_node(graph, stream, launches=20, reps=9) -> float:
    from cuda.core import EventOptions
    timed = EventOptions(timing_enabled=True)
    for _ in range(5):
        graph.launch(stream)
    stream.sync()
    out = []
    for _ in range(reps):
        start = stream.record(options=timed)
        for _ in range(launches):
            graph.launch(stream)
        stop = stream.record(options=timed)
        stop.sync()
        out.append((stop - start) * 1e3 / (launches * N_NODES))
    return statistics.median(out)


def main() -> None:
    from cuda.core import Device, LaunchConfig
    dev = Device()
    dev.set_current()
    stream = dev.create_stream()
    x = cuda.to_device(np.linspace(0, 2, SIZE, dtype=np.float32))
    ptr = x.device_ctypes_pointer.value
    config = LaunchConfig(grid=(SIZE + BLOCK - 1) // BLOCK, block=BLOCK)
    results: dict = {"n_nodes": N_NODES, "size": SIZE, "gpu_us_per_node": {}}
    for _rep in range(2):  # interleaved twice: the lease's drift shows
        for name, (kernel, args) in kernels(dev).items():
            graph = chain(kernel, args(ptr), config)
            us = gpu_us_per_node(graph, stream)
            results["gpu_us_per_node"].setdefault(name, []).append(us)
            graph.close()
    for name, v in results["gpu_us_per_node"].items():
        print(f"{name:14s} {' '.join(f'{u:.4f}' for u in v)} us per node")
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
