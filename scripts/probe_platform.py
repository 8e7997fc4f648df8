"""One-shot platform probe for this round's graph features, on one GPU (an H200).

What it answers, each checked against a computed result, not just "no exception":
conditional nodes (while / if / if-else / switch / nested / fork-join in a body) with a
cuda.core NVRTC helper or a Numba kernel setting the condition; which nodes a conditional
body refuses and with what error text; cooperative (grid-sync) kernel nodes set through the
driver, re-pointed, embedded and updated; whole-graph update and upload costs; torch / CuPy
captures embedded as child graphs; a CuPy RawKernel as a node; NCCL (one rank) captured and
embedded; kernel-node priority and L2 access-policy attributes; host cost of one graph
launch through cuda.core, cuda.bindings, ctypes and CuPy; whether nvmath-python imports.

Run once: python3 scripts/probe_platform.py out.json   (PROBE_ONLY=a,b runs a subset)
Prints one JSON line per probe ({"probe", "ok", "detail", "numbers"}) and rewrites argv[1]
with all results after every probe. Each probe is isolated (try/except plus a SIGALRM soft
limit); a watchdog exits if the whole run passes HARD_LIMIT_S; GPU work that could hang is
waited for with a deadline, and after a hang the remaining GPU probes are skipped; riskier
probes run last. Self-contained: it does not import tracegraph.
"""
import numpy as np  # first: the run pins NumPy (<2.5) before anything imports numba

import ctypes
import json
import os
import signal
import statistics
import sys
import threading
import time
import traceback
import warnings

import numba
from numba import cuda, types

HARD_LIMIT_S = 87.0          # the whole run (the brief: under 90 s)
WAIT_S = 8.0                 # deadline for GPU work that could hang
T0 = time.monotonic()
RESULTS: list = []
STATE = {"probe": None, "gpu_hung": False}
WRITE_LOCK = threading.Lock()
OUT_PATH = sys.argv[1] if len(sys.argv) > 1 else "probe_platform.json"

warnings.filterwarnings("ignore", message=".*Grid size .* will likely result in GPU")
I32 = types.Array(types.int32, 1, "C")
F32 = types.Array(types.float32, 1, "C")
MAX_ITERS = 64               # guard in every while-loop setter: no probe can loop forever

# ---------------------------------------------------------------------------
# kernels (Numba; flattened parameters are built by nb_args below)


@cuda.jit
def k_tick(counter, flag):
    if cuda.grid(1) == 0:
        counter[0] += 1
        flag[0] -= 1


@cuda.jit
def k_add(x, v):
    if cuda.grid(1) == 0:
        x[0] += v


@cuda.jit
def k_set(x, i, v):
    if cuda.grid(1) == 0:
        x[i] = v


@cuda.jit
def k_axpb(x, a, b):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a + b


@cuda.jit
def k_axpb_other(x, a, b):  # same signature, another function (Graph.update across kernels)
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a + b + b


@cuda.jit
def k_scale(src, dst, s):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i] * s


@cuda.jit
def k_coop(a, b):
    """Two phases across the whole grid: right only if grid.sync() really syncs."""
    g = cuda.cg.this_grid()
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    n = a.size
    for j in range(start, n, step):
        a[j] = j
    g.sync()
    for j in range(start, n, step):
        b[j] = a[n - 1 - j]


# Numba calling the device runtime's setter directly (C ABI) ...
set_conditional_direct = cuda.declare_device(
    "cudaGraphSetConditional", "void(uint64, uint32)", abi="c")
# ... or through a one-line CUDA C++ wrapper that Numba compiles (NVRTC) and links
WRAPPER_SRC = r"""
extern "C" __device__ __cudart_builtin__ void CUDARTAPI
cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);
extern "C" __device__ int tg_set_conditional(unsigned long long handle, unsigned int value) {
    cudaGraphSetConditional((cudaGraphConditionalHandle)handle, value);
    return 0;
}
"""
set_conditional_wrapped = cuda.declare_device(
    "tg_set_conditional", "int32(uint64, uint32)",
    link=cuda.CUSource(WRAPPER_SRC, name="tg_set_conditional.cu"), abi="c")


@cuda.jit
def k_numba_set_while_direct(h, flag, counter, max_iters):
    if cuda.grid(1) == 0:
        v = 1 if (flag[0] != 0 and counter[0] < max_iters) else 0
        set_conditional_direct(h, numba.uint32(v))


@cuda.jit
def k_numba_set_while_wrapped(h, flag, counter, max_iters):
    if cuda.grid(1) == 0:
        v = 1 if (flag[0] != 0 and counter[0] < max_iters) else 0
        set_conditional_wrapped(h, numba.uint32(v))


# NVRTC helpers (cuda.core Program): the form DESIGN.md records as working
COND_SRC = r"""
extern "C" __device__ __cudart_builtin__ void CUDARTAPI
cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);

extern "C" __global__ void set_while(cudaGraphConditionalHandle h, const int* flag,
                                     const int* counter, int max_iters) {
    cudaGraphSetConditional(h, (flag[0] != 0 && counter[0] < max_iters) ? 1u : 0u);
}
extern "C" __global__ void set_value(cudaGraphConditionalHandle h, const int* value) {
    cudaGraphSetConditional(h, (unsigned int)value[0]);
}
extern "C" __global__ void set_parity(cudaGraphConditionalHandle h, const int* counter) {
    cudaGraphSetConditional(h, (unsigned int)(counter[0] & 1));
}
"""

RAW_SRC = r"""
extern "C" __global__ void tg_add1(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
"""

# ---------------------------------------------------------------------------
# small helpers


class ProbeTimeout(BaseException):  # BaseException: no "except Exception" may swallow it
    pass


class GPUHang(BaseException):
    pass


COND_ARG = {"mode": "object"}  # how a GraphCondition goes to launch(): the object, or its int


def carg(cond):
    return cond if COND_ARG["mode"] == "object" else int(cond.handle)


class Ctx:
    """The device, one stream, and compiled kernels (cached)."""

    def __init__(self):
        from cuda.core import Device
        self.dev = Device(0)
        self.dev.set_current()
        cuda.current_context()  # Numba on the same (primary) context
        self.stream = self.dev.create_stream()
        self._kernels: dict = {}
        self._nvrtc = None

    def nb(self, dispatcher, *argtypes):
        """cuda.core Kernel of a Numba overload, as tracegraph's _numba/layout.py gets it."""
        key = (dispatcher, argtypes)
        if key not in self._kernels:
            overload = dispatcher.compile(tuple(argtypes))
            self._kernels[key] = (overload._codelibrary.get_cufunc().kernel, overload)
        return self._kernels[key][0]

    def overload(self, dispatcher, *argtypes):
        self.nb(dispatcher, *argtypes)
        return self._kernels[(dispatcher, argtypes)][1]

    def nvrtc(self, name):
        if self._nvrtc is None:
            from cuda.core import Program, ProgramOptions
            arch = f"sm_{self.dev.arch}"
            prog = Program(COND_SRC, code_type="c++",
                           options=ProgramOptions(std="c++17", arch=arch))
            self._nvrtc = prog.compile("cubin")
        return self._nvrtc.get_kernel(name)


def ptr(a) -> int:
    return int(a.__cuda_array_interface__["data"][0])


def nb_args(a) -> list:
    """Numba's flattened parameters of a contiguous array seen as 1-D: meminfo, parent,
    nitems, itemsize, data, shape, strides (works for Numba, CuPy and torch arrays)."""
    cai = a.__cuda_array_interface__
    n = int(np.prod(cai["shape"])) if cai["shape"] else 1
    itemsize = np.dtype(cai["typestr"]).itemsize
    return [0, 0, n, itemsize, int(cai["data"][0]), n, itemsize]


def i32(v):
    return ctypes.c_int32(v)


def f32(v):
    return ctypes.c_float(v)


def cfg(grid=1, block=1):
    from cuda.core import LaunchConfig
    return LaunchConfig(grid=grid, block=block)


def wait(stream, timeout=WAIT_S):
    """Synchronize with a deadline (GPU work that may never finish must not stall the run)."""
    ev = stream.record()
    end = time.monotonic() + timeout
    while not ev.is_done:
        if time.monotonic() > end:
            STATE["gpu_hung"] = True
            raise GPUHang(f"GPU work did not finish within {timeout} s")
        time.sleep(0.0002)


