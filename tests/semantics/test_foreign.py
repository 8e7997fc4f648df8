"""Work that is not a Numba kernel, as graph nodes: foreign kernels (tg.launch), library
calls captured into child graphs (tg.library, ops.matmul through cuBLAS), and kernel-node
attributes (tg.node_attributes). On sim and the CPU stand-in a foreign node runs its sim=
function; on a GPU the real kernel or the captured library work."""
from __future__ import annotations

import sys

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg
from tracegraph import _numba
from tracegraph.backends import gpu_usable

ON_GPU = not _numba.SIMULATOR and gpu_usable()

AXPY = r"""
extern "C" __global__ void axpy(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
"""


class _StandIn:
    """Where no GPU compiles the kernel: an object shaped like a cuda.core Kernel (only
    its sim= function ever runs)."""
    handle = 0
    name = "axpy"


def _axpy_kernel():
    if not ON_GPU:
        return _StandIn()
    from cuda.core import Device, Program, ProgramOptions
    dev = Device()
    dev.set_current()
    options = ProgramOptions(std="c++17", arch=f"sm_{dev.arch}")
    return Program(AXPY, code_type="c++", options=options).compile("cubin").get_kernel("axpy")


def axpy_sim(x, y, a, n):
    y[:n] += a * x[:n]


def _line() -> int:
    return sys._getframe(1).f_lineno + 1


