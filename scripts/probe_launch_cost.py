"""Why CuPy's `Graph.launch` of a one-kernel graph costs less host time than every other
way we launch one: the same one-node graph made several ways, each
launched 100 times back to back, host time per launch (median of 30 samples, twice,
interleaved). Which of the three differs decides it: the kernel (Numba's, CuPy's, C++
through NVRTC), how the graph was made (CuPy's stream capture, cuda.core's capture,
cuda.core's explicit graph), and who launches it (CuPy, cuda.core, tracegraph).

    python scripts/probe_launch_cost.py [out.json]
"""
from __future__ import annotations

import ctypes
import sys

import numpy as np
from launch_probe import BLOCK, GRID, SIZE, axpb, numba_params, rounds
from numba import cuda

CPP = r"""
extern "C" __global__ void axpb(float* x, int n, float a, float b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + b;
}
"""


def contenders():
    import cupy as cp
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions
    from cuda.core.graph import GraphDefinition

    import tracegraph as tg
    dev = Device()
    dev.set_current()
    core_stream = dev.create_stream()
    x = cuda.to_device(np.linspace(0, 2, SIZE, dtype=np.float32))
    axpb[GRID, BLOCK](x, np.float32(0.999), np.float32(0.001))
    cuda.synchronize()
    ptr = x.device_ctypes_pointer.value
    from numba import types

    from tracegraph import _numba
    f32 = types.float32
    k_numba, _ = _numba.compiled_kernel(axpb, (f32[::1], f32, f32))
    numba_args = numba_params(ptr)
    mod = Program(CPP, code_type="c++", options=ProgramOptions(
        std="c++17", arch=f"sm_{dev.arch}")).compile("cubin")
    k_cpp = mod.get_kernel("axpb")
    cpp_args = [ctypes.c_uint64(ptr), ctypes.c_int(SIZE), ctypes.c_float(0.999),
                ctypes.c_float(0.001)]
    config = LaunchConfig(grid=GRID, block=BLOCK)
    core_sync = core_stream.sync
    out = {}

    def explicit(kernel, args):
        g = GraphDefinition()
        g.launch(config, kernel, *args)
        graph = g.instantiate()
        try:
            graph.upload(core_stream)
        except AttributeError:
            pass
        return graph

    g_numba = explicit(k_numba, numba_args)
    g_cpp = explicit(k_cpp, cpp_args)
    out["core_explicit_numba"] = (lambda: g_numba.launch(core_stream), core_sync)
    out["core_explicit_cpp"] = (lambda: g_cpp.launch(core_stream), core_sync)

    gb = dev.create_graph_builder()
    gb.begin_building("relaxed")
    axpb[GRID, BLOCK, gb](x, np.float32(0.999), np.float32(0.001))
    gb.end_building()
    g_capture = gb.complete()
    out["core_capture_numba"] = (lambda: g_capture.launch(core_stream), core_sync)

    s = cp.cuda.Stream(non_blocking=True)
    y = cp.asarray(np.linspace(0, 2, SIZE, dtype=np.float32))
    raw = cp.RawKernel(CPP, "axpb")
    numba_on_s = cuda.external_stream(s.ptr)
    y_numba = cuda.as_cuda_array(y, sync=False)

    def cupy_capture(step):
        with s:
            step()
            s.synchronize()
            s.begin_capture()
            try:
                step()
            finally:
                g = s.end_capture()
        g.upload(s)
        s.synchronize()
        return g
    g_cp = cupy_capture(lambda: cp.multiply(y, np.float32(0.999), out=y))
    g_cp_numba = cupy_capture(lambda: axpb[GRID, BLOCK, numba_on_s](
        y_numba, np.float32(0.999), np.float32(0.001)))
    g_cp_cpp = cupy_capture(lambda: raw((GRID,), (BLOCK,), (
        y, np.int32(SIZE), np.float32(0.999), np.float32(0.001))))
    out["cupy_capture_cupy"] = (lambda: g_cp.launch(s), s.synchronize)
    out["cupy_capture_numba"] = (lambda: g_cp_numba.launch(s), s.synchronize)
    out["cupy_capture_cpp"] = (lambda: g_cp_cpp.launch(s), s.synchronize)

    def one(x):
        axpb[GRID, BLOCK](x, np.float32(0.999), np.float32(0.001))
    f = tg.compile(one, backend="cuda")
    f(x)
    fs = tg.compile(one, backend="cuda")
    fs(x, stream=core_stream)
    cuda.synchronize()
    out["tracegraph_legacy"] = (lambda: f.replay(x), cuda.synchronize)
    out["tracegraph_core_stream"] = (lambda: fs.replay(x, stream=core_stream), core_sync)
    g_tg = f.compiled[0].executable.built.graph
    out["tracegraph_graph_core_launch"] = (lambda: g_tg.launch(core_stream), core_sync)
    # the executables alone through tracegraph's C helper: the graph, not the Python path
    from tracegraph.backends.cuda._graphlaunch import launch as c_launch
    tg_exec, cp_exec = int(g_tg.handle), int(g_cp_numba.graphExec)
    out["tracegraph_graph_c_legacy"] = (lambda: c_launch(tg_exec, 0), cuda.synchronize)
    out["cupy_graph_c_legacy"] = (lambda: c_launch(cp_exec, 0), cuda.synchronize)
    hot = f.compiled[0].executable
    out["tracegraph_replay_same"] = (lambda: hot.replay_same((x,)), cuda.synchronize)
    return out, (g_numba, g_cpp, g_capture, g_cp, g_cp_numba, g_cp_cpp, f, fs, s, mod)


def main() -> None:
    found, keep = contenders()
    rounds(found, sys.argv[1] if len(sys.argv) > 1 else None)
    del keep


if __name__ == "__main__":
    main()
