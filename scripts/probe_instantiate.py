"""Why a graph made by CuPy's stream capture launches cheaper (host time) than one made with
cuda.core, whoever launches it (scripts/probe_launch_matrix.py): the same one-kernel graph
(Numba's kernel) instantiated several ways, each launched through tracegraph's C helper
(cuGraphLaunch) on the legacy stream and on a cuda.core stream. Host time per launch, 100
back to back, median of 30 samples, two interleaved rounds.

    python scripts/probe_instantiate.py [out.json]
"""
from __future__ import annotations

import sys

import numpy as np
from launch_probe import BLOCK, GRID, axpb, compiled_axpb, ok, per_stream, rounds
from numba import cuda


def main() -> None:
    import cupy as cp
    from cuda.bindings import driver
    from cuda.core import LaunchConfig
    from cuda.core.graph import GraphDefinition

    dev, x, kernel, args = compiled_axpb()

    def definition():
        g = GraphDefinition()
        g.launch(LaunchConfig(grid=GRID, block=BLOCK), kernel, *args)
        return g

    keep = []
    execs = {}
    g1 = definition()
    e1 = g1.instantiate()
    keep += [g1, e1]
    execs["core_instantiate"] = int(e1.handle)
    g2 = definition()
    keep.append(g2)
    execs["driver_instantiate_flags0"] = int(ok(driver.cuGraphInstantiate(g2.handle, 0)))
    g3 = definition()
    keep.append(g3)
    execs["cupy_runtime_instantiate"] = int(cp.cuda.runtime.graphInstantiate(int(g3.handle)))
    g4 = definition()
    keep.append(g4)
    clone = ok(driver.cuGraphClone(g4.handle))
    execs["driver_instantiate_then_destroy_source"] = int(ok(driver.cuGraphInstantiate(clone, 0)))
    ok((driver.cuGraphDestroy(clone)[0], None))
    g5 = definition()
    e5 = g5.instantiate()
    keep.append(e5)
    del g5  # the definition dropped after instantiation (CuPy destroys its graph)
    execs["core_instantiate_then_drop_definition"] = int(e5.handle)

    s = cp.cuda.Stream(non_blocking=True)
    numba_on_s = cuda.external_stream(s.ptr)
    with s:
        s.begin_capture()
        axpb[GRID, BLOCK, numba_on_s](x, np.float32(0.999), np.float32(0.001))
        cupy_graph = s.end_capture()
    keep.append(cupy_graph)
    execs["cupy_capture"] = int(cupy_graph.graphExec)
    raw = int(getattr(cupy_graph, "graph", 0) or 0)
    if raw:
        execs["cupy_capture_graph_driver_instantiate"] = int(
            ok(driver.cuGraphInstantiate(driver.CUgraph(raw), 0)))
    gb = dev.create_graph_builder()
    gb.begin_building("relaxed")
    axpb[GRID, BLOCK, gb](x, np.float32(0.999), np.float32(0.001))
    gb.end_building()
    e7 = gb.complete()
    keep += [gb, e7]
    execs["core_capture"] = int(e7.handle)
    core_stream = dev.create_stream()
    found = per_stream(execs, {"legacy": 0, "core_stream": int(core_stream.handle)})
    rounds(found, sys.argv[1] if len(sys.argv) > 1 else None, 55, sort=True)
    del keep


if __name__ == "__main__":
    main()
