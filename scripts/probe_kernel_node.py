"""What differs between the kernel node CuPy's stream capture makes and the one cuda.core's
explicit graph API makes (a graph of the former launches ~1.5 us cheaper on the host,
scripts/probe_instantiate.py): each graph's nodes and kernel-node parameters as the driver
reports them (function or library kernel, context), then one-node graphs built through
cuda.bindings with a CUfunction and with a CUkernel, launched like the others (host time per
launch, 100 back to back through tracegraph's C helper, median of 30; two rounds).

    python scripts/probe_kernel_node.py [out.json]
"""
from __future__ import annotations

import ctypes
import sys

import numpy as np
from launch_probe import BLOCK, GRID, axpb, compiled_axpb, ok, per_stream, rounds
from numba import cuda


def describe(driver, graph) -> list[str]:
    _, count = ok(driver.cuGraphGetNodes(graph, 0))
    nodes = ok(driver.cuGraphGetNodes(graph, count))[0] if count else []
    out = []
    for node in nodes:
        kind = ok(driver.cuGraphNodeGetType(node))
        line = f"{kind!r}"
        if int(kind) == int(driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL):
            p = ok(driver.cuGraphKernelNodeGetParams(node))
            line += (f" func={int(p.func)} kern={int(getattr(p, 'kern', 0) or 0)} "
                     f"ctx={int(getattr(p, 'ctx', 0) or 0)} grid={p.gridDimX} "
                     f"block={p.blockDimX} extra={int(p.extra or 0) if p.extra else 0}")
        out.append(line)
    return out


def main() -> None:
    import cupy as cp
    from cuda.bindings import driver
    from cuda.core import LaunchConfig
    from cuda.core.graph import GraphDefinition

    dev, x, kernel, args = compiled_axpb()
    report: dict = {}
    keep: list = []
    execs = {}

    g = GraphDefinition()
    g.launch(LaunchConfig(grid=GRID, block=BLOCK), kernel, *args)
    keep.append(g)
    report["core_explicit_nodes"] = describe(driver, g.handle)
    execs["core_explicit"] = int(ok(driver.cuGraphInstantiate(g.handle, 0)))

    s = cp.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        axpb[GRID, BLOCK, cuda.external_stream(s.ptr)](x, np.float32(0.999), np.float32(0.001))
        cg = s.end_capture()
    keep.append(cg)
    raw = int(getattr(cg, "graph", 0) or 0)
    if raw:
        report["cupy_capture_nodes"] = describe(driver, driver.CUgraph(raw))
    execs["cupy_capture"] = int(cg.graphExec)

    pointers = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
    keep.append(pointers)
    kern = kernel.handle
    func = ok(driver.cuKernelGetFunction(kern))
    for name, use_func in (("bindings_cufunction", True), ("bindings_cukernel", False)):
        graph = ok(driver.cuGraphCreate(0))
        p = driver.CUDA_KERNEL_NODE_PARAMS()
        if use_func:
            p.func = func
        else:
            p.kern = kern
        p.gridDimX, p.gridDimY, p.gridDimZ = GRID, 1, 1
        p.blockDimX, p.blockDimY, p.blockDimZ = BLOCK, 1, 1
        p.sharedMemBytes = 0
        p.kernelParams = ctypes.addressof(pointers)
        try:
            ok(driver.cuGraphAddKernelNode(graph, None, 0, p))
            report[f"{name}_nodes"] = describe(driver, graph)
            execs[name] = int(ok(driver.cuGraphInstantiate(graph, 0)))
        except Exception as exc:
            report[f"{name}_error"] = repr(exc)
        keep.append(graph)
    # the same bare graph with one user object retained (cuda.core may attach some to keep
    # what a node uses alive), and a cuda.core graph with no kernel node (one memset)
    destroy = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda _: None)
    keep.append(destroy)
    try:
        graph = ok(driver.cuGraphCreate(0))
        p = driver.CUDA_KERNEL_NODE_PARAMS()
        p.func = func
        p.gridDimX, p.gridDimY, p.gridDimZ = GRID, 1, 1
        p.blockDimX, p.blockDimY, p.blockDimZ = BLOCK, 1, 1
        p.kernelParams = ctypes.addressof(pointers)
        ok(driver.cuGraphAddKernelNode(graph, None, 0, p))
        obj = ok(driver.cuUserObjectCreate(
            0, driver.CUhostFn(ctypes.cast(destroy, ctypes.c_void_p).value), 1,
            driver.CUuserObject_flags.CU_USER_OBJECT_NO_DESTRUCTOR_SYNC))
        ok((driver.cuGraphRetainUserObject(
            graph, obj, 1, driver.CUuserObjectRetain_flags.CU_GRAPH_USER_OBJECT_MOVE)[0], None))
        execs["bindings_with_user_object"] = int(ok(driver.cuGraphInstantiate(graph, 0)))
        keep.append(graph)
    except Exception as exc:
        report["user_object_error"] = repr(exc)
    # cuda.core with a Kernel it does not own (from_handle): does it still retain an object?
    from cuda.core import Kernel
    for name, handle in (("core_from_cukernel_handle", int(kern)),
                         ("core_from_cufunction_handle", int(func))):
        try:
            k2 = Kernel.from_handle(handle)
            g2 = GraphDefinition()
            g2.launch(LaunchConfig(grid=GRID, block=BLOCK), k2, *args)
            keep += [k2, g2]
            execs[name] = int(ok(driver.cuGraphInstantiate(g2.handle, 0)))
        except Exception as exc:
            report[f"{name}_error"] = repr(exc)
    m = GraphDefinition()
    m.memset(x.device_ctypes_pointer.value, 0, 4)
    keep.append(m)
    execs["core_memset_only"] = int(ok(driver.cuGraphInstantiate(m.handle, 0)))
    b = ok(driver.cuGraphCreate(0))
    ok(driver.cuGraphAddEmptyNode(b, None, 0))
    keep.append(b)
    execs["bindings_empty_only"] = int(ok(driver.cuGraphInstantiate(b, 0)))
    if len(sys.argv) > 2:  # the cuda.core graph as the driver prints it, verbosely
        ok((driver.cuGraphDebugDotPrint(g.handle, sys.argv[2].encode(), 1)[0], None))
    core_stream = dev.create_stream()
    for k, v in report.items():
        print(k, v)
    found = per_stream(execs, {"legacy": 0, "core_stream": int(core_stream.handle)})
    rounds(found, sys.argv[1] if len(sys.argv) > 1 else None, 40, sort=True,
           extra={"nodes": report})
    del keep


if __name__ == "__main__":
    main()
