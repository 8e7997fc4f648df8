"""W3: one MLP inference step, 3 dense layers (matmul + bias + ReLU) of width
256 at batch 1..64. The Numba kernel is a plain one-thread-per-output dense
layer; PyTorch and CuPy do the equivalent work with cuBLAS + elementwise ops."""
import numpy as np
from numba import cuda

from benchmarks.common import Bench, Skip, compare, run_bench
from benchmarks.contenders import (
    capture_numba,
    cupy_graph,
    torch_graph,
    tracegraph_bench,
)

ID = "W3"
TITLE = "MLP inference step (3 x dense+bias+ReLU, width 256)"
PRIMARY = "step_us"
BASELINE = "numba_eager"
LAYERS = 3


@cuda.jit
def dense_relu(x, w, b, out):
    """out[r, c] = max(0, sum_k x[r, k] * w[k, c] + b[c])."""
    i = cuda.grid(1)
    m = out.shape[1]
    if i < out.shape[0] * m:
        r = i // m
        c = i % m
        acc = b[c]
        for k in range(x.shape[1]):
            acc += x[r, k] * w[k, c]
        out[r, c] = max(0, acc)


def sizes(cfg):
    if cfg.smoke:
        return {"batches": [2], "width": 4, "block": 4}
    if cfg.mode == "quick":
        return {"batches": [1, 64], "width": 256, "block": 256}
    return {"batches": [1, 8, 64], "width": 256, "block": 256}


