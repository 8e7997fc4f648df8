"""W5: compile cost for 1,000 launches (the W1 chain, N = 1000).

tracegraph: ``f.trace(x)`` (record), ``f.lower(x)`` (trace + passes + lowering,
if lower re-traces), and the first call ``f(x)`` (everything + instantiate +
one launch), each on a fresh ``tg.compile`` object, after the kernel was
JIT-compiled by Numba once (so Numba's JIT is excluded); then the first call
with a brand-new Numba kernel object (Numba's JIT included). References: the
same 1,000 launches stream-captured and instantiated, eager, and the C++
graph's build + instantiate time.
"""
import time

from numba import cuda

from benchmarks.common import Skip, error_row, row, stats
from benchmarks.contenders import capture_numba, tg_compile
from benchmarks.w1_chain import axpb, make_chain, x0

ID = "W5"
TITLE = "Compile cost for 1,000 launches"
PRIMARY = "first_call_ms"
BASELINE = None


def sizes(cfg):
    if cfg.smoke:
        return {"n": 3, "size": 4, "block": 4}
    return {"n": 1000, "size": 1024, "block": 256}


def fresh_kernel():
    """A new Dispatcher for the same Python function: Numba compiles it again."""
    return cuda.jit(axpb.py_func)


def timed(fn, sync):
    t0 = time.perf_counter()
    out = fn()
    sync()
    return (time.perf_counter() - t0) * 1e3, out


def ms_stats(samples):
    return stats(samples)


def run(env, native=None):
    cfg = env.cfg
    s = sizes(cfg)
    n, size, block = s["n"], s["size"], s["block"]
    grid = (size + block - 1) // block
    case = f"{n} launches"
    rows = []
    # one-shot samples are noisier than the step loops': at least 9 outside the smoke run
    repeats = cfg.repeats if cfg.smoke else max(cfg.repeats, 9)
    x = cuda.to_device(x0(size))
    make_chain(axpb, 1, grid, block)(x)   # Numba JIT of the shared kernel, done once
    env.sync()
    sync = env.sync

    # ---- tracegraph
    try:
        if env.tg is None:
            raise Skip(f"import tracegraph failed: {env.tg_error}")
        m = {"trace_ms": [], "lower_ms": [], "first_call_ms": [], "first_call_with_jit_ms": []}
        # one untimed first call: the first in a process also pays its one-time setup
        # (imports, the device, the C extension), which --only W5 would otherwise time
        tg_compile(env, make_chain(axpb, n, grid, block))(x)
        sync()
        for _ in range(repeats):
            m["trace_ms"].append(timed(lambda: tg_compile(env, make_chain(axpb, n, grid, block)).trace(x), sync)[0])
            m["lower_ms"].append(timed(lambda: tg_compile(env, make_chain(axpb, n, grid, block)).lower(x), sync)[0])
            m["first_call_ms"].append(timed(lambda: tg_compile(env, make_chain(axpb, n, grid, block))(x), sync)[0])
            kern = fresh_kernel()
            m["first_call_with_jit_ms"].append(timed(lambda kern=kern: tg_compile(env, make_chain(kern, n, grid, block))(x), sync)[0])
        rows.append(row(ID, case, "tracegraph", metrics={k: ms_stats(v) for k, v in m.items()},
                        check="n/a", note="fresh tg.compile object per sample"))
    except Skip as e:
        rows.append(row(ID, case, "tracegraph", status="skipped", note=str(e)))
    except Exception as e:  # noqa: BLE001
        rows.append(error_row(ID, case, "tracegraph", e))

    # ---- Numba eager: first run of the 1,000 launches, and with a fresh JIT
    try:
        m = {"first_call_ms": [], "first_call_with_jit_ms": []}
        for _ in range(repeats):
            m["first_call_ms"].append(timed(lambda: make_chain(axpb, n, grid, block)(x), sync)[0])
            kern = fresh_kernel()
            m["first_call_with_jit_ms"].append(timed(lambda kern=kern: make_chain(kern, n, grid, block)(x), sync)[0])
        rows.append(row(ID, case, "numba_eager", metrics={k: ms_stats(v) for k, v in m.items()},
                        check="n/a", note="first_call = one eager run of the launches"))
    except Exception as e:  # noqa: BLE001
        rows.append(error_row(ID, case, "numba_eager", e))

    # ---- Numba launches stream-captured: capture + instantiate + first launch
    try:
        env.need_gpu("stream capture")
        m = {"first_call_ms": [], "first_call_with_jit_ms": []}
        how = ""
        capture_numba(env, lambda st: make_chain(axpb, n, grid, block, st)(x))[0]()  # untimed
        sync()
        for _ in range(repeats):
            def build(kern):
                nonlocal how
                replay, how = capture_numba(env, lambda st: make_chain(kern, n, grid, block, st)(x))
                replay()
                return replay
            m["first_call_ms"].append(timed(lambda: build(axpb), sync)[0])
            kern = fresh_kernel()
            # JIT happens in the eager warm-up launch: capture needs a loaded module
            m["first_call_with_jit_ms"].append(
                timed(lambda kern=kern: (make_chain(kern, 1, grid, block)(x), sync(), build(kern)), sync)[0])
        rows.append(row(ID, case, "numba_capture", metrics={k: ms_stats(v) for k, v in m.items()},
                        check="n/a", note="capture + instantiate + first launch; " + how))
    except Skip as e:
        rows.append(row(ID, case, "numba_capture", status="skipped", note=str(e)))
    except Exception as e:  # noqa: BLE001
        rows.append(error_row(ID, case, "numba_capture", e))

    # ---- C++: explicit graph build + instantiate (from the native run)
    if native is not None:
        if native.data is None:
            rows.extend(native._skip(ID, case, ["cpp_graph"]))
        else:
            hit = [d for d in native.data["w1"] if d["n"] == n]
            if hit:
                d = hit[0]
                one = lambda v: {"median": v / 1e3, "p10": v / 1e3, "p90": v / 1e3, "n": 1}
                rows.append(row(ID, case, "cpp_graph", check="n/a",
                                metrics={"build_ms": one(d["build_us"]),
                                         "instantiate_ms": one(d["instantiate_us"])},
                                note="cudaGraphAddKernelNode x N + cudaGraphInstantiate, one sample"))
    return rows