@cuda.jit
def double(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= 2


@cuda.jit
def add_one(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] + 1


N = 16


def test_foreign_kernel_ordered_by_declared_accesses(backend):
    axpy = _axpy_kernel()

    @tg.compile(backend=backend)
    def f(x, y):
        double[2, 8](x)
        tg.launch(axpy, 2, 8, x, y, np.float32(3), np.int32(N), reads=[x], writes=[y],
                  sim=axpy_sim)
        out = tg.empty(N, np.float32)
        add_one[2, 8](y, out)
        double[2, 8](x)  # after the foreign read of x (WAR)
        return out

    x = np.arange(N, dtype=np.float32)
    y = np.ones(N, np.float32)
    out = f(x, y)
    np.testing.assert_array_equal(out, 1 + 3 * 2 * np.arange(N) + 1)
    np.testing.assert_array_equal(y, 1 + 3 * 2 * np.arange(N))
    np.testing.assert_array_equal(x, 4 * np.arange(N))
    # again, on fresh inputs: the replay
    x2, y2 = np.full(N, 2, np.float32), np.zeros(N, np.float32)
    np.testing.assert_array_equal(f(x2, y2), 3 * 4 + 1)


def test_foreign_kernel_without_declarations_reads_and_writes_every_array(backend):
    axpy = _axpy_kernel()

    @tg.compile(backend=backend)
    def f(x, y):
        tg.launch(axpy, 2, 8, x, y, np.float32(2), np.int32(N), sim=axpy_sim, name="axpy")
        add_one[2, 8](y, x)

    x, y = np.ones(N, np.float32), np.ones(N, np.float32)
    (op,) = [o for o in f.trace(x, y).ops if o.name == "axpy"]
    assert [a.mode for a in op.accesses] == ["rw", "rw"]
    f(x, y)
    np.testing.assert_array_equal(y, 3)
    np.testing.assert_array_equal(x, 4)


def test_foreign_kernel_re_pointed_when_device_inputs_move(backend):
    if backend == "sim" and not _numba.SIMULATOR:
        pytest.skip("device arrays: the cuda backend's test")
    axpy = _axpy_kernel()

    @tg.compile(backend=backend)
    def f(x, y):
        tg.launch(axpy, 2, 8, x, y, np.float32(1), np.int32(N), reads=[x], writes=[y],
                  sim=axpy_sim)

    for k in range(3):
        x = cuda.to_device(np.full(N, k, np.float32))
        y = cuda.to_device(np.full(N, 10, np.float32))
        f(x, y)
        np.testing.assert_array_equal(y.copy_to_host(), 10 + k)


def test_foreign_scalars_must_be_numpy_scalars(backend):
    lines = []

    @tg.compile(backend=backend)
    def f(x):
        lines.append(_line())
        tg.launch(_axpy_kernel(), 1, 16, x, x, 2.0, N, sim=axpy_sim)

    with pytest.raises(tg.TraceError) as e:
        f(np.ones(N, np.float32))
    assert "np.int32(n)" in e.value.fix
    assert e.value.where == f"{__file__}:{lines[0]}"


def test_tg_launch_refuses_what_is_not_a_kernel(backend):
    @tg.compile(backend=backend)
    def f(x):
        tg.launch("axpy", 1, 16, x)

    with pytest.raises(tg.TraceError, match="cuda.core Kernel or a CuPy RawKernel"):
        f(np.ones(N, np.float32))


@pytest.mark.skipif(ON_GPU, reason="the simulator's requirement")
def test_foreign_kernel_without_sim_function_is_an_error_before_anything_runs(backend):
    @tg.compile(backend=backend)
    def f(x):
        double[2, 8](x)
        tg.launch(_StandIn(), 1, 16, x)

    x = np.ones(N, np.float32)
    with pytest.raises(tg.LoweringError, match="no sim= function"):
        f(x)
    np.testing.assert_array_equal(x, 1)


def test_sim_function_writing_an_array_declared_read_raises(backend):
    if ON_GPU and backend == "cuda":
        pytest.skip("on a GPU the real kernel runs, not its sim function")

    def bad(x, y, a, n):
        x[:] = 0

    @tg.compile(backend=backend)
    def f(x, y):
        tg.launch(_axpy_kernel(), 1, 16, x, y, np.float32(1), np.int32(N), reads=[x],
                  writes=[y], sim=bad)

    with pytest.raises(tg.TracegraphError, match="read-only"):
        f(np.ones(N, np.float32), np.ones(N, np.float32))


# ---------------------------------------------------------------------------
# library calls

def _scale_library(stream, x, out):
    """out = 3 x through CuPy on the given stream (a stand-in for any capturable library)."""
    import cupy
    with cupy.cuda.ExternalStream(int(stream.handle)):
        cupy.multiply(cupy.asarray(x), 3, out=cupy.asarray(out))


def _scale_sim(x, out):
    np.multiply(x, 3, out=out)


def _needs_cupy_on_gpu():
    if ON_GPU:
        pytest.importorskip("cupy")


@pytest.mark.parametrize("declared", ["lists", "one array", "one position"])
def test_library_call_between_kernels(backend, declared):
    """reads=t, writes=u (no list) mean those arrays, not their elements."""
    _needs_cupy_on_gpu()

    @tg.compile(backend=backend)
    def f(x):
        t = tg.empty(N, np.float32)
        add_one[2, 8](x, t)
        u = tg.empty(N, np.float32)
        reads, writes = {"lists": ([t], [u]), "one array": (t, u),
                         "one position": (0, 1)}[declared]
        tg.library(_scale_library, t, u, reads=reads, writes=writes, sim=_scale_sim)
        out = tg.empty(N, np.float32)
        add_one[2, 8](u, out)
        return out

    x = np.arange(N, dtype=np.float32)
    np.testing.assert_array_equal(f(x), 3 * (np.arange(N) + 1) + 1)
    np.testing.assert_array_equal(f(x + 1), 3 * (np.arange(N) + 2) + 1)
    library = [op for op in f.trace(x).ops if op.kind == "library"]
    assert [sorted(a.mode for a in op.accesses) for op in library] == [["r", "rw"]]


def test_library_call_on_moved_device_inputs_reads_and_writes_the_callers_arrays(backend):
    if backend == "sim" and not _numba.SIMULATOR:
        pytest.skip("device arrays: the cuda backend's test")
    _needs_cupy_on_gpu()

    @tg.compile(backend=backend)
    def f(x, out):
        tg.library(_scale_library, x, out, reads=[x], writes=[out], sim=_scale_sim)
        double[2, 8](out)

    for k in range(3):
        x = cuda.to_device(np.full(N, k + 1, np.float32))
        out = cuda.device_array(N, np.float32)
        f(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), 6 * (k + 1))