def reset(arr, values):
    """Host -> device, then a context sync (our stream does not order with Numba's)."""
    arr.copy_to_device(np.asarray(values, dtype=arr.dtype))
    cuda.synchronize()


def median_us(fn, reps, stream=None):
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        fn()
        if stream is not None:
            stream.sync()
        samples.append((time.perf_counter_ns() - t0) / 1e3)
    return statistics.median(samples)


def err_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:600]


def attempt(detail: dict, key: str, fn):
    """Run one sub-step; record its value or its error under detail[key]."""
    try:
        value = fn()
        detail[key] = value if value is not None else "ok"
        return True, value
    except (ProbeTimeout, GPUHang):
        raise
    except Exception as exc:  # noqa: BLE001 - a probe reports every failure
        detail[key] = {"error": err_text(exc)}
        return False, None


def drv_check(result, call: str):
    """cuda.bindings returns (CUresult, *values): raise on an error, else the values."""
    from cuda.bindings import driver
    err = result[0]
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{call} -> {err.name}")
    return result[1:] if len(result) > 2 else (result[1] if len(result) == 2 else None)


class DirectParams:
    """A kernel node's parameters in ctypes storage we own (as tracegraph's KernelPatch):
    re-pointing writes a slot and calls cuGraphExecKernelNodeSetParams."""

    def __init__(self, node_handle, args):
        from cuda.bindings import driver
        params = drv_check(driver.cuGraphKernelNodeGetParams(node_handle),
                           "cuGraphKernelNodeGetParams")
        self.values = [ctypes.c_int64(a) if isinstance(a, int) else type(a)(a.value)
                       for a in args]
        self.pointers = (ctypes.c_void_p * len(args))(
            *[ctypes.addressof(v) for v in self.values])
        params.kernelParams = ctypes.addressof(self.pointers)
        params.extra = 0
        self.params = params

    def apply(self, exec_handle, node_handle, updates: dict):
        from cuda.bindings import driver
        for pos, value in updates.items():
            self.values[pos].value = value
        drv_check(driver.cuGraphExecKernelNodeSetParams(exec_handle, node_handle, self.params),
                  "cuGraphExecKernelNodeSetParams")


def set_cooperative(node_handle):
    from cuda.bindings import driver
    v = driver.CUkernelNodeAttrValue()
    v.cooperative = 1
    drv_check(driver.cuGraphKernelNodeSetAttribute(
        node_handle, driver.CUkernelNodeAttrID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE, v),
        "cuGraphKernelNodeSetAttribute(COOPERATIVE)")


def get_cooperative(node_handle):
    from cuda.bindings import driver
    v = drv_check(driver.cuGraphKernelNodeGetAttribute(
        node_handle, driver.CUkernelNodeAttrID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE),
        "cuGraphKernelNodeGetAttribute(COOPERATIVE)")
    return int(v.cooperative)


UPDATE_VIA = {"how": "cuda.core Graph.update"}


def update_graph(graph, gdef):
    """cuda.core Graph.update(GraphDefinition); cuGraphExecUpdate if this cuda.core lacks it."""
    if UPDATE_VIA["how"] == "cuda.core Graph.update":
        try:
            return graph.update(gdef)
        except (TypeError, AttributeError, NotImplementedError) as exc:
            UPDATE_VIA["how"] = "cuda.bindings cuGraphExecUpdate"
            UPDATE_VIA["why"] = err_text(exc)
    from cuda.bindings import driver
    err, info = driver.cuGraphExecUpdate(graph.handle, gdef.handle)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuGraphExecUpdate -> {err.name} ({info.result.name})")


def chain_def(ctx, kernel_fn, n, x, a, b):
    """A chain of n Numba kernel nodes x = x*a + b."""
    from cuda.core.graph import GraphDefinition
    k = ctx.nb(kernel_fn, F32, types.float32, types.float32)
    g = GraphDefinition()
    c = cfg(4, 256)
    args = nb_args(x) + [f32(a), f32(b)]
    node = g.launch(c, k, *args)
    for _ in range(n - 1):
        node = node.launch(c, k, *args)
    return g

# ---------------------------------------------------------------------------
# probes: each returns (ok, detail, numbers)


def probe_env(ctx):
    import cuda.core
    from cuda.bindings import driver
    detail = {"python": sys.version.split()[0], "numpy": np.__version__,
              "numba": numba.__version__, "cuda.core": cuda.core.__version__,
              "device": ctx.dev.name, "arch": ctx.dev.arch,
              "sm_count": ctx.dev.properties.multiprocessor_count}
    for mod in ("numba_cuda", "cuda.bindings"):
        try:
            m = __import__(mod, fromlist=["__version__"])
            detail[mod] = getattr(m, "__version__", "?")
        except Exception as exc:  # noqa: BLE001
            detail[mod] = err_text(exc)
    detail["driver_version"] = drv_check(driver.cuDriverGetVersion(), "cuDriverGetVersion")
    return True, detail, {}


def _while_graph(ctx, variant, counter, flag):
    """A while loop whose body is the Numba tick kernel plus a condition setter.
    variant: nvrtc_default1 (do-while: default 1, setter at the end of the body),
    nvrtc_prehelper (no default; the setter also runs once before the loop),
    numba_direct / numba_wrapped (a Numba setter, before the loop and in the body, on a
    condition whose default is 0: a setter that silently does nothing leaves the loop
    unentered instead of spinning forever)."""
    from cuda.core.graph import GraphDefinition
    g = GraphDefinition()
    default = {"nvrtc_default1": 1, "nvrtc_prehelper": None}.get(variant, 0)
    cond = g.create_condition(default_value=default)
    tick = ctx.nb(k_tick, I32, I32)
    setter, set_args = _while_setter(ctx, variant, cond, flag, counter)
    parent = g
    if variant != "nvrtc_default1":
        parent = g.launch(cfg(), setter, *set_args)
    loop = parent.while_loop(cond)
    loop.body.launch(cfg(), tick, *(nb_args(counter) + nb_args(flag))).launch(
        cfg(), setter, *set_args)
    return g, g.instantiate()


def _while_setter(ctx, variant, cond, flag, counter):
    """The kernel setting cond = (flag != 0 && counter < MAX_ITERS), and its arguments."""
    if variant.startswith("numba"):
        fn = k_numba_set_while_direct if variant == "numba_direct" else k_numba_set_while_wrapped
        setter = ctx.nb(fn, types.uint64, I32, I32, types.int32)
        return setter, [carg(cond)] + nb_args(flag) + nb_args(counter) + [i32(MAX_ITERS)]
    return ctx.nvrtc("set_while"), [carg(cond), ptr(flag), ptr(counter), i32(MAX_ITERS)]


def _setter_gate(ctx, variant):
    """The setter of `variant` under an if_then (which cannot spin): does it set the condition
    to (flag != 0 && counter < MAX_ITERS)? Only then may it drive a while loop."""
    from cuda.core.graph import GraphDefinition
    flag, counter, out = (cuda.to_device(np.zeros(1, np.int32)) for _ in range(3))
    g = GraphDefinition()
    cond = g.create_condition(default_value=0)
    setter, set_args = _while_setter(ctx, variant, cond, flag, counter)
    node = g.launch(cfg(), setter, *set_args).if_then(cond)
    node.then.launch(cfg(), ctx.nb(k_set, I32, types.int32, types.int32),
                     *(nb_args(out) + [i32(0), i32(100)]))
    graph = g.instantiate()
    cases = {(0, 0): -1, (1, 0): 100, (1, MAX_ITERS): -1, (3, 5): 100}
    got = {}
    for (f0, c0) in cases:
        reset(flag, [f0])
        reset(counter, [c0])
        reset(out, [-1])
        graph.launch(ctx.stream)
        wait(ctx.stream)
        got[f"flag={f0},counter={c0}"] = int(out.copy_to_host()[0])
    graph.close()
    expected = {f"flag={f0},counter={c0}": v for (f0, c0), v in cases.items()}
    return got == expected, {"got": got, "expected": expected}


GATES: dict = {}  # setter kind -> (passed, detail), so every while loop runs only after one


