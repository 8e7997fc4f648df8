"""Does a cuda.core GraphDefinition itself make its executable's launches dearer, even when
its kernel node is made through cuda.bindings (tracegraph's rawnodes.add_kernel)? One
kernel node per graph, made five ways, each launched 100 times back to back through
tracegraph's C helper on the legacy stream (host time per launch, median of 30; two
interleaved rounds):

- bare: cuGraphCreate + cuGraphAddKernelNode, instantiated by the driver;
- core_def_raw_kernel: a cuda.core GraphDefinition with the kernel node added raw;
- core_def_clone: a clone (cuGraphClone) of that definition, instantiated by the driver;
- tracegraph: the executable tracegraph builds for the same one-launch function;
- cupy_capture: CuPy's stream capture of the same Numba launch.

    python scripts/probe_graph_origin.py [out.json]
"""
from __future__ import annotations

import sys

import numpy as np
from launch_probe import BLOCK, GRID, SIZE, axpb, compiled_axpb, ok, rounds
from numba import cuda


def main() -> None:
    import cupy as cp
    from cuda.bindings import driver
    from cuda.core.graph import GraphDefinition
    from tracegraph.backends.cuda._graphlaunch import launch as c_launch

    import tracegraph as tg
    import tracegraph.backends.cuda.handles
    from tracegraph.backends.cuda import rawnodes
    _, x, kernel, args = compiled_axpb()
    keep: list = []
    execs: dict[str, int] = {}

    class Bare:
        def __init__(self) -> None:
            self.handle = ok(driver.cuGraphCreate(0))
    bare = Bare()
    rawnodes.add_kernel(bare, (GRID, 1, 1), (BLOCK, 1, 1), 0, kernel, args)
    execs["bare"] = int(ok(driver.cuGraphInstantiate(bare.handle, 0)))
    g = GraphDefinition()
    rawnodes.add_kernel(g, (GRID, 1, 1), (BLOCK, 1, 1), 0, kernel, args)
    execs["core_def_raw_kernel"] = int(ok(driver.cuGraphInstantiate(g.handle, 0)))
    # the same definition instantiated by cuda.core, then also uploaded (as tracegraph does)
    for name, upload in (("core_instantiate", False), ("core_instantiate_upload", True)):
        g2 = GraphDefinition()
        rawnodes.add_kernel(g2, (GRID, 1, 1), (BLOCK, 1, 1), 0, kernel, args)
        exe = g2.instantiate()
        if upload:
            exe.upload(tg.backends.cuda.handles.core_stream(0))
        keep += [g2, exe]
        execs[name] = int(exe.handle)
    g3 = GraphDefinition()
    rawnodes.add_kernel(g3, (GRID, 1, 1), (BLOCK, 1, 1), 0, kernel, args)
    e3 = ok(driver.cuGraphInstantiate(g3.handle, 0))
    ok((driver.cuGraphUpload(e3, driver.CUstream(0))[0], None))
    keep.append(g3)
    execs["driver_instantiate_upload"] = int(e3)
    clone = ok(driver.cuGraphClone(g.handle))
    execs["core_def_clone"] = int(ok(driver.cuGraphInstantiate(clone, 0)))
    m = GraphDefinition()
    m.memset(x.device_ctypes_pointer.value, 0, 4)
    execs["core_def_memset"] = int(ok(driver.cuGraphInstantiate(m.handle, 0)))
    b = ok(driver.cuGraphCreate(0))
    ok((driver.cuGraphAddMemsetNode(b, None, 0, _memset(driver, x), _ctx(driver))[0], None))
    execs["bare_memset"] = int(ok(driver.cuGraphInstantiate(b, 0)))
    keep += [bare, g, clone, m, b]

    def one(x):
        axpb[GRID, BLOCK](x, np.float32(0.999), np.float32(0.001))
    f = tg.compile(one, backend="cuda")
    f(x)
    execs["tracegraph"] = int(f.compiled[0].executable.built.graph.handle)
    s = cp.cuda.Stream(non_blocking=True)
    y = cuda.as_cuda_array(cp.asarray(np.linspace(0, 2, SIZE, dtype=np.float32)), sync=False)
    with s:
        s.begin_capture()
        axpb[GRID, BLOCK, cuda.external_stream(s.ptr)](y, np.float32(0.999), np.float32(0.001))
        cg = s.end_capture()
    keep += [cg, f, y]
    execs["cupy_capture"] = int(cg.graphExec)
    rounds({name: (lambda e=e: c_launch(e, 0), cuda.synchronize)
            for name, e in execs.items()}, sys.argv[1] if len(sys.argv) > 1 else None, 24)
    del keep


def _memset(driver, x):
    p = driver.CUDA_MEMSET_NODE_PARAMS()
    p.dst = x.device_ctypes_pointer.value
    p.value, p.elementSize, p.width, p.height, p.pitch = 0, 1, 4, 1, 0
    return p


def _ctx(driver):
    return ok(driver.cuCtxGetCurrent())


if __name__ == "__main__":
    main()
