"""W2: fork/join. 8 independent chains of 16 tiny kernels on 8 separate
arrays, then one join kernel summing them. tracegraph should infer the 8
parallel branches; a single-stream capture records them one after another."""
import numpy as np
from numba import cuda

from benchmarks.common import Bench, Skip, compare, run_bench
from benchmarks.contenders import (
    capture_numba,
    cupy_graph,
    torch_graph,
    tracegraph_bench,
)
from benchmarks.w1_chain import A, B, axpb, x0

ID = "W2"
TITLE = "Fork/join: 8 chains x 16 kernels + join"
PRIMARY = "step_us"
BASELINE = "numba_capture"
CHAINS = 8


@cuda.jit
def join8(x0, x1, x2, x3, x4, x5, x6, x7, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x0[i] + x1[i] + x2[i] + x3[i] + x4[i] + x5[i] + x6[i] + x7[i]


def sizes(cfg):
    if cfg.smoke:
        return {"length": 2, "size": 4, "block": 4}
    return {"length": 16, "size": 1024, "block": 256}


def make_forkjoin(length, grid, block, stream=0):
    def forkjoin(x0, x1, x2, x3, x4, x5, x6, x7, out):
        for x in (x0, x1, x2, x3, x4, x5, x6, x7):
            for _ in range(length):
                axpb[grid, block, stream](x, A, B)
        join8[grid, block, stream](x0, x1, x2, x3, x4, x5, x6, x7, out)
    return forkjoin


def inputs(size):
    return [x0(size) + np.float32(c) for c in range(CHAINS)]


def reference(size, length):
    xs = inputs(size)
    for _ in range(length):
        xs = [x * A + B for x in xs]
    return sum(xs[1:], xs[0])


def builders(env, length, size, block):
    grid = (size + block - 1) // block
    fj = make_forkjoin(length, grid, block)
    nodes = CHAINS * length + 1

    def numba_args():
        return [cuda.to_device(x) for x in inputs(size)] + [cuda.device_array(size, np.float32)]

    def check_with(args, run_once):
        def check():
            for d, h in zip(args[:CHAINS], inputs(size)):
                d.copy_to_device(h)
            run_once()
            env.sync()
            return compare(args[-1].copy_to_host(), reference(size, length), rtol=1e-4, atol=1e-4)
        return check

    def numba_eager():
        args = numba_args()
        step = lambda: fj(*args)
        return Bench(step, nodes=nodes, check=check_with(args, step))

    def numba_capture():
        env.need_gpu("stream capture")
        args = numba_args()
        fj(*args)
        env.sync()
        replay, how = capture_numba(env, lambda s: make_forkjoin(length, grid, block, s)(*args))
        return Bench(replay, nodes=nodes, check=check_with(args, replay),
                     note="single-stream capture; " + how, keep=(replay, args))

    def tracegraph():
        args = numba_args()
        return tracegraph_bench(env, fj, tuple(args), nodes=nodes,
                                check=lambda f: check_with(args, lambda: f.replay(*args))())

    def torch_eager(graph=None):
        torch = env.torch
        if torch is None:
            raise Skip(env.notes.get("torch", "torch unavailable"))
        X = torch.from_numpy(np.stack(inputs(size))).cuda()
        out = torch.empty(size, device="cuda")
        bt = torch.tensor(float(B), device="cuda")
        a = float(A)
        rows = [X[c] for c in range(CHAINS)]

        def chain(c):
            r = rows[c]
            for _ in range(length):
                torch.add(bt, r, alpha=a, out=r)

        def step():
            for c in range(CHAINS):
                chain(c)
            torch.sum(X, 0, out=out)

        if graph is None:
            return Bench(step, nodes=nodes, keep=(X, out, bt))
        if graph == "one_stream":
            g = torch_graph(torch, step)
            return Bench(g.replay, nodes=nodes, note="torch.cuda.graph, one stream",
                         keep=(g, X, out, bt))
        side = [torch.cuda.Stream() for _ in range(CHAINS)]

        def step_multi():  # hand-written fork/join over 8 side streams
            cur = torch.cuda.current_stream()
            for c in range(CHAINS):
                side[c].wait_stream(cur)
                with torch.cuda.stream(side[c]):
                    chain(c)
            for c in range(CHAINS):
                cur.wait_stream(side[c])
            torch.sum(X, 0, out=out)
        g = torch_graph(torch, step_multi)
        return Bench(g.replay, nodes=nodes, note="torch.cuda.graph, 8 side streams by hand",
                     keep=(g, X, out, bt, side))

    def cupy_eager(graph=False):
        cp = env.cupy
        if cp is None:
            raise Skip(env.notes.get("cupy", "cupy unavailable"))
        k = cp.ElementwiseKernel("float32 a, float32 b", "float32 x", "x = x * a + b", "w1_axpb")
        join = cp.ElementwiseKernel(", ".join(f"float32 x{c}" for c in range(CHAINS)), "float32 y",
                                    "y = " + " + ".join(f"x{c}" for c in range(CHAINS)), "w2_join8")
        X = cp.asarray(np.stack(inputs(size)))
        out = cp.empty(size, dtype=cp.float32)
        rows = [X[c] for c in range(CHAINS)]

        def step():
            for r in rows:
                for _ in range(length):
                    k(A, B, r)
            join(*rows, out)
        if graph:
            launch = cupy_graph(cp, step)
            return Bench(launch, nodes=nodes, note="CuPy stream capture, one stream",
                         keep=(launch, X, out))
        return Bench(step, nodes=nodes, keep=(X, out))

    return [("numba_eager", numba_eager), ("numba_capture", numba_capture),
            ("tracegraph", tracegraph),
            ("torch_eager", torch_eager), ("torch_graph", lambda: torch_eager("one_stream")),
            ("torch_graph_multistream", lambda: torch_eager("multi")),
            ("cupy_eager", cupy_eager), ("cupy_graph", lambda: cupy_eager(True))]


def run(env, native=None):
    s = sizes(env.cfg)
    case = f"{CHAINS}x{s['length']}+join"
    rows = [run_bench(env, ID, case, name, build)
            for name, build in builders(env, s["length"], s["size"], s["block"])]
    if native is not None:
        rows.extend(native.w2_rows(env, ID, case, CHAINS * s["length"] + 1))
    return rows