def setter_gate(ctx, variant):
    """_setter_gate once per setter kind ("nvrtc", "numba_direct", "numba_wrapped"); on a
    TypeError from launch(), retry with the condition's int handle instead of the object."""
    kind = "nvrtc" if variant.startswith("nvrtc") else variant
    if kind not in GATES:
        try:
            GATES[kind] = _setter_gate(ctx, variant)
        except TypeError as exc:  # launch() refused the GraphCondition object itself
            if COND_ARG["mode"] != "object":
                raise
            COND_ARG["mode"] = "int"
            COND_ARG["why"] = err_text(exc)
            GATES[kind] = _setter_gate(ctx, variant)
    if not GATES[kind][0]:
        raise RuntimeError(f"the {kind} setter failed its if_then test, so no while loop was "
                           "run with it (it might never end)")
    return GATES[kind][1]


def probe_while_cond(ctx):
    counter = cuda.to_device(np.zeros(1, np.int32))
    flag = cuda.to_device(np.zeros(1, np.int32))
    detail, numbers, ok = {}, {}, True
    starts = (3, 1, 0, 5)
    for variant in ("nvrtc_default1", "nvrtc_prehelper", "numba_direct", "numba_wrapped"):
        def run(variant=variant):
            kind = "nvrtc" if variant.startswith("nvrtc") else variant
            try:
                setter_gate(ctx, variant)
            finally:
                if kind in GATES:
                    detail[f"{kind}_setter_if_gate"] = GATES[kind][1]
            g, graph = _while_graph(ctx, variant, counter, flag)
            got = {}
            for f0 in starts:  # replays of one executable with different flag start values
                reset(counter, [0])
                reset(flag, [f0])
                graph.launch(ctx.stream)
                wait(ctx.stream)
                got[f0] = int(counter.copy_to_host()[0])
            graph.close()
            return got
        good, got = attempt(detail, variant, run)
        if not good:
            ok = ok and variant.startswith("numba")  # the Numba setters are extra questions
            continue
        if variant == "nvrtc_default1":  # do-while: the body runs before the first check
            expected = {f0: (f0 if f0 >= 1 else MAX_ITERS) for f0 in starts}
        else:
            expected = {f0: f0 for f0 in starts}
        passed = got == expected
        detail[variant] = {"counter_by_flag_start": got, "expected": expected, "ok": passed}
        numbers[f"{variant}_ok"] = passed
        if not variant.startswith("numba"):
            ok = ok and passed
    detail["cond_arg"] = dict(COND_ARG)
    detail["reading"] = ("nvrtc_default1 = create_condition(default_value=1), setter only at "
                         "the end of the body: a do-while (flag 0 runs the body until the "
                         f"MAX_ITERS={MAX_ITERS} guard); nvrtc_prehelper = no default, the "
                         "setter also before the loop: a while; numba_* = the setter is a Numba "
                         "kernel (direct extern, or a linked .cu wrapper); the tick kernel in "
                         "every body is a Numba kernel")
    numbers["numba_kernel_in_body"] = bool(detail.get("nvrtc_default1", {}).get("ok"))
    return ok, detail, numbers


def _select_graph(ctx, kind, sel, out):
    """set_value(sel) -> if_then / if_else / switch(3); body i writes out[0] = marker."""
    from cuda.core.graph import GraphDefinition
    g = GraphDefinition()
    cond = g.create_condition()
    kset = ctx.nb(k_set, I32, types.int32, types.int32)
    pre = g.launch(cfg(), ctx.nvrtc("set_value"), carg(cond), ptr(sel))
    if kind == "if_then":
        node = pre.if_then(cond)
        bodies = [node.then]
    elif kind == "if_else":
        node = pre.if_else(cond)
        bodies = [node.then, node.else_]
    else:
        node = pre.switch(cond, 3)
        bodies = list(node.branches)
    for i, body in enumerate(bodies):
        body.launch(cfg(), kset, *(nb_args(out) + [i32(0), i32(100 + i)]))
    return g, g.instantiate(), type(node).__name__, len(bodies)


def _run_select(ctx, kind, cases):
    sel = cuda.to_device(np.zeros(1, np.int32))
    out = cuda.to_device(np.full(1, -1, np.int32))
    g, graph, node_type, n_bodies = _select_graph(ctx, kind, sel, out)
    got = {}
    for s in cases:
        reset(sel, [s])
        reset(out, [-1])
        graph.launch(ctx.stream)
        wait(ctx.stream)
        got[s] = int(out.copy_to_host()[0])
    graph.close()
    return {"node_type": node_type, "bodies": n_bodies, "out_by_value": got}


def probe_if_else_cond(ctx):
    detail, numbers = {}, {}
    # out: -1 = no body ran, 100 = then (body 0), 101 = else (body 1)
    expect = {"if_then": {0: -1, 1: 100, 7: 100}, "if_else": {0: 101, 1: 100, 7: 100}}
    ok = True
    for kind, exp in expect.items():
        good, res = attempt(detail, kind, lambda kind=kind, exp=exp: _run_select(ctx, kind, exp))
        passed = good and res["out_by_value"] == exp
        if good:
            detail[kind]["expected"] = exp
        numbers[f"{kind}_ok"] = passed
        ok = ok and passed
    return ok, detail, numbers


def probe_switch_cond(ctx):
    detail = {}
    exp = {0: 100, 1: 101, 2: 102, 3: -1, 9: -1}  # out of range: no body runs
    good, res = attempt(detail, "switch3", lambda: _run_select(ctx, "switch", exp))
    passed = good and res["out_by_value"] == exp
    if good:
        detail["switch3"]["expected"] = exp
    return passed, detail, {"switch_ok": passed}


def _nested_if_in_while(ctx, starts):
    """while(flag) { tick; set_parity(inner); if(inner) { odd += 1 }; set_while }"""
    from cuda.core.graph import GraphDefinition
    counter, flag, odd = (cuda.to_device(np.zeros(1, np.int32)) for _ in range(3))
    g = GraphDefinition()
    wcond = g.create_condition(default_value=1)
    icond = g.create_condition()  # made on the root graph, used inside the body
    body = g.while_loop(wcond).body
    t = body.launch(cfg(), ctx.nb(k_tick, I32, I32), *(nb_args(counter) + nb_args(flag)))
    inner = t.launch(cfg(), ctx.nvrtc("set_parity"), carg(icond), ptr(counter)).if_then(icond)
    inner.then.launch(cfg(), ctx.nb(k_add, I32, types.int32), *(nb_args(odd) + [i32(1)]))
    inner.launch(cfg(), ctx.nvrtc("set_while"), carg(wcond), ptr(flag), ptr(counter),
                 i32(MAX_ITERS))
    graph = g.instantiate()
    got = {}
    for f0 in starts:
        for a, v in ((counter, 0), (flag, f0), (odd, 0)):
            reset(a, [v])
        graph.launch(ctx.stream)
        wait(ctx.stream)
        got[f0] = [int(counter.copy_to_host()[0]), int(odd.copy_to_host()[0])]
    graph.close()
    return got


def _fork_join_in_while(ctx, starts):
    """while(flag) { tick -> (a += 1 || b += 2) -> set_while }: a fork/join inside a body."""
    from cuda.core.graph import GraphDefinition
    counter, flag, a, b = (cuda.to_device(np.zeros(1, np.int32)) for _ in range(4))
    g = GraphDefinition()
    cond = g.create_condition(default_value=1)
    body = g.while_loop(cond).body
    kadd = ctx.nb(k_add, I32, types.int32)
    t = body.launch(cfg(), ctx.nb(k_tick, I32, I32), *(nb_args(counter) + nb_args(flag)))
    pa = t.launch(cfg(), kadd, *(nb_args(a) + [i32(1)]))
    pb = t.launch(cfg(), kadd, *(nb_args(b) + [i32(2)]))
    s = pa.launch(cfg(), ctx.nvrtc("set_while"), carg(cond), ptr(flag), ptr(counter),
                  i32(MAX_ITERS))
    s.pred.add(pb)
    graph = g.instantiate()
    got = {}
    for f0 in starts:
        for arr, v in ((counter, 0), (flag, f0), (a, 0), (b, 0)):
            reset(arr, [v])
        graph.launch(ctx.stream)
        wait(ctx.stream)
        got[f0] = [int(x.copy_to_host()[0]) for x in (counter, a, b)]
    graph.close()
    return {"body_nodes": len(body.nodes()), "body_edges": len(body.edges()), "got": got}