def params(width, batch, seed=0):
    rng = np.random.default_rng(seed)
    ws = [(rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
          for _ in range(LAYERS)]
    bs = [(rng.standard_normal(width) * 0.1).astype(np.float32) for _ in range(LAYERS)]
    x = rng.standard_normal((batch, width)).astype(np.float32)
    return x, ws, bs


def reference(x, ws, bs):
    h = x
    for w, b in zip(ws, bs):
        h = np.maximum(h @ w + b, 0)
    return h


@cuda.jit
def bias_relu(b, t):
    """t[r, c] = max(0, t[r, c] + b[c]) in place."""
    i = cuda.grid(1)
    m = t.shape[1]
    if i < t.shape[0] * m:
        r = i // m
        c = i % m
        t[r, c] = max(0, t[r, c] + b[c])


def make_mlp_ops(grid, block):
    """The same step through tracegraph.ops.matmul (cuBLAS where nvmath-python is there,
    a captured library node) and one Numba bias+ReLU kernel per layer, as PyTorch's."""
    from tracegraph import ops

    def mlp(x, w0, b0, w1, b1, w2, b2, h0, h1, out):
        h = x
        for w, b, o in ((w0, b0, h0), (w1, b1, h1), (w2, b2, out)):
            ops.matmul(h, w, out=o)
            bias_relu[grid, block](b, o)
            h = o
    return mlp


def make_mlp_linear():
    """The same step through tracegraph.ops.linear: one cuBLASLt node per layer, its
    epilogue adding the bias and applying ReLU."""
    from tracegraph import ops

    def mlp(x, w0, b0, w1, b1, w2, b2, h0, h1, out):
        h = x
        for w, b, o in ((w0, b0, h0), (w1, b1, h1), (w2, b2, out)):
            ops.linear(h, w, b, activation="relu", out=o)
            h = o
    return mlp


def make_mlp(grid, block, stream=0):
    def mlp(x, w0, b0, w1, b1, w2, b2, h0, h1, out):
        dense_relu[grid, block, stream](x, w0, b0, h0)
        dense_relu[grid, block, stream](h0, w1, b1, h1)
        dense_relu[grid, block, stream](h1, w2, b2, out)
    return mlp


def builders(env, batch, width, block):
    grid = (batch * width + block - 1) // block
    mlp = make_mlp(grid, block)
    x, ws, bs = params(width, batch)
    ref = reference(x, ws, bs)

    def numba_args():
        d = [cuda.to_device(x)]
        for w, b in zip(ws, bs):
            d += [cuda.to_device(w), cuda.to_device(b)]
        return d + [cuda.device_array((batch, width), np.float32) for _ in range(LAYERS)]

    def check_with(args, run_once):
        def check():
            args[-1].copy_to_device(np.zeros((batch, width), np.float32))
            run_once()
            env.sync()
            return compare(args[-1].copy_to_host(), ref, rtol=1e-3, atol=1e-4)
        return check

    def numba_eager():
        args = numba_args()
        step = lambda: mlp(*args)
        return Bench(step, check=check_with(args, step))

    def numba_capture():
        env.need_gpu("stream capture")
        args = numba_args()
        mlp(*args)
        env.sync()
        replay, how = capture_numba(env, lambda s: make_mlp(grid, block, s)(*args))
        return Bench(replay, check=check_with(args, replay), note=how,
                     keep=(replay, args))

    def tracegraph():
        args = numba_args()
        return tracegraph_bench(env, mlp, tuple(args),
                                check=lambda f: check_with(args, lambda: f.replay(*args))())

    def tracegraph_cublas(fused=False):
        import os

        from tracegraph.backends.cuda import cublas
        if env.gpu and not cublas.available():
            raise Skip("nvmath-python's cuBLAS bindings unavailable")
        args = numba_args()
        # without a GPU (the smoke run): the library node with its NumPy stand-in
        old = os.environ.get("TRACEGRAPH_MATMUL")
        os.environ["TRACEGRAPH_MATMUL"] = "cublas"
        mlp_ = make_mlp_linear() if fused else make_mlp_ops(grid, block)
        note = ("tracegraph.ops.linear: one cuBLASLt node per layer (bias + ReLU epilogue)"
                if fused else "tracegraph.ops.matmul (cuBLAS library node) + bias+ReLU "
                              "kernel: 2 nodes per layer")
        try:
            return tracegraph_bench(env, mlp_, tuple(args),
                                    check=lambda f: check_with(args, lambda: f.replay(*args))(),
                                    note=note)
        finally:
            if old is None:
                os.environ.pop("TRACEGRAPH_MATMUL")
            else:
                os.environ["TRACEGRAPH_MATMUL"] = old

    def torch_eager(graph=False):
        torch = env.torch
        if torch is None:
            raise Skip(env.notes.get("torch", "torch unavailable"))
        tx = torch.from_numpy(x).cuda()
        tw = [torch.from_numpy(w).cuda() for w in ws]
        tb = [torch.from_numpy(b).cuda() for b in bs]
        hs = [torch.empty(batch, width, device="cuda") for _ in range(LAYERS)]

        def step():
            h = tx
            for w, b, o in zip(tw, tb, hs):
                torch.addmm(b, h, w, out=o)
                o.relu_()
                h = o
        note = "torch.addmm (cuBLAS) + relu_: 2 kernels per layer"
        if graph:
            g = torch_graph(torch, step)
            return Bench(g.replay, note=note, keep=(g, tx, tw, tb, hs))
        return Bench(step, note=note, keep=(tx, tw, tb, hs))

    def cupy_eager(graph=False):
        cp = env.cupy
        if cp is None:
            raise Skip(env.notes.get("cupy", "cupy unavailable"))
        bias_relu = cp.ElementwiseKernel("float32 b", "float32 t", "t = max(t + b, 0.f)",
                                         "w3_bias_relu")
        cx = cp.asarray(x)
        cw = [cp.asarray(w) for w in ws]
        cb = [cp.asarray(b) for b in bs]
        hs = [cp.empty((batch, width), dtype=cp.float32) for _ in range(LAYERS)]

        def step():
            h = cx
            for w, b, o in zip(cw, cb, hs):
                cp.matmul(h, w, out=o)
                bias_relu(b, o)
                h = o
        note = "cupy.matmul (cuBLAS) + ElementwiseKernel bias+ReLU: 2 kernels per layer"
        if graph:
            launch = cupy_graph(cp, step)
            return Bench(launch, note=note, keep=(launch, cx, cw, cb, hs))
        return Bench(step, note=note, keep=(cx, cw, cb, hs))

    return [("numba_eager", numba_eager), ("numba_capture", numba_capture),
            ("tracegraph", tracegraph), ("tracegraph_cublas", tracegraph_cublas),
            ("tracegraph_linear", lambda: tracegraph_cublas(True)),
            ("torch_eager", torch_eager), ("torch_graph", lambda: torch_eager(True)),
            ("cupy_eager", cupy_eager), ("cupy_graph", lambda: cupy_eager(True))]


def run(env, native=None):
    s = sizes(env.cfg)
    rows = []
    for batch in s["batches"]:
        for name, build in builders(env, batch, s["width"], s["block"]):
            rows.append(run_bench(env, ID, f"batch={batch}", name, build))
    return rows
