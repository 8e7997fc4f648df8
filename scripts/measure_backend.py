"""Backend numbers on a GPU: chain of 100 tiny kernels (replay vs eager Numba), host time of
one replay with unchanged device inputs, per-input cost of a changed pointer, and build +
instantiate time for 1,000 nodes. Prints a table; writes JSON to argv[1] if given."""
import json
import statistics
import sys
import time

import numpy as np
from numba import cuda

import tracegraph as tg


@cuda.jit
def axpb(x, a, b):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a + b


def chain(n):
    def f(x):
        for _ in range(n):
            axpb[4, 256](x, 1.0001, 0.5)
        return x
    f.__name__ = f.__qualname__ = f"chain{n}"
    return tg.compile(f)


def median_time(fn, reps, sync=True):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        if sync:
            cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    results = {}
    x = cuda.to_device(np.ones(1024, np.float32))
    f = chain(100)
    f(x)
    cuda.synchronize()

    def eager():
        for _ in range(100):
            axpb[4, 256](x, 1.0001, 0.5)
    eager()
    cuda.synchronize()
    for _ in range(20):
        f.replay(x)
    cuda.synchronize()
    results["chain100_replay_ms"] = median_time(lambda: f.replay(x), 300) * 1e3
    results["chain100_eager_ms"] = median_time(eager, 50) * 1e3
    results["chain100_speedup"] = results["chain100_eager_ms"] / results["chain100_replay_ms"]

    # host time of one replay call, unchanged inputs, no sync between calls
    g = chain(1)
    g(x)
    cuda.synchronize()
    n = 2000
    samples = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(n):
            g.replay(x)
        samples.append((time.perf_counter() - t0) / n)
        cuda.synchronize()
    results["replay_host_us_unchanged"] = statistics.median(samples) * 1e6

    # changed pointer: alternate two inputs (each replay re-points the one kernel node)
    y = cuda.to_device(np.ones(1024, np.float32))
    samples = []
    for _ in range(7):
        t0 = time.perf_counter()
        for k in range(n):
            g.replay(x if k % 2 else y)
        samples.append((time.perf_counter() - t0) / n)
        cuda.synchronize()
    results["replay_host_us_changed_pointer"] = statistics.median(samples) * 1e6
    results["changed_pointer_cost_us"] = (results["replay_host_us_changed_pointer"]
                                          - results["replay_host_us_unchanged"])

    # where the host time of a replay goes
    import cProfile
    import io
    import pstats
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(5000):
        g.replay(x)
    prof.disable()
    cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(12)
    print(buf.getvalue())
    exe = g.latest.executable
    stream = exe._default_stream
    t0 = time.perf_counter()
    for _ in range(n):
        exe.graph.launch(stream)
    results["bare_graph_launch_us"] = (time.perf_counter() - t0) / n * 1e6
    cuda.synchronize()
    from cuda.bindings import driver
    handle = exe.graph.handle
    shandle = stream.handle
    t0 = time.perf_counter()
    for _ in range(n):
        driver.cuGraphLaunch(handle, shandle)
    results["bindings_graph_launch_us"] = (time.perf_counter() - t0) / n * 1e6
    cuda.synchronize()
    call = g._calls._prepare((x,), {})
    t0 = time.perf_counter()
    for _ in range(n):
        g._calls._prepare((x,), {})
    results["prepare_us"] = (time.perf_counter() - t0) / n * 1e6
    t0 = time.perf_counter()
    for _ in range(n):
        exe.run(call.leaves, call.infos, None)
    results["executable_run_us"] = (time.perf_counter() - t0) / n * 1e6
    cuda.synchronize()

    # changed-pointer cost against fan-out: F kernels read the input that moves
    @cuda.jit
    def copy_scaled(src, dst, a):
        i = cuda.grid(1)
        if i < dst.size:
            dst[i] = src[i] * a

    for fan in (1, 4, 16, 64):
        def fanout(src, outs):
            for k in range(fan):
                copy_scaled[4, 256](src, outs[k], 1.0)
        fanout.__name__ = fanout.__qualname__ = f"fanout{fan}"
        ff = tg.compile(fanout)
        outs = cuda.device_array((fan, 1024), np.float32)
        ff(x, outs)
        ff(y, outs)
        cuda.synchronize()
        reps = 500
        t0 = time.perf_counter()
        for k in range(reps):
            ff.replay(x, outs)
        same = (time.perf_counter() - t0) / reps
        cuda.synchronize()
        t0 = time.perf_counter()
        for k in range(reps):
            ff.replay(x if k % 2 else y, outs)
        moved = (time.perf_counter() - t0) / reps
        cuda.synchronize()
        results[f"moved_pointer_cost_us_fanout{fan}"] = (moved - same) * 1e6

    # fork/join: 8 chains of 16 tiny kernels on 8 arrays, then a join; GPU time by events
    @cuda.jit
    def join8(a, b, c, d, e, f_, g_, h, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a[i] + b[i] + c[i] + d[i] + e[i] + f_[i] + g_[i] + h[i]

    def forkjoin(a, b, c, d, e, f_, g_, h, out):
        for arr in (a, b, c, d, e, f_, g_, h):
            for _ in range(16):
                axpb[4, 256](arr, 1.0001, 0.5)
        join8[4, 256](a, b, c, d, e, f_, g_, h, out)

    fj = tg.compile(forkjoin)
    fargs = [cuda.to_device(np.ones(1024, np.float32)) for _ in range(8)] + [
        cuda.device_array(1024, np.float32)]
    fj(*fargs)
    cuda.synchronize()
    start, stop = cuda.event(), cuda.event()
    reps = 200
    start.record()
    for _ in range(reps):
        fj.replay(*fargs)
    stop.record()
    stop.synchronize()
    results["forkjoin_gpu_us_per_replay"] = cuda.event_elapsed_time(start, stop) * 1e3 / reps
    t0 = time.perf_counter()
    for _ in range(reps):
        fj.replay(*fargs)
    results["forkjoin_host_us_per_replay"] = (time.perf_counter() - t0) / reps * 1e6
    cuda.synchronize()
    fexe = fj.latest.executable
    start.record()
    for _ in range(reps):
        driver.cuGraphLaunch(fexe.graph.handle, shandle)
    stop.record()
    stop.synchronize()
    results["forkjoin_gpu_us_bare_launch"] = cuda.event_elapsed_time(start, stop) * 1e3 / reps

    # build + instantiate for 1,000 nodes (Numba's JIT already done by the runs above)
    from tracegraph.lower import lower
    h = chain(1000)
    h.trace(x)  # a warm-up trace: first-use costs of this code path stay out
    t0 = time.perf_counter()
    prog = h.trace(x)
    t1 = time.perf_counter()
    plan = lower(prog)
    t2 = time.perf_counter()
    prof = cProfile.Profile()
    prof.enable()
    h(x)
    cuda.synchronize()
    prof.disable()
    t3 = time.perf_counter()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(15)
    print("first call of a 1,000-launch chain, by function:\n" + buf.getvalue())
    results["trace_passes_1000_ms"] = (t1 - t0) * 1e3
    results["lower_1000_ms"] = (t2 - t1) * 1e3
    results["first_call_1000_ms_profiled"] = (t3 - t2) * 1e3
    from tracegraph.backends import cuda as cb
    t0 = time.perf_counter()
    exe = cb.build(plan)
    results["build_instantiate_1000_ms"] = (time.perf_counter() - t0) * 1e3
    exe.close()

    width = max(map(len, results))
    for k, v in results.items():
        print(f"{k:{width}s} {v:10.3f}")
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
