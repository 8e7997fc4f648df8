"""W1: a chain of N tiny in-place kernels, x = x*a + b on 1024 float32.

Every kernel reads and writes the same array, so the chain is a true
dependency chain: no graph can run two of its kernels at once. Reported per
step (one full chain) and per node (step / N).
"""
import numpy as np
from numba import cuda

from benchmarks.common import Bench, Skip, compare, error_row, run_bench
from benchmarks.contenders import (
    capture_numba,
    cupy_graph,
    torch_graph,
    tracegraph_bench,
)

ID = "W1"
TITLE = "Chain of N tiny kernels (x = x*a + b, in place)"
PRIMARY = "step_us"
BASELINE = "numba_eager"
A = np.float32(0.999)
B = np.float32(0.001)


@cuda.jit
def axpb(x, a, b):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a + b


def _signature():
    from numba import types
    return (types.CPointer(types.float32), types.float32, types.float32)


SPECIALIZED_SIGNATURE = _signature()


def specialized(kernel, size):
    """`kernel` as a C++ graph launches its like: a wrapper kernel taking
    the array's pointer alone, whose shape is a constant of the wrapper, calling the user's
    kernel as a device function (one u64 and two f32 parameters, where Numba passes an
    array as meminfo, parent, nitems, itemsize, data, shape and strides)."""
    return cuda.jit(SPECIALIZED_SIGNATURE)(specialized_wrapper(kernel, size))


def specialized_wrapper(kernel, size):
    """The Python function of `specialized`'s wrapper (its PTX: compile_ptx, no GPU)."""
    from numba.cuda.np.numpy_support import carray
    device = cuda.jit(device=True)(kernel.py_func)

    def wrapper(p, a, b):
        device(carray(p, (size,)), a, b)
    return wrapper


def sizes(cfg):
    if cfg.smoke:
        return {"ns": [3], "size": 4, "block": 4}
    return {"ns": [10, 100, 1000], "size": 1024, "block": 256}


def make_chain(kernel, n, grid, block, stream=0):
    """The host function every Numba-based contender runs (and tracegraph traces)."""
    def chain(x):
        for _ in range(n):
            kernel[grid, block, stream](x, A, B)
    return chain


def x0(size):
    return np.linspace(0.0, 2.0, size, dtype=np.float32)


def reference(x, n):
    x = x.copy()
    for _ in range(n):
        x = x * A + B
    return x


def numba_check(env, x, size, n, run_once):
    def check():
        x.copy_to_device(x0(size))
        run_once()
        env.sync()
        return compare(x.copy_to_host(), reference(x0(size), n))
    return check