def test_library_call_inside_a_loop_body(backend):
    _needs_cupy_on_gpu()

    @cuda.jit
    def count_down(n, flag):
        if cuda.grid(1) == 0:
            n[0] -= 1
            flag[0] = 1 if n[0] > 0 else 0

    @tg.compile(backend=backend)
    def f(x, n, flag):
        with tg.while_(flag, max_iterations=10):
            t = tg.empty(N, np.float32)
            tg.library(_scale_library, x, t, reads=[x], writes=[t], sim=_scale_sim)
            add_one[2, 8](t, x)
            count_down[1, 1](n, flag)
        return x

    n = np.array([3], np.int32)
    out = f(np.ones(N, np.float32), n, np.ones(1, np.int32))
    ref = np.ones(N, np.float32)
    for _ in range(3):
        ref = 3 * ref + 1
    np.testing.assert_array_equal(out, ref)


@pytest.mark.skipif(not ON_GPU, reason="capture needs a GPU")
def test_a_library_call_that_synchronizes_is_a_clear_error(backend):
    if backend == "sim":
        pytest.skip("the simulator runs sim= functions")
    lines = []

    def syncs(stream, x):
        import cupy
        with cupy.cuda.ExternalStream(int(stream.handle)):
            cupy.asarray(x).get()  # a copy to the host: not capturable

    @tg.compile(backend=backend)
    def f(x):
        lines.append(_line())
        tg.library(syncs, x, sim=lambda x: None)

    with pytest.raises(tg.LoweringError) as e:
        f(cuda.to_device(np.ones(N, np.float32)))
    assert "could not be captured" in str(e.value)
    assert e.value.where == f"{__file__}:{lines[0]}"
    assert "stream-capturable" in e.value.fix


@pytest.mark.skipif(not ON_GPU, reason="capture needs a GPU")
def test_a_library_call_on_another_stream_is_refused(backend):
    if backend == "sim":
        pytest.skip("the simulator runs sim= functions")
    import cupy

    side = cupy.cuda.Stream(non_blocking=True)

    def elsewhere(stream, x):
        with side:
            cupy.multiply(cupy.asarray(x), 2, out=cupy.asarray(x))

    @tg.compile(backend=backend)
    def f(x):
        tg.library(elsewhere, x, sim=lambda x: None)

    with pytest.raises(tg.LoweringError, match="enqueued nothing"):
        f(cuda.to_device(np.ones(N, np.float32)))


def test_a_library_call_that_rightly_does_nothing_keeps_its_order(backend, monkeypatch):
    """may_be_empty=True: capturing no work is a placeholder node with the call's edges
    (as NCCL on one rank, in place); without it, the same call is refused on a GPU."""
    if not ON_GPU and backend == "cuda":  # the stand-in runs sim=: make its capture empty
        from tracegraph.backends.cuda.fake import FakePlatform
        real = FakePlatform.capture_library
        monkeypatch.setattr(FakePlatform, "capture_library", lambda self, node, args: (
            None if node.op.library.may_be_empty else real(self, node, args)))

    def nothing(stream, t):
        return None

    def step(x, may_be_empty):
        t = tg.empty(N, np.float32)
        add_one[2, 8](x, t)
        tg.library(nothing, t, writes=[t], sim=lambda t: None, may_be_empty=may_be_empty)
        out = tg.empty(N, np.float32)
        add_one[2, 8](t, out)
        return out

    f = tg.compile(lambda x: step(x, True), backend=backend)
    x = np.arange(N, dtype=np.float32)
    for k in range(3):
        np.testing.assert_array_equal(f(x + k), x + k + 2)
    if ON_GPU and backend == "cuda":
        g = tg.compile(lambda x: step(x, False), backend=backend)
        with pytest.raises(tg.LoweringError, match="enqueued nothing"):
            g(x)


