"""Why a Numba kernel node costs more GPU time than a C++ one: 1,000-node
chains of x = x*a + b on 1,024 float32, built with cuda.core, GPU time per node by CUDA
events over pipelined replays on a created stream, each kernel's result checked. Three
kernels separate the parameter block from the code, and one run the stream:

- numba_array: Numba's kernel as tracegraph launches it (an array is 7 words: meminfo,
  parent, nitems, itemsize, data, shape, stride; 64 bytes of parameters);
- cpp: the C++ benchmark's kernel through NVRTC (float*, int, float, float; 20 bytes);
- cpp_wide: the C++ kernel with Numba's 64-byte parameter block;
- numba_array_legacy_stream: numba_array's graph launched on the legacy default stream,
  where tracegraph, Numba capture and CuPy launch in benchmarks/ (the C++ graph runs on a
  stream of its own).

    python scripts/probe_kernel_params.py [out.json]
"""
from __future__ import annotations

import ctypes
import json
import statistics
import sys

import numpy as np
from numba import cuda, types

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


def kernels(dev):
    from cuda.core import Program, ProgramOptions

    from tracegraph import _numba
    f32 = types.float32
    k_arr, _ = _numba.compiled_kernel(cuda.jit(numba_array), (f32[::1], f32, f32))
    prog = Program(CPP, code_type="c++",
                   options=ProgramOptions(std="c++17", arch=f"sm_{dev.arch}"))
    mod = prog.compile("cubin")
    u64, fl = ctypes.c_uint64, ctypes.c_float
    return {
        "numba_array": (k_arr, lambda p: [u64(0), u64(0), u64(SIZE), u64(4), u64(p), u64(SIZE),
                                          u64(4), fl(A), fl(B)]),
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
    x0 = np.linspace(0, 2, SIZE, dtype=np.float32)
    want = x0.copy()
    for _ in range(N_NODES):
        want = want * np.float32(A) + np.float32(B)
    for _rep in range(2):  # interleaved twice: the machine's drift shows
        for name, (kernel, args) in kernels(dev).items():
            graph = chain(kernel, args(ptr), config)
            x.copy_to_device(x0)
            graph.launch(stream)
            stream.sync()
            results.setdefault("max_error", {})[name] = float(
                np.abs(x.copy_to_host() - want).max())  # each kernel does the work
            us = gpu_us_per_node(graph, stream)
            results["gpu_us_per_node"].setdefault(name, []).append(us)
            if name == "numba_array":
                from cuda.core import LEGACY_DEFAULT_STREAM
                us = gpu_us_per_node(graph, LEGACY_DEFAULT_STREAM)
                results["gpu_us_per_node"].setdefault(name + "_legacy_stream", []).append(us)
                results["max_error"][name + "_legacy_stream"] = results["max_error"][name]
            graph.close()
    # tracegraph's own graph of the same chain (benchmarks/w1_chain.py's kernel)
    from cuda.core import LEGACY_DEFAULT_STREAM

    import tracegraph as tg
    k = cuda.jit(numba_array)

    @tg.compile(backend="cuda")
    def chain_tg(x):
        for _ in range(N_NODES):
            k[(SIZE + BLOCK - 1) // BLOCK, BLOCK](x, np.float32(A), np.float32(B))
    x.copy_to_device(x0)
    chain_tg(x)
    cuda.synchronize()
    results["max_error"]["tracegraph"] = float(np.abs(x.copy_to_host() - want).max())
    graph = chain_tg.compiled[0].executable.built.graph
    for label, s in (("tracegraph", stream), ("tracegraph_legacy_stream", LEGACY_DEFAULT_STREAM)):
        results["gpu_us_per_node"][label] = [gpu_us_per_node(graph, s) for _ in range(2)]
        results["max_error"][label] = results["max_error"]["tracegraph"]
    for name, v in results["gpu_us_per_node"].items():
        print(f"{name:14s} {' '.join(f'{u:.4f}' for u in v)} us per node, max error "
              f"{results['max_error'][name]:.2e}")
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
