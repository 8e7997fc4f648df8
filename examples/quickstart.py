"""Quickstart: two independent branches joined by a third kernel, compiled into one graph.

Runs on the GPU when one is usable, else on Numba's CUDA simulator (CPU), and checks
its own result against NumPy.
"""
import sys

import _support  # noqa: F401 - first: picks the simulator when no GPU is usable

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

import tracegraph as tg  # noqa: E402


@cuda.jit
def scale(x, a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i]


@cuda.jit
def add(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


@tg.compile
def step(x, y):
    u, v, out = tg.empty_like(x), tg.empty_like(y), tg.empty_like(x)
    scale[4, 256](x, 2.0, u)      # branch 1
    scale[4, 256](y, 3.0, v)      # branch 2, independent of branch 1
    add[4, 256](u, v, out)        # join
    return out


def main() -> int:
    n = 1000
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    out = step(x, y)                      # trace, compile, launch
    assert np.allclose(out, 2 * x + 3 * y), "first call gave a wrong result"
    x2, y2 = rng.standard_normal(n), rng.standard_normal(n)
    out2 = step.replay(x2, y2)            # one graph launch, new inputs
    assert np.allclose(out2, 2 * x2 + 3 * y2), "replay gave a wrong result"
    assert np.allclose(out, 2 * x + 3 * y), "an earlier result changed under the caller"

    program = step.trace(x, y)
    g = program.graph
    kernels = [i for i in g if g.nodes[i]["op"].kind == "kernel"]
    b1, b2, join = kernels
    import networkx as nx
    assert not nx.has_path(g, b1, b2) and not nx.has_path(g, b2, b1), "branches are ordered"
    assert {b1, b2} <= nx.ancestors(g, join), "the join does not wait for both branches"

    plan = step.lower(x, y)
    print(f"backend: {step.backend}")
    print(f"plan: {plan}")
    for node in plan.nodes:
        print(f"  node {node.index}: {node.kind:7s} {node.name:18s} deps={list(node.deps)}")
    print("PASS: 2x + 3y, branches unordered and joined at add")
    return 0


if __name__ == "__main__":
    sys.exit(main())
