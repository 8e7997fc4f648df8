"""Dynamic-shape numbers (docs/dynamic-shapes.md): in-place update of an instantiated graph vs a
new instantiation, for chains of 10, 100 and 1,000 kernel nodes; a new bucket's first call
through each path; device bytes of the graph-owned intermediates per bucket with and
without memory planning (for the chain and for examples/decode_step.py's decoder).

    python scripts/measure_dynamic.py [out.json]      (a GPU; memory numbers also on sim)
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import _support  # noqa: E402,F401  (first: the GPU, or Numba's simulator)
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

import tracegraph as tg  # noqa: E402
from tracegraph.passes.memory import unplanned_bytes  # noqa: E402

BUCKETS = (256, 512, 1024)


@cuda.jit
def axpb(x, a, b, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] * a + b


def chain(n: int, **options):
    """n kernels, each writing a new graph-owned intermediate: n - 1 temporaries of which
    two are live at once."""
    def body(x):
        t = x
        for _ in range(n):
            u = tg.empty_like(t)
            axpb[(t.shape[0] + 127) // 128, 128](t, 1.0001, 0.5, u)
            t = u
        return t
    body.__name__ = body.__qualname__ = f"chain{n}"
    return tg.compile(body, dynamic={"x": 0}, buckets=BUCKETS, **options)


def median_s(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def memory(fn, example) -> dict:
    """Per bucket: bytes of the planned intermediates in one arena vs one allocation each."""
    out = {}
    for b in BUCKETS:
        program = fn.trace(example(b))
        out[b] = {"planned": program.arena_bytes, "unplanned": unplanned_bytes(program)}
    return out


def update_vs_instantiate(n: int) -> dict:
    """Driver cost only: cuGraphExecUpdate of a held executable to another bucket's
    definition (same topology) vs cuGraphInstantiate of that definition."""
    f = chain(n)
    for b in BUCKETS[:2]:
        f(cuda.to_device(np.ones(b, np.float32)))
    cuda.synchronize()
    e0, e1 = (c.executable for c in f.compiled[:2])
    gdefs = (e0.built.gdef, e1.built.gdef)
    graph = e0.built.graph
    flip = [0]

    def update():
        flip[0] ^= 1
        graph.update(gdefs[flip[0]])

    def instantiate():
        gdefs[1].instantiate().close()

    r = {"update_ms": median_s(update, 21) * 1e3,
         "instantiate_ms": median_s(instantiate, 9 if n >= 1000 else 21) * 1e3}
    graph.update(gdefs[0])  # back to its own definition before it is replayed or freed
    r["instantiate_over_update"] = r["instantiate_ms"] / r["update_ms"]
    return r


def first_call_of_a_new_bucket(n: int) -> dict:
    """What a user sees: the first call of a new bucket (trace, lower, build included)
    when a bounded cache updates a held executable vs when it instantiates a new one."""
    r = {}
    for label, options in (("updated", {"max_graphs": 1}), ("instantiated", {})):
        f = chain(n, **options)
        f(cuda.to_device(np.ones(BUCKETS[0], np.float32)))
        cuda.synchronize()
        t0 = time.perf_counter()
        f(cuda.to_device(np.ones(BUCKETS[1], np.float32)))
        cuda.synchronize()
        r[f"{label}_ms"] = (time.perf_counter() - t0) * 1e3
        info = f.cache_info()
        r[f"{label}_counts"] = {"updates": info.updates, "instantiations": info.instantiations}
    return r


def decode_memory() -> dict:
    """examples/decode_step.py's decoder at the example's full size (trace only)."""
    import decode_step as d
    cfg = d.Config(vocab=2048, d_model=256, heads=8, layers=4, d_ff=1024, max_len=128)
    d_params = d.params_map(cuda.to_device, d.init_params(cfg))
    k, v = d.new_cache(cfg, max(d.BUCKETS))
    out = {}
    for b in d.BUCKETS:
        program = d.decode_step.trace(np.zeros(b, np.int32), 0, k, v, d_params)
        out[b] = {"planned": program.arena_bytes, "unplanned": unplanned_bytes(program)}
    return out


def main() -> None:
    results: dict = {"gpu": _support.GPU, "buckets": BUCKETS}
    results["memory_chain100"] = memory(chain(100), lambda b: np.ones(b, np.float32))
    results["memory_decode"] = decode_memory()
    if _support.GPU:
        for n in (10, 100, 1000):
            results[f"chain{n}"] = update_vs_instantiate(n)
            results[f"chain{n}_first_call"] = first_call_of_a_new_bucket(n)
    print(json.dumps(results, indent=1))
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