def builders(env, n, size, block):
    grid = (size + block - 1) // block
    chain = make_chain(axpb, n, grid, block)

    def numba_eager():
        x = cuda.to_device(x0(size))
        step = lambda: chain(x)
        return Bench(step, nodes=n, check=numba_check(env, x, size, n, step))

    def numba_capture():
        env.need_gpu("stream capture")
        x = cuda.to_device(x0(size))
        chain(x)
        env.sync()
        replay, how = capture_numba(env, lambda s: make_chain(axpb, n, grid, block, s)(x))
        return Bench(replay, nodes=n, check=numba_check(env, x, size, n, replay),
                     note=how, keep=replay)

    def numba_capture_specialized():
        env.need_gpu("stream capture")
        x = cuda.to_device(x0(size))
        k = specialized(axpb, size)
        p = int(x.__cuda_array_interface__["data"][0])  # (the pointer as a number: cuda.core takes no ctypes)

        def chain_of(s):
            for _ in range(n):
                k[grid, block, s](p, A, B)
        chain_of(0)
        env.sync()
        replay, how = capture_numba(env, chain_of)
        return Bench(replay, nodes=n, check=numba_check(env, x, size, n, replay),
                     note="shape-specialized wrapper of the same kernel; " + how,
                     keep=(replay, k))

    def tracegraph():
        x = cuda.to_device(x0(size))
        return tracegraph_bench(env, chain, (x,), nodes=n,
                                check=lambda f: numba_check(env, x, size, n, lambda: f.replay(x))())

    def torch_eager(graph=False):
        torch = env.torch
        if torch is None:
            raise Skip(env.notes.get("torch", "torch unavailable"))
        x = torch.from_numpy(x0(size)).cuda()
        bt = torch.tensor(float(B), device="cuda", dtype=torch.float32)
        a = float(A)
        note = "torch.add(b, x, alpha=a, out=x): 1 kernel per node"

        def step():
            for _ in range(n):
                torch.add(bt, x, alpha=a, out=x)
        try:
            step()
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001
            note = "x.mul_(a).add_(b): 2 kernels per node (torch.add(out=x) failed)"
            b_ = float(B)

            def step():
                for _ in range(n):
                    x.mul_(a).add_(b_)
        if graph:
            g = torch_graph(torch, step)
            return Bench(g.replay, nodes=n, note=note, keep=(g, x, bt))
        return Bench(step, nodes=n, note=note, keep=(x, bt))

    def cupy_eager(graph=False):
        cp = env.cupy
        if cp is None:
            raise Skip(env.notes.get("cupy", "cupy unavailable"))
        k = cp.ElementwiseKernel("float32 a, float32 b", "float32 x", "x = x * a + b", "w1_axpb")
        x = cp.asarray(x0(size))

        def step():
            for _ in range(n):
                k(A, B, x)
        note = "cupy.ElementwiseKernel x = x*a + b, in place"
        if graph:
            launch = cupy_graph(cp, step)
            return Bench(launch, nodes=n, note=note, keep=(launch, x))
        return Bench(step, nodes=n, note=note, keep=x)

    return [("numba_eager", numba_eager), ("numba_capture", numba_capture),
            ("numba_capture_specialized", numba_capture_specialized),
            ("tracegraph", tracegraph),
            ("torch_eager", torch_eager), ("torch_graph", lambda: torch_eager(True)),
            ("cupy_eager", cupy_eager), ("cupy_graph", lambda: cupy_eager(True))]


# Graph contenders also timed each in a process of its own, as the C++ graph is: inside
# this process every Python contender's graph ran 15-20% more GPU time per node than the
# same graph in a process of its own (docs/performance.md, "Why W1's per-node target
# reads missed"), so the per-node comparison with C++ is made between lone processes.
OWN_PROCESS = {"numba_capture": (), "numba_capture_specialized": (), "tracegraph": (),
               "cupy_graph": ("cupy",)}


def run(env, native=None):
    s = sizes(env.cfg)
    rows = []
    for n in s["ns"]:
        case = f"N={n}"
        for name, build in builders(env, n, s["size"], s["block"]):
            rows.append(run_bench(env, ID, case, name, build))
        if native is not None:
            rows.extend(native.w1_rows(env, ID, case, n))
    if env.gpu:
        for name in OWN_PROCESS:
            rows.extend(own_process_rows(env, name))
    return rows


def own_process_rows(env, name):
    """`name`'s rows for every N, timed in a fresh Python process that loads only what it
    needs; the contender is reported as `<name>_own_process`."""
    import json
    import subprocess
    import sys
    label = f"{name}_own_process"
    cmd = [sys.executable, "-m", "benchmarks.w1_chain", name, env.cfg.mode]
    try:
        done = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600,
                              cwd=_root())
        rows = json.loads(done.stdout.strip().splitlines()[-1])
    except Exception as e:  # noqa: BLE001
        detail = getattr(e, "stderr", "") or ""
        return [error_row(ID, f"N={n}", label, RuntimeError(f"{e} {detail[-1500:]}"))
                for n in sizes(env.cfg)["ns"]]
    for r in rows:
        r["contender"] = label
        r["note"] = (r.get("note") or "") + " (timed in a process of its own)"
    return rows


def _root():
    import os
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _own_process_main(name, mode):
    import json
    from benchmarks.common import Config, Env
    env = Env(Config.for_mode(mode), libraries=OWN_PROCESS[name])
    s = sizes(env.cfg)
    rows = []
    for n in s["ns"]:
        build = dict(builders(env, n, s["size"], s["block"]))[name]
        rows.append(run_bench(env, ID, f"N={n}", name, build))
    print(json.dumps(rows, default=str))


if __name__ == "__main__":
    import sys
    _own_process_main(sys.argv[1], sys.argv[2])
