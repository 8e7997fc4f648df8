"""Independent chains that the DAG runs side by side, and the picture of that DAG.

Four inputs go through the same chain (a user's smoothing kernel, then tracegraph.ops:
scale, tanh, square, exp, row sums); the chains share no data, so the dependency
analysis leaves them unordered and the CUDA graph may run them at the same time. A
join adds the four results. `tg.visualize` writes the DAG as DOT text (always) and
SVG (when Graphviz's `dot` is installed), one dashed box per independent lane.

    python examples/branches.py [--out DIR]
"""
from __future__ import annotations

import argparse
import os
import shutil

import _support  # first: picks the GPU, or Numba's simulator before Numba loads
import numpy as np
from numba import cuda

import tracegraph as tg
from tracegraph import ops


@cuda.jit
def smooth3(x, out):
    """3-point moving average along each row; the edge values repeat."""
    rows, n = x.shape
    for k in range(cuda.grid(1), rows * n, cuda.gridsize(1)):
        r = k // n
        i = k - r * n
        left = x[r, i - 1] if i > 0 else x[r, i]
        right = x[r, i + 1] if i < n - 1 else x[r, i]
        out[r, i] = (left + x[r, i] + right) / 3.0


def chain(x):
    smoothed = tg.empty_like(x)
    threads = 256 if _support.GPU else 8
    blocks = min(-(-x.size // threads), 1024 if _support.GPU else 2)
    smooth3[blocks, threads](x, smoothed)
    y = ops.tanh(smoothed * 0.5)
    y = ops.exp(-(y * y))
    return ops.sum(y, axis=1)


@tg.compile
def four_chains(a, b, c, d):
    ra, rb, rc, rd = (chain(x) for x in (a, b, c, d))
    return (ra + rb) + (rc + rd)


def reference(*inputs: np.ndarray) -> np.ndarray:
    total = 0
    for x in inputs:
        padded = np.concatenate([x[:, :1], x, x[:, -1:]], axis=1)
        smoothed = (padded[:, :-2] + padded[:, 1:-1] + padded[:, 2:]) / 3.0
        y = np.tanh(smoothed * 0.5)
        total = total + np.exp(-(y * y)).sum(axis=1)
    return total


def main(small: bool | None = None, out_dir: str = ".") -> dict[str, str]:
    """Run the example and write the DAG; returns the paths written ({"dot": ..., "svg": ...})."""
    small = not _support.GPU if small is None else small
    rows, cols = (3, 10) if small else (64, 4096)
    print(f"branches on the {_support.where()}: 4 independent chains over {rows}x{cols} inputs")
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((rows, cols)) for _ in range(4)]
    d_inputs = _support.device(*inputs)
    total = four_chains(*d_inputs)
    _support.check("four chains joined", total, reference(*inputs), rtol=1e-10, atol=1e-10)

    program = four_chains.latest.program
    g = program.graph
    kernels = [i for i in g.nodes if program.ops[i].kind == "kernel"]
    lanes = {g.nodes[i].get("lane", 0) for i in kernels}
    sources = [i for i in kernels if not any(program.ops[p].kind == "kernel"
                                             for p in g.predecessors(i))]
    print(f"  {len(kernels)} kernels in {len(lanes)} lanes; {len(sources)} can start at once")
    assert len(sources) == 4, "each chain's first kernel depends on nothing"

    os.makedirs(out_dir, exist_ok=True)
    paths = {"dot": os.path.join(out_dir, "branches.dot")}
    tg.visualize(four_chains, path=paths["dot"])
    if shutil.which("dot"):
        paths["svg"] = os.path.join(out_dir, "branches.svg")
        tg.visualize(four_chains, format="svg", path=paths["svg"])
    else:
        print("  (Graphviz's `dot` is not installed: DOT text only)")
    print("  wrote " + ", ".join(paths.values()))
    _support.report_timing("4 chains", four_chains, tuple(d_inputs))
    return paths


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".", help="folder for branches.dot / branches.svg")
    main(out_dir=parser.parse_args().out)