@pytest.mark.skipif(not ON_GPU, reason="a CuPy RawKernel needs a GPU")
def test_cupy_raw_kernel_as_a_node(backend):
    if backend == "sim":
        pytest.skip("the GPU's test (on sim it is the sim= function)")
    cupy = pytest.importorskip("cupy")
    raw = cupy.RawKernel(AXPY, "axpy")

    @tg.compile(backend=backend)
    def f(x, y):
        double[2, 8](x)
        tg.launch(raw, 2, 8, x, y, np.float32(2), np.int32(N), reads=[x], writes=[y],
                  sim=axpy_sim)

    x, y = np.arange(N, dtype=np.float32), np.ones(N, np.float32)
    f(x, y)
    np.testing.assert_array_equal(y, 1 + 2 * 2 * np.arange(N))


# ---------------------------------------------------------------------------
# matmul through cuBLAS (forced where it is not there: its NumPy stand-in on sim)

@pytest.mark.parametrize("case", ["plain", "transposed", "out", "vector-like", "f64"])
def test_matmul_library_engine_equals_numpy(backend, monkeypatch, case):
    monkeypatch.setenv("TRACEGRAPH_MATMUL", "cublas")
    if ON_GPU:
        pytest.importorskip("nvmath.bindings.cublas")
    rng = np.random.default_rng(0)
    dtype = np.float64 if case == "f64" else np.float32
    m, k, n = (1, 9, 5) if case == "vector-like" else (6, 9, 5)
    a = rng.integers(-3, 4, (m, k)).astype(dtype)
    b = rng.integers(-3, 4, (k, n)).astype(dtype)

    @tg.compile(backend=backend)
    def f(a, b, at, bt):
        if case == "transposed":  # both operands column-major views: cuBLAS's T flags
            return tg.ops.matmul(at.T, bt.T)
        if case == "out":
            out = tg.zeros((m, n + 3), dtype)
            tg.ops.matmul(a, b, out=out[:, 1:n + 1])
            return out
        return a @ b

    at, bt = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
    got = f(a, b, at, bt)
    ref = a @ b
    if case == "out":
        np.testing.assert_array_equal(got[:, 1:n + 1], ref)
        np.testing.assert_array_equal(got[:, 0], 0)
    else:
        np.testing.assert_array_equal(got, ref)
    ops = f.trace(a, b, at, bt).ops
    assert any(op.kind == "library" and op.name == "cublas_gemm" for op in ops)


@pytest.mark.parametrize("engine", ["cublas", "kernel"])
@pytest.mark.parametrize("case", ["bias-relu", "bias", "relu", "plain", "transposed-w",
                                  "batch-1", "new-result", "f64"])
def test_linear_equals_numpy(backend, monkeypatch, engine, case):
    """ops.linear: one cuBLASLt node (bias and ReLU in its epilogue), float32,
    else matmul + add + relu; on sim the node runs its NumPy stand-in."""
    monkeypatch.setenv("TRACEGRAPH_MATMUL", engine)
    if ON_GPU and engine == "cublas":
        pytest.importorskip("nvmath.bindings.cublasLt")
    rng = np.random.default_rng(1)
    dtype = np.float64 if case == "f64" else np.float32
    m, k, n = (1, 24, 40) if case == "batch-1" else (7, 24, 40)
    x = rng.integers(-3, 4, (m, k)).astype(dtype)
    w = rng.integers(-3, 4, (k, n)).astype(dtype)
    b = rng.integers(-3, 4, n).astype(dtype)
    use_bias = case not in ("relu", "plain")
    act = "relu" if case in ("bias-relu", "relu", "transposed-w", "batch-1", "new-result",
                             "f64") else None

    @tg.compile(backend=backend)
    def f(x, w, wt, b, out):
        ww = wt.T if case == "transposed-w" else w
        if case == "new-result":
            return tg.ops.linear(x, ww, b, activation=act)
        tg.ops.linear(x, ww, b if use_bias else None, activation=act, out=out)
        return out

    out = np.full((m, n), 99, dtype)
    ref = x @ w + (b if use_bias else 0)
    ref = np.maximum(ref, 0) if act else ref
    got = f(x, w, np.ascontiguousarray(w.T), b, out)
    np.testing.assert_array_equal(got, ref)
    got = f(x + 1, w, np.ascontiguousarray(w.T), b, out)  # a replay
    ref2 = (x + 1) @ w + (b if use_bias else 0)
    np.testing.assert_array_equal(got, np.maximum(ref2, 0) if act else ref2)
    names = [op.name for op in f.trace(x, w, np.ascontiguousarray(w.T), b, out).ops
             if op.kind == "library"]
    fused = engine == "cublas" and case != "f64"
    assert names == (["cublaslt_linear"] if fused else
                     ["cublas_gemm"] if engine == "cublas" else [])