def probe_nested_cond(ctx):
    detail, numbers = {}, {}
    setter_gate(ctx, "nvrtc")  # its loops use the NVRTC setter
    starts = (4, 3, 1)
    good1, got = attempt(detail, "if_in_while", lambda: _nested_if_in_while(ctx, starts))
    exp1 = {f0: [f0, (f0 + 1) // 2] for f0 in starts}  # [iterations, odd iterations]
    ok1 = good1 and got == exp1
    if good1:
        detail["if_in_while"] = {"got_[iterations,odd]": got, "expected": exp1}
    good2, res = attempt(detail, "fork_join_in_while", lambda: _fork_join_in_while(ctx, starts))
    exp2 = {f0: [f0, f0, 2 * f0] for f0 in starts}
    ok2 = good2 and res["got"] == exp2
    if good2:
        detail["fork_join_in_while"]["expected_[iterations,a,b]"] = exp2
    numbers.update(if_in_while_ok=ok1, fork_join_in_while_ok=ok2)
    return ok1 and ok2, detail, numbers


def _body_case(ctx, name, add_node):
    """if_then(default 1) { candidate; hits += 1 }: at which stage does the candidate fail?"""
    from cuda.core.graph import GraphDefinition
    hits = cuda.to_device(np.zeros(1, np.int32))
    g = GraphDefinition()
    cond = g.create_condition(default_value=1)
    body = g.if_then(cond).then
    stage = "add"
    try:
        node, check = add_node(body)
        after = node if node is not None else body
        after.launch(cfg(), ctx.nb(k_add, I32, types.int32), *(nb_args(hits) + [i32(1)]))
        stage = "instantiate"
        graph = g.instantiate()
        stage = "launch"
        graph.launch(ctx.stream)
        wait(ctx.stream)
        stage = "result"
        body_ran = int(hits.copy_to_host()[0]) == 1
        extra = check() if check else True
        graph.close()
        return {"accepted": True, "body_ran": body_ran, "node_effect_ok": extra}
    except (ProbeTimeout, GPUHang):
        raise
    except Exception as exc:  # noqa: BLE001
        return {"accepted": False, "refused_at": stage, "error": err_text(exc)}


def probe_cond_body_refusals(ctx):
    src = cuda.to_device(np.full(1, 42, np.int32))
    dst = cuda.to_device(np.zeros(1, np.int32))
    pinned = cuda.pinned_array(1, np.int32)
    pinned[0] = 7
    ran = []
    ev = ctx.dev.create_event()

    def memcpy_d2d(body):
        reset(dst, [0])
        return body.memcpy(ptr(dst), ptr(src), 4), lambda: int(dst.copy_to_host()[0]) == 42

    def memcpy_h2d(body):
        reset(dst, [0])
        return (body.memcpy(ptr(dst), pinned.ctypes.data, 4),
                lambda: int(dst.copy_to_host()[0]) == 7)

    def child(body):
        from cuda.core.graph import GraphDefinition
        c = GraphDefinition()
        reset(dst, [0])
        c.launch(cfg(), ctx.nb(k_set, I32, types.int32, types.int32),
                 *(nb_args(dst) + [i32(0), i32(5)]))
        return body.embed(c), lambda: int(dst.copy_to_host()[0]) == 5

    def coop(body):
        a = cuda.to_device(np.full(256, -1, np.int32))
        b = cuda.to_device(np.zeros(256, np.int32))
        n = body.launch(cfg(1, 256), ctx.nb(k_coop, I32, I32), *(nb_args(a) + nb_args(b)))
        set_cooperative(n.handle)
        return n, lambda: bool((b.copy_to_host() == np.arange(255, -1, -1)).all())

    cases = {
        "host_callback": lambda body: (body.callback(lambda: ran.append(1)), lambda: bool(ran)),
        "event_record": lambda body: (body.record(ev), None),
        "event_wait": lambda body: (body.wait(ev), None),
        "memcpy_d2d": memcpy_d2d,
        "memcpy_h2d_pinned": memcpy_h2d,
        "memset": lambda body: (body.memset(ptr(dst), 0, 4), None),
        "allocation": lambda body: (body.allocate(256), None),
        "child_graph": child,
        "cooperative_kernel": coop,  # last: the one case that could misbehave on the GPU
    }
    detail = {name: _body_case(ctx, name, fn) for name, fn in cases.items()}
    numbers = {name: r["accepted"] for name, r in detail.items()}
    # ok: every case gave a definite answer, and what was accepted did its work
    ok = all((not r["accepted"]) or (r["body_ran"] and r["node_effect_ok"])
             for r in detail.values())
    return ok, detail, numbers


def _coop_arrays(n):
    return cuda.to_device(np.full(n, -1, np.int32)), cuda.to_device(np.zeros(n, np.int32))


def _coop_ok(a, b, n):
    return bool((a.copy_to_host() == np.arange(n)).all()
                and (b.copy_to_host() == np.arange(n - 1, -1, -1)).all())


def probe_cooperative_node(ctx):
    from cuda.core.graph import GraphDefinition
    detail, numbers = {}, {}
    kernel = ctx.nb(k_coop, I32, I32)
    overload = ctx.overload(k_coop, I32, I32)
    block = 256
    blocks = int(overload.max_cooperative_grid_blocks(block))
    n = blocks * block * 2
    numbers.update(grid_blocks=blocks, block=block, n=n,
                   numba_says_cooperative=bool(getattr(overload, "cooperative", False)))
    c = cfg(blocks, block)
    a, b = _coop_arrays(n)
    g = GraphDefinition()
    args = nb_args(a) + nb_args(b)
    node = g.launch(c, kernel, *args)  # plain LaunchConfig: cuda.core refuses is_cooperative
    set_cooperative(node.handle)
    numbers["attr_readback"] = get_cooperative(node.handle)
    graph = g.instantiate()
    graph.launch(ctx.stream)
    wait(ctx.stream)
    checks = {"first_launch": _coop_ok(a, b, n)}

    def repoint():  # the data pointers of a and b sit at flattened positions 4 and 11
        a2, b2 = _coop_arrays(n)
        patch = DirectParams(node.handle, args)
        results = []
        for aa, bb in ((a2, b2), (a, b), (a2, b2)):
            reset(aa, np.full(n, -1, np.int32))
            reset(bb, np.zeros(n, np.int32))
            patch.apply(graph.handle, node.handle, {4: ptr(aa), 11: ptr(bb)})
            graph.launch(ctx.stream)
            wait(ctx.stream)
            results.append(_coop_ok(aa, bb, n))
        return results
    good, res = attempt(detail, "repoint_via_cuGraphExecKernelNodeSetParams", repoint)
    checks["repointed_3x"] = good and all(res)

    def in_child():
        a3, b3 = _coop_arrays(n)
        child = GraphDefinition()
        set_cooperative(child.launch(c, kernel, *(nb_args(a3) + nb_args(b3))).handle)
        parent = GraphDefinition()
        parent.embed(child)
        gp = parent.instantiate()
        gp.launch(ctx.stream)
        wait(ctx.stream)
        gp.close()
        return _coop_ok(a3, b3, n)
    good, res = attempt(detail, "inside_child_graph", in_child)
    checks["inside_child_graph"] = good and res

    def after_update():
        a4, b4 = _coop_arrays(n)
        g2 = GraphDefinition()
        set_cooperative(g2.launch(c, kernel, *(nb_args(a4) + nb_args(b4))).handle)
        update_graph(graph, g2)
        graph.launch(ctx.stream)
        wait(ctx.stream)
        out = {"result_ok": _coop_ok(a4, b4, n)}
        g3 = GraphDefinition()  # same topology, no cooperative attribute: does update accept?
        g3.launch(c, kernel, *(nb_args(a4) + nb_args(b4)))
        try:
            update_graph(graph, g3)
            out["update_without_attr"] = "accepted (not launched)"
            update_graph(graph, g2)  # back to the cooperative one before anything runs
        except Exception as exc:  # noqa: BLE001
            out["update_without_attr"] = err_text(exc)
        return out
    good, res = attempt(detail, "after_graph_update", after_update)
    checks["after_graph_update"] = good and res["result_ok"]
    graph.close()
    detail["checks"] = checks
    numbers.update(checks)
    return all(checks.values()), detail, numbers


def probe_graph_update(ctx):
    detail, numbers = {}, {}
    x1 = cuda.to_device(np.zeros(1024, np.float32))
    x2 = cuda.to_device(np.zeros(1024, np.float32))
    n = 10
    d1, d2 = chain_def(ctx, k_axpb, n, x1, 1.0, 1.0), chain_def(ctx, k_axpb, n, x2, 1.0, 2.0)
    graph = d1.instantiate()
    update_graph(graph, d2)
    graph.launch(ctx.stream)
    wait(ctx.stream)
    r1, r2 = x1.copy_to_host(), x2.copy_to_host()
    correct = bool((r2 == 2.0 * n).all() and (r1 == 0).all())
    detail["update_result"] = {"x2_first": float(r2[0]), "x1_first": float(r1[0]),
                               "expected_x2": 2.0 * n}

    def other_function():  # same topology, another kernel in every node
        reset(x2, np.zeros(1024, np.float32))
        update_graph(graph, chain_def(ctx, k_axpb_other, n, x2, 1.0, 1.0))
        graph.launch(ctx.stream)
        wait(ctx.stream)
        return {"x2_first": float(x2.copy_to_host()[0]), "expected": 2.0 * n}
    attempt(detail, "update_to_other_kernel", other_function)

    def topo_errors():
        out = {}
        for label, d in (("one_more_node", chain_def(ctx, k_axpb, n + 1, x2, 1.0, 1.0)),
                         ("fan_not_chain", _fan_def(ctx, n, x2))):
            try:
                update_graph(graph, d)
                out[label] = "accepted"
            except Exception as exc:  # noqa: BLE001
                out[label] = err_text(exc)
        return out
    attempt(detail, "topology_differs", topo_errors)
    graph.close()

    for size in (10, 100, 1000):
        def timing(size=size):
            t0 = time.perf_counter()
            da = chain_def(ctx, k_axpb, size, x1, 1.0, 0.0)
            build_ms = (time.perf_counter() - t0) * 1e3
            db = chain_def(ctx, k_axpb, size, x2, 1.0, 0.0)
            inst = []
            for _ in range(5):
                t0 = time.perf_counter_ns()
                gg = da.instantiate()
                inst.append((time.perf_counter_ns() - t0) / 1e3)
                gg.close()
            gg = da.instantiate()
            upd = []
            for k in range(5):
                t0 = time.perf_counter_ns()
                update_graph(gg, db if k % 2 == 0 else da)
                upd.append((time.perf_counter_ns() - t0) / 1e3)
            gg.close()
            numbers[f"n{size}_build_def_ms"] = round(build_ms, 3)
            numbers[f"n{size}_instantiate_us"] = round(statistics.median(inst), 1)
            numbers[f"n{size}_update_us"] = round(statistics.median(upd), 1)
        attempt(detail, f"timing_n{size}", timing)
    numbers["update_result_ok"] = correct
    detail["update_via"] = dict(UPDATE_VIA)
    return correct, detail, numbers


def _fan_def(ctx, n, x):
    """n independent nodes (same node count as the chain, other edges)."""
    from cuda.core.graph import GraphDefinition
    k = ctx.nb(k_axpb, F32, types.float32, types.float32)
    g = GraphDefinition()
    for _ in range(n):
        g.launch(cfg(4, 256), k, *(nb_args(x) + [f32(1.0), f32(0.0)]))
    return g


def probe_upload(ctx):
    detail, numbers = {}, {}
    x = cuda.to_device(np.zeros(1024, np.float32))
    d = chain_def(ctx, k_axpb, 100, x, 1.0, 1.0)
    from cuda.core.graph import Graph
    numbers["graph_has_upload"] = hasattr(Graph, "upload")
    plain, uploaded, upload_call, steady = [], [], [], []
    for _ in range(3):
        g = d.instantiate()
        t0 = time.perf_counter_ns()
        g.launch(ctx.stream)
        ctx.stream.sync()
        plain.append((time.perf_counter_ns() - t0) / 1e3)
        g.close()
        g = d.instantiate()
        t0 = time.perf_counter_ns()
        g.upload(ctx.stream)
        ctx.stream.sync()
        upload_call.append((time.perf_counter_ns() - t0) / 1e3)
        t0 = time.perf_counter_ns()
        g.launch(ctx.stream)
        ctx.stream.sync()
        uploaded.append((time.perf_counter_ns() - t0) / 1e3)
        steady.append(median_us(lambda g=g: g.launch(ctx.stream), 10, ctx.stream))
        g.close()
    reset(x, np.zeros(1024, np.float32))
    g = d.instantiate()
    g.upload(ctx.stream)
    g.launch(ctx.stream)
    wait(ctx.stream)
    correct = bool((x.copy_to_host() == 100.0).all())
    g.close()
    numbers.update(first_launch_no_upload_us=round(statistics.median(plain), 1),
                   upload_call_us=round(statistics.median(upload_call), 1),
                   first_launch_after_upload_us=round(statistics.median(uploaded), 1),
                   steady_launch_sync_us=round(statistics.median(steady), 1),
                   result_ok=correct)
    detail["note"] = "N=100 chain; each time is launch (or upload) + stream sync, median of 3"
    return correct, detail, numbers


def capture(ctx, work):
    """work(stream) captured on a cuda.core GraphBuilder's stream (Device.create_graph_builder,
    begin_building, end_building, graph_definition), after one uncaptured warm-up call on
    the same stream (library handles, workspaces, compiled kernels). A failure under capture
    ends the (invalidated) capture before it is re-raised."""
    from cuda.bindings import driver
    gb = ctx.dev.create_graph_builder()
    work(gb.stream)
    gb.stream.sync()
    gb.begin_building()
    try:
        work(gb.stream)
    except BaseException:
        try:
            gb.end_building()
        except Exception:  # noqa: BLE001 - invalidated: end it through the driver
            driver.cuStreamEndCapture(gb.stream.handle)
        raise
    gb.end_building()
    return gb, gb.graph_definition


def _torch_capture_mm(ctx, torch, A, B, C):
    """torch.mm(A, B, out=C) captured on a cuda.core GraphBuilder's stream."""
    streams = {}

    def work(stream):
        ext = streams.setdefault(int(stream.handle),
                                 torch.cuda.ExternalStream(int(stream.handle)))
        with torch.cuda.stream(ext):
            torch.mm(A, B, out=C)
    return capture(ctx, work)


def _node_types(gdef):
    """Node types of a (captured) graph, through the driver: cuda.core's wrappers need not
    understand every captured node (library kernels set func, not kern)."""
    from cuda.bindings import driver
    try:
        _, count = drv_check(driver.cuGraphGetNodes(gdef.handle), "cuGraphGetNodes")
        nodes, _ = drv_check(driver.cuGraphGetNodes(gdef.handle, count), "cuGraphGetNodes")
        kinds: dict = {}
        for node in nodes:
            t = drv_check(driver.cuGraphNodeGetType(node), "cuGraphNodeGetType")
            name = t.name.replace("CU_GRAPH_NODE_TYPE_", "")
            kinds[name] = kinds.get(name, 0) + 1
        return kinds
    except Exception as exc:  # noqa: BLE001 - a description, never a reason to fail
        return {"error": err_text(exc)}


def probe_embed_torch_mm(ctx):
    import torch
    from cuda.core.graph import GraphDefinition
    torch.backends.cuda.matmul.allow_tf32 = False
    detail, numbers = {"torch": torch.__version__}, {}
    n = 256
    X = torch.randint(-4, 5, (n, n), device="cuda", dtype=torch.float32)
    A, C, D = (torch.zeros(n, n, device="cuda") for _ in range(3))
    B = torch.randint(-4, 5, (n, n), device="cuda", dtype=torch.float32)
    torch.cuda.synchronize()
    gb, child = _torch_capture_mm(ctx, torch, A, B, C)
    detail["captured_nodes"] = _node_types(child)
    ks = ctx.nb(k_scale, F32, F32, types.float32)
    blocks = (n * n + 255) // 256
    g = GraphDefinition()
    pre = g.launch(cfg(blocks, 256), ks, *(nb_args(X) + nb_args(A) + [f32(2.0)]))
    pre.embed(child).launch(cfg(blocks, 256), ks, *(nb_args(C) + nb_args(D) + [f32(1.0)]))
    graph = g.instantiate()
    results = []
    for k in range(3):  # replay with new X data in place
        if k:
            X.copy_(torch.randint(-4, 5, (n, n), device="cuda", dtype=torch.float32))
        torch.cuda.synchronize()
        graph.launch(ctx.stream)
        wait(ctx.stream)
        ref = torch.mm(2.0 * X, B)
        torch.cuda.synchronize()
        results.append(bool(torch.allclose(D, ref, rtol=1e-4, atol=1e-3)))
    graph.close()
    numbers.update(replays_ok=results, n=n)
    return all(results), detail, numbers


def _cupy_stream(cupy, core_stream):
    try:
        return cupy.cuda.Stream.from_external(core_stream)
    except Exception:  # noqa: BLE001 - older CuPy: the deprecated ExternalStream
        return cupy.cuda.ExternalStream(int(core_stream.handle))


def _cupy_capture(ctx, cupy, work):
    """Capture work() (CuPy calls) on a cuda.core GraphBuilder stream."""
    streams = {}

    def on_stream(stream):
        s = streams.setdefault(int(stream.handle), _cupy_stream(cupy, stream))
        with s:
            work()
    return capture(ctx, on_stream)


def _cupy_elementwise(ctx, cupy):
    from cuda.core.graph import GraphDefinition
    n = 4096
    X = cuda.to_device(np.arange(n, dtype=np.float32))
    xc, tc, yc = (cupy.zeros(n, cupy.float32) for _ in range(3))
    out = cuda.to_device(np.zeros(n, np.float32))
    cupy.cuda.Device().synchronize()

    def work():
        cupy.multiply(xc, 3.0, out=tc)
        cupy.add(tc, 1.0, out=yc)
    gb, child = _cupy_capture(ctx, cupy, work)
    ks = ctx.nb(k_scale, F32, F32, types.float32)
    g = GraphDefinition()
    pre = g.launch(cfg(n // 256, 256), ks, *(nb_args(X) + nb_args(xc) + [f32(2.0)]))
    pre.embed(child).launch(cfg(n // 256, 256), ks, *(nb_args(yc) + nb_args(out) + [f32(1.0)]))
    graph = g.instantiate()
    graph.launch(ctx.stream)
    wait(ctx.stream)
    ok = bool(np.allclose(out.copy_to_host(), 6.0 * np.arange(n) + 1.0))
    graph.close()
    return {"captured_nodes": _node_types(child), "result_ok": ok}


def _cupy_matmul(ctx, cupy):
    a = cupy.ones((64, 64), cupy.float32)
    b = cupy.ones((64, 64), cupy.float32)
    c = cupy.zeros((64, 64), cupy.float32)
    gb, child = _cupy_capture(ctx, cupy, lambda: cupy.matmul(a, b, out=c))
    from cuda.core.graph import GraphDefinition
    c.fill(0)
    cupy.cuda.Device().synchronize()
    g = GraphDefinition()
    g.embed(child)
    graph = g.instantiate()
    graph.launch(ctx.stream)
    wait(ctx.stream)
    ok = bool((c.get() == 64.0).all())
    graph.close()
    return {"captured": True, "captured_nodes": _node_types(child), "result_ok": ok}


def _raw_kernel_variants(ctx, cupy):
    from cuda.bindings import driver
    from cuda.core import Kernel
    from cuda.core.graph import GraphDefinition
    raw = cupy.RawKernel(RAW_SRC, "tg_add1")
    fn = raw.kernel  # compiles and loads: a cupy.cuda.Function over a CUfunction
    out = {"rawkernel_attrs": [a for a in dir(raw) if not a.startswith("_")],
           "function_attrs": [a for a in dir(fn) if not a.startswith("_")]}
    n = 1024
    x = cupy.zeros(n, cupy.float32)

    def run(gdef):
        x.fill(0)
        cupy.cuda.Device().synchronize()
        graph = gdef.instantiate()
        graph.launch(ctx.stream)
        wait(ctx.stream)
        graph.close()
        return bool((x.get() == 1.0).all())

    def bindings_node():  # cuGraphAddKernelNode with func = the CUfunction, into our graph
        g = GraphDefinition()
        p = driver.CUDA_KERNEL_NODE_PARAMS()
        p.func = driver.CUfunction(int(fn.ptr))
        p.gridDimX, p.gridDimY, p.gridDimZ = n // 256, 1, 1
        p.blockDimX, p.blockDimY, p.blockDimZ = 256, 1, 1
        p.sharedMemBytes = 0
        vals = [ctypes.c_void_p(x.data.ptr), ctypes.c_int32(n)]
        ptrs = (ctypes.c_void_p * 2)(*[ctypes.addressof(v) for v in vals])
        p.kernelParams = ctypes.addressof(ptrs)
        p.extra = 0
        drv_check(driver.cuGraphAddKernelNode(g.handle, None, 0, p), "cuGraphAddKernelNode")
        res = {"result_ok": run(g)}
        attempt(res, "cuda_core_wraps_the_foreign_node",
                lambda: sorted(type(node).__name__ for node in g.nodes()))
        return res
    attempt(out, "bindings_cuGraphAddKernelNode_func", bindings_node)

    def from_handle():  # Kernel.from_handle documents a CUkernel; CuPy holds a CUfunction
        k = Kernel.from_handle(int(fn.ptr))
        g = GraphDefinition()
        g.launch(cfg(n // 256, 256), k, x.data.ptr, np.int32(n))
        return {"result_ok": run(g)}
    attempt(out, "cuda_core_Kernel_from_handle", from_handle)  # last: handle-type abuse
    return out


def probe_embed_cupy(ctx):
    import cupy
    detail = {"cupy": cupy.__version__}
    good1, res1 = attempt(detail, "elementwise_captured_embedded",
                          lambda: _cupy_elementwise(ctx, cupy))
    attempt(detail, "matmul_under_capture", lambda: _cupy_matmul(ctx, cupy))
    good3, res3 = attempt(detail, "rawkernel_as_node", lambda: _raw_kernel_variants(ctx, cupy))
    raw_ok = good3 and any(isinstance(v, dict) and v.get("result_ok")
                           for v in res3.values() if isinstance(v, dict))
    numbers = {"elementwise_ok": bool(good1 and res1["result_ok"]), "rawkernel_some_way_ok": raw_ok,
               "matmul_captured": isinstance(detail.get("matmul_under_capture"), dict)
               and detail["matmul_under_capture"].get("captured", False)}
    return numbers["elementwise_ok"] and raw_ok, detail, numbers


class NcclCtypes:
    """ncclCommInitAll / ncclAllReduce / ncclCommDestroy from the nvidia-nccl-cu13 wheel."""

    def __init__(self):
        import nvidia.nccl
        base = list(nvidia.nccl.__path__)[0]
        self.path = os.path.join(base, "lib", "libnccl.so.2")
        self.lib = ctypes.CDLL(self.path)
        self.lib.ncclGetErrorString.restype = ctypes.c_char_p
        self.lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                           ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                           ctypes.c_void_p]
        v = ctypes.c_int()
        self._check(self.lib.ncclGetVersion(ctypes.byref(v)), "ncclGetVersion")
        self.version = v.value
        comms = (ctypes.c_void_p * 1)()
        self._check(self.lib.ncclCommInitAll(comms, 1, (ctypes.c_int * 1)(0)), "ncclCommInitAll")
        self.comm = comms[0]

    def _check(self, r, call):
        if r != 0:
            raise RuntimeError(f"{call} -> {r}: {self.lib.ncclGetErrorString(r).decode()}")

    def allreduce_sum_f32(self, send, recv, count, stream):
        self._check(self.lib.ncclAllReduce(send, recv, count, 7, 0, self.comm, stream),
                    "ncclAllReduce")  # 7 = ncclFloat32, 0 = ncclSum

    def close(self):
        self.lib.ncclCommDestroy(ctypes.c_void_p(self.comm))


class NcclCupy:
    def __init__(self):
        from cupy.cuda import nccl
        if not getattr(nccl, "available", True):
            raise RuntimeError("cupy.cuda.nccl.available is False")
        self.nccl = nccl
        self.version = nccl.get_version()
        self.path = "cupy.cuda.nccl"
        self.comm = nccl.NcclCommunicator(1, nccl.get_unique_id(), 0)

    def allreduce_sum_f32(self, send, recv, count, stream):
        self.comm.allReduce(send, recv, count, self.nccl.NCCL_FLOAT32, self.nccl.NCCL_SUM, stream)

    def close(self):
        self.comm.destroy()


def _nccl_embedded(ctx, comm):
    from cuda.core.graph import GraphDefinition
    n = 1 << 16
    X = cuda.to_device(np.arange(n, dtype=np.float32))
    send, recv, out = (cuda.to_device(np.zeros(n, np.float32)) for _ in range(3))
    gb, child = capture(ctx, lambda stream: comm.allreduce_sum_f32(
        ptr(send), ptr(recv), n, int(stream.handle)))
    ks = ctx.nb(k_scale, F32, F32, types.float32)
    g = GraphDefinition()
    pre = g.launch(cfg(n // 256, 256), ks, *(nb_args(X) + nb_args(send) + [f32(1.0)]))
    pre.embed(child).launch(cfg(n // 256, 256), ks, *(nb_args(recv) + nb_args(out) + [f32(1.0)]))
    graph = g.instantiate()
    results = []
    for k in range(3):
        data = np.arange(n, dtype=np.float32) * (k + 1)
        reset(X, data)
        graph.launch(ctx.stream)
        wait(ctx.stream)
        results.append(bool((out.copy_to_host() == data).all()))
    graph.close()
    return {"binding": comm.path, "nccl_version": comm.version,
            "captured_nodes": _node_types(child), "replays_ok": results}


def probe_nccl_single_rank(ctx):
    detail = {}
    ok = False
    for label, make in (("cupy", NcclCupy), ("ctypes", NcclCtypes)):
        def run(make=make):
            comm = make()
            try:
                return _nccl_embedded(ctx, comm)
            finally:
                comm.close()
        good, res = attempt(detail, label, run)
        if good and all(res["replays_ok"]):
            ok = True
            break
    return ok, detail, {"worked_with": next((k for k, v in detail.items() if isinstance(v, dict)
                                             and all(v.get("replays_ok", [False]))), None)}


def probe_kernel_node_attrs(ctx):
    from cuda.bindings import driver
    from cuda.core.graph import GraphCompleteOptions, GraphDefinition
    detail, numbers = {}, {}
    attr = driver.CUkernelNodeAttrID
    x = cuda.to_device(np.zeros(1 << 20, np.float32))
    g = GraphDefinition()
    node = g.launch(cfg(4096, 256), ctx.nb(k_axpb, F32, types.float32, types.float32),
                    *(nb_args(x) + [f32(1.0), f32(3.0)]))
    least, greatest = drv_check(driver.cuCtxGetStreamPriorityRange(),
                                "cuCtxGetStreamPriorityRange")
    detail["priority_range_least_greatest"] = [int(least), int(greatest)]

    def priority():
        v = driver.CUkernelNodeAttrValue()
        v.priority = int(greatest)
        drv_check(driver.cuGraphKernelNodeSetAttribute(
            node.handle, attr.CU_LAUNCH_ATTRIBUTE_PRIORITY, v), "SetAttribute(PRIORITY)")
        back = drv_check(driver.cuGraphKernelNodeGetAttribute(
            node.handle, attr.CU_LAUNCH_ATTRIBUTE_PRIORITY), "GetAttribute(PRIORITY)")
        return {"set": int(greatest), "read_back": int(back.priority)}
    good_p, _ = attempt(detail, "priority", priority)

    def window():
        dev = drv_check(driver.cuCtxGetDevice(), "cuCtxGetDevice")
        max_win = drv_check(driver.cuDeviceGetAttribute(
            driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, dev),
            "cuDeviceGetAttribute(MAX_ACCESS_POLICY_WINDOW_SIZE)")
        w = driver.CUaccessPolicyWindow()
        w.base_ptr = ptr(x)
        w.num_bytes = min(x.nbytes, int(max_win))
        w.hitRatio = 0.6
        w.hitProp = driver.CUaccessProperty.CU_ACCESS_PROPERTY_PERSISTING
        w.missProp = driver.CUaccessProperty.CU_ACCESS_PROPERTY_STREAMING
        v = driver.CUkernelNodeAttrValue()
        v.accessPolicyWindow = w
        drv_check(driver.cuGraphKernelNodeSetAttribute(
            node.handle, attr.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, v),
            "SetAttribute(ACCESS_POLICY_WINDOW)")
        back = drv_check(driver.cuGraphKernelNodeGetAttribute(
            node.handle, attr.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW),
            "GetAttribute(ACCESS_POLICY_WINDOW)").accessPolicyWindow
        return {"max_window_bytes": int(max_win), "set_bytes": int(w.num_bytes),
                "read_back_bytes": int(back.num_bytes), "read_back_hitRatio": float(back.hitRatio)}
    good_w, _ = attempt(detail, "access_policy_window", window)

    def run():
        graph = g.instantiate(GraphCompleteOptions(use_node_priority=True))
        graph.launch(ctx.stream)
        wait(ctx.stream)
        graph.close()
        return bool((x.copy_to_host() == 3.0).all())
    good_r, ran = attempt(detail, "launch_with_attrs(use_node_priority)", run)
    numbers.update(priority_ok=good_p, window_ok=good_w, result_ok=bool(good_r and ran))
    return good_p and good_w and bool(good_r and ran), detail, numbers


def _launch_samples(fn, n=2000, sync=None):
    """Median host time of fn() in us; sync() every 256 calls, outside the timed part, keeps
    the launch queue short (a full queue would block the host)."""
    samples = []
    for i in range(n):
        t0 = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t0)
        if sync is not None and i % 256 == 255:
            sync()
    if sync is not None:
        sync()
    return round(statistics.median(samples) / 1e3, 3)


def probe_launch_cost(ctx):
    from cuda.bindings import driver
    detail, numbers = {}, {}
    x = cuda.to_device(np.zeros(1024, np.float32))
    d = chain_def(ctx, k_axpb, 1, x, 1.0, 1.0)  # each launch adds 1: counts the launches
    graph = d.instantiate()
    s = ctx.stream
    graph.launch(s)
    s.sync()
    launches = 1
    numbers["cuda_core_Graph_launch_us"] = _launch_samples(lambda: graph.launch(s), sync=s.sync)
    launches += 2000
    h, sh = graph.handle, s.handle
    numbers["bindings_cuGraphLaunch_us"] = _launch_samples(lambda: driver.cuGraphLaunch(h, sh),
                                                           sync=s.sync)
    launches += 2000

    def via_ctypes():
        lib = ctypes.CDLL("libcuda.so.1")
        f = lib.cuGraphLaunch
        f.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        hi, si = ctypes.c_void_p(int(h)), ctypes.c_void_p(int(sh))
        numbers["ctypes_libcuda_cuGraphLaunch_us"] = _launch_samples(lambda: f(hi, si), sync=s.sync)
        return 2000
    good, extra = attempt(detail, "ctypes", via_ctypes)
    launches += extra if good else 0
    wait(s)
    counted = float(x.copy_to_host()[0])
    numbers["launches_counted_ok"] = counted == launches
    detail["launches"] = {"issued": launches, "counted_by_the_kernel": counted}

    def via_cupy():
        import cupy
        xc = cupy.zeros(1024, cupy.float32)
        cs = cupy.cuda.Stream(non_blocking=True)
        with cs:
            cupy.add(xc, 1.0, out=xc)  # warm up
            cs.synchronize()
            cs.begin_capture()
            cupy.add(xc, 1.0, out=xc)
            cg = cs.end_capture()
        cg.launch(stream=cs)
        cs.synchronize()
        numbers["cupy_Graph_launch_us"] = _launch_samples(lambda: cg.launch(stream=cs),
                                                         sync=cs.synchronize)
        # warm-up 1 + first replay 1 + 2000 (the captured call itself does not run)
        numbers["cupy_launches_counted_ok"] = float(xc[0].get()) == 1 + 1 + 2000
    attempt(detail, "cupy", via_cupy)

    def numba_eager():
        k_axpb[4, 256](x, np.float32(1.0), np.float32(0.0))
        cuda.synchronize()
        numbers["numba_eager_launch_us"] = _launch_samples(
            lambda: k_axpb[4, 256](x, np.float32(1.0), np.float32(0.0)), n=300,
            sync=cuda.synchronize)
        cuda.synchronize()
    attempt(detail, "numba_eager", numba_eager)
    graph.close()
    detail["note"] = "host time per call, median of 2000 (Numba eager: 300), perf_counter_ns"
    return numbers["launches_counted_ok"], detail, numbers


def probe_nvmath_available(ctx):
    try:
        import nvmath
        detail = {"version": getattr(nvmath, "__version__", "?"), "path": nvmath.__file__}
        try:
            import nvmath.linalg  # noqa: F401
            detail["linalg"] = "imports"
        except Exception as exc:  # noqa: BLE001
            detail["linalg"] = err_text(exc)
        return True, detail, {"available": True}
    except Exception as exc:  # noqa: BLE001 - missing is an answer, not a failure
        return True, {"import": err_text(exc)}, {"available": False}


def probe_embed_nvmath_gemm(ctx):
    """cublasSgemm through nvmath.bindings.cublas, with a fixed workspace, captured on a
    GraphBuilder stream and embedded between two Numba nodes; then re-captured for other
    pointers and swapped in with cuGraphExecChildGraphNodeSetParams."""
    from cuda.bindings import driver
    from cuda.core.graph import GraphDefinition
    from nvmath.bindings import cublas
    n = 128
    rng = np.random.default_rng(0)
    X = cuda.to_device(rng.integers(-4, 5, (n, n)).astype(np.float32))
    B = cuda.to_device(rng.integers(-4, 5, (n, n)).astype(np.float32))
    A, C, D, C2 = (cuda.device_array((n, n), np.float32) for _ in range(4))
    work = cuda.device_array(32 << 20, np.uint8)
    handle = cublas.create()
    cublas.set_workspace(handle, ptr(work), work.size)
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    detail, numbers = {"cublas_version": cublas.get_version(handle)}, {}

    def gemm_into(out):
        def go(stream):
            cublas.set_stream(handle, int(stream.handle))
            # row-major C = A @ B is column-major C^T = B^T A^T: swap the operands
            cublas.sgemm(handle, 0, 0, n, n, n, one.ctypes.data, ptr(B), n, ptr(A), n,
                         zero.ctypes.data, ptr(out), n)
        return go

    gb, child = capture(ctx, gemm_into(C))
    detail["captured_nodes"] = _node_types(child)
    ks = ctx.nb(k_scale, F32, F32, types.float32)
    blocks = (n * n + 255) // 256
    g = GraphDefinition()
    pre = g.launch(cfg(blocks, 256), ks, *(nb_args(X) + nb_args(A) + [f32(2.0)]))
    mid = pre.embed(child)
    mid.launch(cfg(blocks, 256), ks, *(nb_args(C) + nb_args(D) + [f32(1.0)]))
    graph = g.instantiate()
    ok = []
    for k in range(2):
        graph.launch(ctx.stream)
        wait(ctx.stream)
        ref = (2.0 * X.copy_to_host()) @ B.copy_to_host()
        ok.append(bool(np.allclose(D.copy_to_host(), ref)))
    numbers["replays_ok"] = ok
    # swap the child for one writing C2 instead: exec update of a child graph node
    gb2, child2 = capture(ctx, gemm_into(C2))
    t0 = time.perf_counter()
    err = driver.cuGraphExecChildGraphNodeSetParams(graph.handle, mid.handle, child2.handle)
    numbers["child_update_us"] = round((time.perf_counter() - t0) * 1e6, 1)
    detail["child_update"] = str(err[0])
    C2.copy_to_device(np.zeros((n, n), np.float32))
    graph.launch(ctx.stream)
    wait(ctx.stream)
    numbers["child_update_ok"] = bool(np.allclose(C2.copy_to_host(), ref))
    t0 = time.perf_counter()
    for _ in range(20):
        capture(ctx, gemm_into(C2))
    numbers["recapture_us"] = round((time.perf_counter() - t0) / 20 * 1e6, 1)
    graph.close()
    cublas.destroy(handle)
    return all(ok) and numbers["child_update_ok"], detail, numbers


# (name, function, soft limit in seconds, needs a healthy GPU). Risky work last: cooperative
# kernels, the conditional-body refusals (their cooperative case), then CuPy (whose last step
# hands cuda.core a CUfunction where it documents a CUkernel).
PROBES = [
    ("env", probe_env, 10, True),
    ("nvmath_available", probe_nvmath_available, 8, False),
    ("while_cond", probe_while_cond, 15, True),
    ("if_else_cond", probe_if_else_cond, 6, True),
    ("switch_cond", probe_switch_cond, 5, True),
    ("nested_cond", probe_nested_cond, 6, True),
    ("graph_update", probe_graph_update, 12, True),
    ("upload", probe_upload, 6, True),
    ("launch_cost", probe_launch_cost, 10, True),
    ("kernel_node_attrs", probe_kernel_node_attrs, 5, True),
    ("embed_torch_mm", probe_embed_torch_mm, 15, True),
    ("embed_nvmath_gemm", probe_embed_nvmath_gemm, 12, True),
    ("nccl_single_rank", probe_nccl_single_rank, 12, True),
    ("cooperative_node", probe_cooperative_node, 8, True),
    ("cond_body_refusals", probe_cond_body_refusals, 8, True),
    ("embed_cupy", probe_embed_cupy, 10, True),
]

# ---------------------------------------------------------------------------
# driver


def jsonable(value):
    """Plain JSON: str keys, lists for tuples/sets, str() for anything else unknown."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def emit(record):
    record = jsonable(record)
    RESULTS.append(record)
    print(json.dumps(record, default=str), flush=True)
    write_results()  # after every probe: a crash later loses nothing already measured


def write_results():
    with WRITE_LOCK:  # the watchdog thread may write too
        tmp = OUT_PATH + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"results": list(RESULTS), "seconds": round(time.monotonic() - T0, 2)},
                      f, indent=1, default=str)
        os.replace(tmp, OUT_PATH)


def watchdog():
    time.sleep(max(1.0, HARD_LIMIT_S - (time.monotonic() - T0)))
    emit({"probe": STATE["probe"] or "watchdog", "ok": False,
          "detail": f"killed: the whole run passed {HARD_LIMIT_S} s", "numbers": {}})
    os._exit(3)


def on_alarm(signum, frame):
    raise ProbeTimeout(f"probe {STATE['probe']} passed its soft time limit")


def run_probe(name, fn, limit, needs_gpu, ctx):
    STATE["probe"] = name
    remaining = HARD_LIMIT_S - 2 - (time.monotonic() - T0)
    if remaining < 1:
        emit({"probe": name, "ok": False, "detail": "skipped: no time left", "numbers": {}})
        return
    if needs_gpu and (ctx is None or STATE["gpu_hung"]):
        why = "the GPU hung in an earlier probe" if STATE["gpu_hung"] else "no CUDA context"
        emit({"probe": name, "ok": False, "detail": f"skipped: {why}", "numbers": {}})
        return
    t0 = time.monotonic()
    signal.alarm(max(1, int(min(limit, remaining))))
    try:
        ok, detail, numbers = fn(ctx)
    except (Exception, ProbeTimeout, GPUHang) as exc:  # noqa: BLE001 - one never stops the rest
        ok, detail, numbers = False, {"error": err_text(exc),
                                      "traceback": traceback.format_exc()[-1500:]}, {}
    finally:
        signal.alarm(0)
    numbers = dict(numbers)
    numbers["probe_seconds"] = round(time.monotonic() - t0, 3)
    emit({"probe": name, "ok": bool(ok), "detail": detail, "numbers": numbers})


def main():
    signal.signal(signal.SIGALRM, on_alarm)
    threading.Thread(target=watchdog, daemon=True).start()
    try:
        ctx = Ctx()
    except Exception as exc:  # noqa: BLE001
        ctx = None
        emit({"probe": "setup", "ok": False, "detail": err_text(exc), "numbers": {}})
    only = set(os.environ.get("PROBE_ONLY", "").split(",")) - {""}
    for name, fn, limit, needs_gpu in PROBES:
        if only and name not in only:
            continue
        run_probe(name, fn, limit, needs_gpu, ctx)
    write_results()
    print(json.dumps({"summary": {r["probe"]: r["ok"] for r in RESULTS},
                      "seconds": round(time.monotonic() - T0, 2), "out": OUT_PATH}), flush=True)
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown (NCCL / torch / a hung context can stall it)


if __name__ == "__main__":
    main()
