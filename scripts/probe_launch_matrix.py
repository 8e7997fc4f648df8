"""Which of graph, stream or launcher makes CuPy's `Graph.launch` cheaper on the host than
cuda.core's: one one-kernel graph made by CuPy's stream capture and one made with
cuda.core's explicit graph API (the same Numba kernel), each launched by CuPy's runtime
call, by the driver's cuGraphLaunch through cuda.bindings and through tracegraph's C
helper, on CuPy's stream, on a cuda.core stream and on the legacy default stream. Host time
per launch, 100 launches back to back (median of 30 samples; two rounds, interleaved).

    python scripts/probe_launch_matrix.py [out.json]
"""
from __future__ import annotations

import sys

import numpy as np
from launch_probe import BLOCK, GRID, axpb, compiled_axpb, rounds
from numba import cuda


def main() -> None:
    import cupy as cp
    from cuda.bindings import driver
    from cuda.core import LaunchConfig
    from cuda.core.graph import GraphDefinition

    dev, x, kernel, args = compiled_axpb()
    g = GraphDefinition()
    g.launch(LaunchConfig(grid=GRID, block=BLOCK), kernel, *args)
    core_graph = g.instantiate()

    s = cp.cuda.Stream(non_blocking=True)
    numba_on_s = cuda.external_stream(s.ptr)
    with s:
        s.begin_capture()
        axpb[GRID, BLOCK, numba_on_s](x, np.float32(0.999), np.float32(0.001))
        cupy_graph = s.end_capture()
    core_stream = dev.create_stream()
    streams = {"cupy_stream": int(s.ptr), "core_stream": int(core_stream.handle), "legacy": 0}
    execs = {"cupy_graph": int(getattr(cupy_graph, "graphExec", 0) or 0),
             "core_graph": int(core_graph.handle)}
    try:
        from tracegraph.backends.cuda._graphlaunch import launch as c_launch
    except ImportError:
        c_launch = None
    runtime_launch = getattr(cp.cuda.runtime, "graphLaunch", None)
    found = {}
    for gname, exec_ in execs.items():
        if not exec_:
            print("no exec handle for", gname, [a for a in dir(cupy_graph) if "xec" in a])
            continue
        handle = driver.CUgraphExec(exec_)
        for sname, sp in streams.items():
            stream = driver.CUstream(sp)

            def sync(sp=sp):
                driver.cuStreamSynchronize(driver.CUstream(sp))
            found[f"{gname}/{sname}/bindings"] = (
                lambda h=handle, st=stream: driver.cuGraphLaunch(h, st), sync)
            if c_launch is not None:
                found[f"{gname}/{sname}/c_helper"] = (
                    lambda e=exec_, sp=sp: c_launch(e, sp), sync)
            if runtime_launch is not None:
                found[f"{gname}/{sname}/cupy_runtime"] = (
                    lambda e=exec_, sp=sp: runtime_launch(e, sp), sync)
    found["cupy_graph/cupy_stream/Graph.launch"] = (lambda: cupy_graph.launch(s), s.synchronize)
    found["core_graph/core_stream/Graph.launch"] = (lambda: core_graph.launch(core_stream),
                                                    core_stream.sync)
    rounds(found, sys.argv[1] if len(sys.argv) > 1 else None, 45, sort=True)


if __name__ == "__main__":
    main()