def test_linear_promotes_to_the_bias_dtype_as_numpy():
    @tg.compile(backend="sim")
    def f(x, w, b):
        return tg.ops.linear(x, w, b, activation="relu")

    x, w = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    b = np.full(4, 1e-9)
    got = f(x, w, b)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, x @ w + b)


def test_linear_refuses_what_it_cannot_do():
    @tg.compile(backend="sim")
    def f(x, w, b, act):
        return tg.ops.linear(x, w, b, activation=act)

    x, w = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(tg.TraceError, match="activation"):
        f(x, w, np.ones(4, np.float32), "tanh")
    with pytest.raises(tg.TraceError, match="bias"):
        f(x, w, np.ones(3, np.float32), None)
    with pytest.raises(tg.TraceError, match="aligned"):
        f(x, np.ones((4, 4), np.float32), np.ones(4, np.float32), None)

    @tg.compile(backend="sim")
    def g(x, w):
        out = tg.empty((2, 5), np.float32)
        return tg.ops.linear(x, w, out=out)

    with pytest.raises(tg.TraceError, match="linear: out has shape"):
        g(x, w)


def test_matmul_kernel_engine_records_no_library_node(backend, monkeypatch):
    monkeypatch.setenv("TRACEGRAPH_MATMUL", "kernel")

    @tg.compile(backend=backend)
    def f(a, b):
        return a @ b

    a, b = np.ones((4, 3), np.float32), np.ones((3, 2), np.float32)
    np.testing.assert_array_equal(f(a, b), 3)
    assert all(op.kind != "library" for op in f.trace(a, b).ops)


def test_two_matmuls_on_parallel_branches_have_their_own_workspace(monkeypatch):
    monkeypatch.setenv("TRACEGRAPH_MATMUL", "cublas")
    if ON_GPU:
        pytest.importorskip("nvmath.bindings.cublas")

    @tg.compile(backend="sim")
    def f(a, b, c):
        return a @ b, a @ c

    a, b = np.ones((4, 3), np.float32), np.ones((3, 2), np.float32)
    program = f.trace(a, b, b.copy())
    gemms = [i for i, op in enumerate(program.ops) if op.kind == "library"]
    assert len(gemms) == 2
    assert not program.graph.has_edge(*gemms)  # they run side by side
    buffers = [{x.buffer for x in program.ops[i].accesses if x.writes} for i in gemms]
    assert not buffers[0] & buffers[1]


# ---------------------------------------------------------------------------
# kernel-node attributes

def test_node_attributes_are_recorded_and_change_no_result(backend):
    @tg.compile(backend=backend)
    def f(x, table):
        with tg.node_attributes(priority=-1, persist=table, hit_ratio=0.5):
            add_one[2, 8](table, x)
        double[2, 8](x)
        return x

    x, table = np.zeros(N, np.float32), np.arange(N, dtype=np.float32)
    np.testing.assert_array_equal(f(x, table), 2 * (np.arange(N) + 1))
    launches = [op for op in f.trace(x, table).ops if op.kind == "kernel"]
    attrs = launches[0].launch.attributes
    assert attrs.priority == -1 and attrs.hit_ratio == 0.5 and attrs.persist is not None
    assert launches[1].launch.attributes is None


