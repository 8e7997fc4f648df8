"""Contender plumbing shared by the workloads: tracegraph's compile/replay,
stream capture of Numba launches, and PyTorch / CuPy graph capture."""
from benchmarks.common import Bench, Skip


def tg_compile(env, fn):
    """``tg.compile`` with the backend named explicitly: ``cuda`` on a GPU (never a
    silent fallback to the CPU reference), ``sim`` in smoke mode."""
    if env.tg is None:
        raise Skip(f"import tracegraph failed: {env.tg_error}")
    return env.tg.compile(fn, backend="cuda" if env.gpu else "sim")


def tracegraph_bench(env, fn, args, nodes=0, check=None, note=""):
    """tg.compile(fn); the first call compiles; the step is ``replay``."""
    f = tg_compile(env, fn)
    f(*args)
    env.sync()
    return Bench(step=lambda: f.replay(*args), nodes=nodes,
                 check=(lambda: check(f)) if check else None, note=note, keep=f)


def capture_numba(env, launch):
    """Stream-capture the Numba launches issued by ``launch(stream)`` into a
    CUDA graph; return (replay, how).

    First choice: cuda.core's GraphBuilder (numba-cuda >= 0.30 accepts it as
    the stream of ``kernel[grid, block, stream]``; tested upstream in
    numba-cuda's test_cuda_driver.py). Fallback: cuStreamBeginCapture /
    cuStreamEndCapture / cuGraphInstantiate / cuGraphLaunch via cuda.bindings
    on a Numba stream. Kernels must have run once eagerly before (JIT done).
    """
    env.need_gpu("stream capture")
    errors = []
    try:
        from cuda.core import Device
        dev = Device()
        dev.set_current()
        stream = dev.create_stream()
        gb = dev.create_graph_builder()
        gb.begin_building("relaxed")
        try:
            launch(gb)
        finally:
            gb.end_building()
        graph = gb.complete()

        def replay():
            graph.launch(stream)
        replay.keep = (dev, stream, gb, graph)
        return replay, "cuda.core GraphBuilder capture, Graph.launch"
    except Exception as e:  # noqa: BLE001
        errors.append(f"cuda.core: {type(e).__name__}: {e}")
    try:
        from cuda.bindings import driver as drv

        def ck(res):
            err = res[0]
            if err != drv.CUresult.CUDA_SUCCESS:
                raise RuntimeError(repr(err))
            return res[1] if len(res) > 1 else None
        ns = env.cuda.stream()
        h = drv.CUstream(int(ns.handle))
        ck(drv.cuStreamBeginCapture(h, drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED))
        try:
            launch(ns)
        finally:
            graph = ck(drv.cuStreamEndCapture(h))
        gexec = ck(drv.cuGraphInstantiate(graph, 0))
        launch_fn = drv.cuGraphLaunch

        def replay():
            launch_fn(gexec, h)
        replay.keep = (ns, h, graph, gexec)
        return replay, "cuda.bindings cuStreamBeginCapture, cuGraphLaunch (" + "; ".join(errors) + ")"
    except Exception as e:  # noqa: BLE001
        errors.append(f"cuda.bindings: {type(e).__name__}: {e}")
    raise RuntimeError("stream capture failed: " + " | ".join(errors))


def torch_graph(torch, step, warmup=3):
    """Capture ``step`` with torch.cuda.graph after a side-stream warm-up."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    torch.cuda.synchronize()
    return g


def cupy_graph(cp, step, warmup=3):
    """Capture ``step`` on a non-blocking CuPy stream; return a launcher."""
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        for _ in range(warmup):     # JIT + memory-pool warm-up on this stream
            step()
        s.synchronize()
        s.begin_capture()
        try:
            step()
        finally:
            g = s.end_capture()
    g.upload(s)
    s.synchronize()

    def launch():
        g.launch(s)
    launch.keep = (s, g)
    return launch