@pytest.mark.fake_platform
def test_node_attributes_reach_the_graph_nodes():
    from tracegraph.backends.cuda import platform as cuda_platform
    plat = cuda_platform.platform()

    @tg.compile(backend="cuda")
    def f(x, table):
        with tg.node_attributes(priority=-9, persist=table, hit_ratio=0.25):
            add_one[2, 8](table, x)

    x, table = np.zeros(N, np.float32), np.arange(N, dtype=np.float32)
    f(x, table)
    graph = f.latest.executable.built.graph
    kernels = [p for k, p in zip(graph.kinds, graph.params) if k == "kernel"]
    assert kernels[0]["priority"] == -5  # clamped to the device's range
    assert kernels[0]["access_policy"][1:] == (N * 4, 0.25)
    assert f.latest.executable.built.gdef.options == "use_node_priority"


def test_node_attributes_refuse_bad_values(backend):
    @tg.compile(backend=backend)
    def f(x):
        with tg.node_attributes(hit_ratio=2.0):
            double[2, 8](x)

    with pytest.raises(tg.TraceError, match="hit_ratio"):
        f(np.ones(N, np.float32))


# ---------------------------------------------------------------------------
# misuse of the foreign-kernel and library API

def test_a_declared_write_to_a_read_only_input_is_refused(backend):
    @tg.compile(backend=backend)
    def f(x):
        tg.library(lambda s, x: None, x, writes=[x], sim=lambda x: x.__iadd__(1))

    x = np.ones(4, np.float32)
    x.flags.writeable = False
    with pytest.raises(tg.TraceError, match="read-only"):
        f(x)


def test_an_undeclared_foreign_launch_only_reads_a_read_only_input(backend):
    @tg.compile(backend=backend)
    def f(x):
        tg.launch(_StandIn(), 1, 16, x, sim=lambda x: None, name="axpy")

    x = np.ones(4, np.float32)
    x.flags.writeable = False
    (op,) = [o for o in f.trace(x).ops if o.name == "axpy"]
    assert [a.mode for a in op.accesses] == ["r"]


def test_a_strided_view_to_a_foreign_kernel_is_refused(backend):
    @tg.compile(backend=backend)
    def f(x, y):
        tg.launch(_StandIn(), 1, 16, x[::2], y, sim=lambda x, y: None)

    with pytest.raises(tg.TraceError, match="strided view"):
        f(np.ones(16, np.float32), np.ones(8, np.float32))


def test_reads_and_writes_must_name_arguments(backend):
    @tg.compile(backend=backend)
    def f(x):
        other = tg.zeros(4, np.float32)
        tg.library(lambda s, x: None, x, writes=[other], sim=lambda x: None)

    with pytest.raises(tg.TraceError, match="not one of its arguments"):
        f(np.ones(4, np.float32))


def test_nested_node_attributes_keep_what_the_inner_block_leaves_unset(backend):
    @tg.compile(backend=backend)
    def f(x, table):
        with tg.node_attributes(persist=table, hit_ratio=0.3):
            with tg.node_attributes(priority=-2):
                add_one[2, 8](table, x)
        return x

    x, table = np.zeros(N, np.float32), np.ones(N, np.float32)
    (op,) = [o for o in f.trace(x, table).ops if o.kind == "kernel"]
    a = op.launch.attributes
    assert a.priority == -2 and a.persist is not None and a.hit_ratio == 0.3


@pytest.mark.skipif(ON_GPU, reason="the simulator's and the CPU stand-in's behaviour")
def test_an_exception_in_a_sim_function_is_a_tracegraph_error_on_both(backend):
    @tg.compile(backend=backend)
    def f(x):
        tg.library(lambda s, x: None, x, sim=lambda x: 1 / 0)

    with pytest.raises(tg.TracegraphError, match="ZeroDivisionError") as e:
        f(np.ones(4, np.float32))
    assert not isinstance(e.value, tg.CudaError)


@pytest.mark.fake_platform
def test_a_moved_input_of_a_library_call_is_captured_again_not_copied():
    """The library node uses the caller's array itself: no copies around it, and a move
    sets a fresh capture into the executable (one per move, none when it stays put)."""
    from tracegraph.backends.cuda import platform

    @tg.compile(backend="cuda")
    def f(x, out):
        tg.library(_scale_library, x, out, reads=[x], writes=[out], sim=_scale_sim)

    fake = platform.platform()
    xs = [cuda.to_device(np.full(N, k + 1, np.float32)) for k in range(2)]
    out = cuda.device_array(N, np.float32)
    f(xs[0], out)
    assert [n.kind for n in f.latest.plan.nodes] == ["library"]  # no shadow memcpy nodes
    before = fake.counts["set_child_graph"]
    for k in (0, 1, 1, 0):
        f(xs[k], out)
        np.testing.assert_array_equal(out.copy_to_host(), 3 * (k + 1))
    assert fake.counts["set_child_graph"] - before == 2  # the two moves


def test_a_library_call_given_a_tuple_of_arrays_is_refused(backend):
    lines = []

    @tg.compile(backend=backend)
    def f(x, y):
        out = tg.empty_like(x)
        lines.append(_line())
        tg.library(lambda stream, xs, o: None, (x, y), out, writes=[out],
                   sim=lambda xs, o: None)
        return out

    with pytest.raises(tg.TraceError, match="tuple holding arrays") as e:
        f(np.ones(4, np.float32), np.ones(4, np.float32))
    assert e.value.where == f"{__file__}:{lines[0]}"


@pytest.mark.fake_platform
def test_a_failed_capture_after_a_move_is_retried_on_the_next_call(monkeypatch):
    from tracegraph.backends.cuda.fake import FakePlatform

    @tg.compile(backend="cuda")
    def f(x, out):
        tg.library(_scale_library, x, out, reads=[x], writes=[out], sim=_scale_sim)

    xs = [cuda.to_device(np.full(N, k + 1, np.float32)) for k in range(2)]
    out = cuda.device_array(N, np.float32)
    f(xs[0], out)
    real = FakePlatform.capture_library
    failures = [1]

    def flaky(self, node, args, warm=True):
        if not warm and failures:
            failures.pop()
            raise RuntimeError("no capture this time")
        return real(self, node, args, warm)
    monkeypatch.setattr(FakePlatform, "capture_library", flaky)
    with pytest.raises(tg.CudaError, match="no capture this time"):
        f(xs[1], out)
    f(xs[1], out)  # the same arrays again: captured now, not taken as pointed at
    np.testing.assert_array_equal(out.copy_to_host(), 6)
    f(xs[0], out)
    np.testing.assert_array_equal(out.copy_to_host(), 3)


@pytest.mark.fake_platform
def test_a_library_call_whose_two_arguments_moved_is_captured_again_once():
    """Once, over both new addresses: a capture over the new x and the old out would touch
    an array the caller may have freed (on the H200, CuPy then failed: invalid device)."""
    from tracegraph.backends.cuda import platform
    fake = platform.platform()

    @tg.compile(backend="cuda")
    def f(x, out):
        tg.library(_scale_library, x, out, reads=[x], writes=[out], sim=_scale_sim)
        double[2, 8](out)

    kept = [cuda.to_device(np.ones(N, np.float32)), cuda.device_array(N, np.float32)]
    f(*kept)
    for k in range(3):
        x = cuda.to_device(np.full(N, k + 1, np.float32))
        out = cuda.device_array(N, np.float32)
        kept += [x, out]  # alive: new addresses each time
        before = fake.counts["capture_library"]
        f(x, out)
        assert fake.counts["capture_library"] - before == 1
        np.testing.assert_array_equal(out.copy_to_host(), 6 * (k + 1))
