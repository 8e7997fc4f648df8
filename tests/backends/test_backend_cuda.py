"""The CUDA graph backend: the same behaviours on `sim` and `cuda`, plus what only the
driver has (pointer patching, result buffers, streams, events, callbacks, faults, memory)."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest
from numba import cuda
from small_kernels import add, scale

import tracegraph as tg
from tracegraph import _numba


@cuda.jit
def axpb(x, a, b):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a + b


N = 40


def diamond(backend):
    def step(x, y):
        u, v, out = tg.empty_like(x), tg.empty_like(y), tg.empty_like(x)
        scale[2, 32](x, 2.0, u)
        scale[2, 32](y, 3.0, v)
        add[2, 32](u, v, out)
        return out
    return tg.compile(step, backend=backend)


def to_host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a)


def test_diamond_numpy_in_numpy_out(backend):
    f = diamond(backend)
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(N), rng.standard_normal(N)
    out = f(x, y)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, 2 * x + 3 * y)
    x2 = rng.standard_normal(N)
    out2 = f.replay(x2, y)
    np.testing.assert_allclose(out2, 2 * x2 + 3 * y)
    np.testing.assert_allclose(out, 2 * x + 3 * y)  # the first result did not change


def test_device_inputs_moved_between_replays(backend):
    """A device input at a new address is patched into the graph (or costs nothing if not)."""
    f = diamond(backend)
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal(N) for _ in range(3)]
    y = rng.standard_normal(N)
    dy = cuda.to_device(y)
    dxs = [cuda.to_device(x) for x in xs]
    first = f(dxs[0], dy)
    for k in (1, 2, 0, 0, 2):
        out = f.replay(dxs[k], dy)
        np.testing.assert_allclose(to_host(out), 2 * xs[k] + 3 * y)
    np.testing.assert_allclose(to_host(first), 2 * xs[0] + 3 * y)


def test_held_device_results_are_not_overwritten(backend):
    f = diamond(backend)
    x, y = np.arange(N, dtype=np.float64), np.ones(N)
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    results = [f(dx, dy)]
    for k in range(1, 4):
        dx = cuda.to_device(x + k)
        results.append(f.replay(dx, dy))
    for k, r in enumerate(results):
        np.testing.assert_allclose(to_host(r), 2 * (x + k) + 3 * y)


def test_in_place_chain_writes_the_callers_device_array(backend):
    def chain(x):
        for _ in range(5):
            axpb[2, 32](x, 2.0, 1.0)
        return x

    f = tg.compile(chain, backend=backend)
    x = np.zeros(N)
    dx = cuda.to_device(x)
    out = f(dx)
    assert out is dx
    expect = x
    for _ in range(5):
        expect = expect * 2 + 1
    np.testing.assert_allclose(to_host(dx), expect)
    f.replay(dx)
    for _ in range(5):
        expect = expect * 2 + 1
    np.testing.assert_allclose(to_host(dx), expect)


def test_in_place_chain_writes_the_callers_numpy_array(backend):
    def chain(x):
        axpb[2, 32](x, 3.0, 1.0)
        axpb[2, 32](x, 3.0, 1.0)

    f = tg.compile(chain, backend=backend)
    x = np.ones(N)
    assert f(x) is None
    np.testing.assert_allclose(x, np.full(N, 13.0))


def test_zeros_is_a_memset_every_replay(backend):
    def acc(x):
        total = tg.zeros_like(x)
        add[2, 32](total, x, total)
        add[2, 32](total, x, total)
        return total

    f = tg.compile(acc, backend=backend)
    x = np.arange(N, dtype=np.float32)
    np.testing.assert_allclose(f(x), 2 * x)
    np.testing.assert_allclose(f.replay(x), 2 * x)
    kinds = [n.kind for n in f.lower(x).nodes]
    assert "memset" in kinds


def test_host_callbacks_run_in_program_order(backend):
    """Callbacks on unrelated arrays are still ordered as called: one may rely on host state
    an earlier one left (no access shows that). Several compiles: random valid orders."""
    log = []

    def step(x, y):
        scale[2, 32](x, 2.0, x)
        tg.callback(lambda: log.append("A"), x)
        tg.callback(lambda: log.append("B"), x)
        scale[2, 32](y, 2.0, y)
        tg.callback(lambda: log.append("C"), y)
        tg.callback(lambda: log.append("D"))

    for _ in range(6):
        f = tg.compile(step, backend=backend)
        log.clear()
        f(np.zeros(N), np.zeros(N))
        f.replay(np.zeros(N), np.zeros(N))
        if backend == "cuda":
            cuda.synchronize()
        assert "".join(log) == "ABCDABCD"


def test_host_callback_runs_after_its_producers(backend):
    seen = []
    holder = {}

    def step(x):
        out = tg.empty_like(x)
        scale[2, 32](x, 2.0, out)
        tg.callback(lambda: seen.append("done"), out)
        holder["n"] = 1
        return out

    f = tg.compile(step, backend=backend)
    x = np.arange(N, dtype=np.float64)
    out = f(x)
    np.testing.assert_allclose(out, 2 * x)
    f.replay(x)
    if backend == "cuda":
        cuda.synchronize()
    assert seen == ["done", "done"]
    plan = f.lower(x)
    host = [n for n in plan.nodes if n.kind == "host"]
    assert len(host) == 1 and any(plan.nodes[d].kind == "kernel" for d in host[0].deps)


def test_event_record_and_wait_nodes(backend):
    ev_done = cuda.event()
    ev_ready = cuda.event()

    def step(x):
        out = tg.empty_like(x)
        tg.wait(ev_ready, x)
        scale[2, 32](x, 2.0, out)
        tg.record(ev_done, out)
        return out

    f = tg.compile(step, backend=backend)
    x = np.arange(N, dtype=np.float64)
    ev_ready.record()
    out = f(x)
    np.testing.assert_allclose(out, 2 * x)
    kinds = [n.kind for n in f.lower(x).nodes]
    assert "event_record" in kinds and "event_wait" in kinds
    if backend == "cuda":
        ev_done.synchronize()


def test_stream_argument_orders_after_earlier_work(backend):
    if backend == "sim":
        s = 0
    else:
        s = cuda.stream()
    f = diamond(backend)
    x, y = np.arange(N, dtype=np.float64), np.ones(N)
    dx = cuda.to_device(np.zeros(N), stream=s if backend == "cuda" else 0)
    dx.copy_to_device(x, stream=s if backend == "cuda" else 0)
    out = f(dx, cuda.to_device(y), stream=s)
    if backend == "cuda":
        s.synchronize()
    np.testing.assert_allclose(to_host(out), 2 * x + 3 * y)


def test_driver_dot_dump(gpu):
    f = diamond("cuda")
    f(np.ones(N), np.ones(N))
    dot = tg.visualize(f, source="driver")
    assert "digraph" in dot and dot.count("KERNEL") + dot.count("kernel") >= 3


def test_driver_dot_needs_cuda_backend():
    f = diamond("sim")
    f(np.ones(N), np.ones(N))
    with pytest.raises(tg.TracegraphError, match="cuda backend"):
        tg.visualize(f, source="driver")


def test_compiled_functions_are_freed():
    f = diamond("sim")
    f(np.ones(N), np.ones(N))
    ref = weakref.ref(f)
    exe_ref = weakref.ref(f.latest.executable)
    del f
    gc.collect()
    assert ref() is None and exe_ref() is None


def _free_device_memory():
    free, _ = cuda.current_context().get_memory_info()
    return free


@pytest.mark.gpu_memory
def test_device_memory_flat_over_replays_and_compiles(gpu):
    x, y = cuda.to_device(np.ones(1 << 16)), cuda.to_device(np.ones(1 << 16))
    f = diamond("cuda")
    f(x, y)
    cuda.synchronize()
    gc.collect()
    base = _free_device_memory()
    for _ in range(10_000):
        f.replay(x, y)
    cuda.synchronize()
    gc.collect()
    assert abs(base - _free_device_memory()) <= 4 << 20
    for _ in range(100):
        g = diamond("cuda")
        g(x, y)
        del g
    cuda.synchronize()
    gc.collect()
    assert abs(base - _free_device_memory()) <= 8 << 20


FAULT_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import cuda
    import tracegraph as tg

    @cuda.jit
    def oob(x):
        i = cuda.grid(1)
        x[i + 100000000] = 1.0   # far out of bounds

    @tg.compile(backend="cuda")
    def f(x):
        oob[1, 32](x)
        return x

    try:
        f(np.zeros(32))
    except tg.CudaError as e:
        print("CUDAERROR", e.error_name, "|", e)
    else:
        print("NO ERROR")
""")


def test_kernel_fault_is_a_cuda_error_not_a_hang(gpu):
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-c", FAULT_SCRIPT], capture_output=True, text=True,
                       timeout=120, env=env)
    assert "CUDAERROR" in r.stdout, r.stdout + r.stderr
    assert "oob" in r.stdout, r.stdout  # the message names the kernel


def test_cuda_backend_refuses_cleanly_without_gpu(monkeypatch):
    monkeypatch.delenv("TRACEGRAPH_CUDA_PLATFORM", raising=False)  # not its CPU stand-in
    if _numba.SIMULATOR or not tg.backends.gpu_usable():
        f = diamond("cuda")
        with pytest.raises(tg.TracegraphError, match="backend 'cuda'"):
            f(np.ones(N), np.ones(N))


def test_pinned_numpy_inputs_and_write_back(backend):
    """Page-locked NumPy inputs are copied by the graph directly; pageable ones through
    staging; either way results and write-backs are right, also when they alternate."""
    def step(x, y):
        out = tg.empty_like(x)
        add[2, 32](x, y, out)
        axpb[2, 32](x, 2.0, 0.0)   # writes the caller's x
        return out

    f = tg.compile(step, backend=backend)
    for pinned in (True, False, True):
        x = cuda.pinned_array(N, np.float64) if pinned else np.empty(N)
        x[:] = np.arange(N)
        y = np.ones(N)
        out = f(x, y)
        np.testing.assert_allclose(out, np.arange(N) + 1)
        np.testing.assert_allclose(x, 2 * np.arange(N))


def test_held_numpy_results_and_their_views_stay_unchanged(backend):
    f = diamond(backend)
    y = np.ones(N)
    first = f(np.zeros(N), y)
    view = f.replay(np.ones(N), y)[:5]
    results = [f.replay(np.full(N, k, np.float64), y) for k in range(2, 5)]
    np.testing.assert_allclose(first, 3 * y)
    np.testing.assert_allclose(view, 2 + 3 * y[:5])
    for k, r in enumerate(results, start=2):
        np.testing.assert_allclose(r, 2 * k + 3 * y)


CALLBACK_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import cuda
    import tracegraph as tg

    @cuda.jit
    def scale(x, a, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i]

    def bad_callback():
        cuda.to_device(np.ones(4))  # CUDA work inside a host node: not allowed

    @tg.compile(backend="cuda")
    def f(x):
        out = tg.empty_like(x)
        scale[1, 32](x, 2.0, out)
        tg.callback(bad_callback, out)
        return out

    try:
        f(np.ones(32))
    except tg.TracegraphError as e:
        print("REPORTED", "|", e)
    else:
        print("NOT REPORTED")
""")


def test_callback_calling_cuda_is_reported(gpu):
    r = subprocess.run([sys.executable, "-c", CALLBACK_SCRIPT], capture_output=True, text=True,
                       timeout=90, env=dict(os.environ))
    assert "REPORTED" in r.stdout, r.stdout + r.stderr
    assert "must not call CUDA" in r.stdout and "bad_callback" in r.stdout


# ---------------------------------------------------------------------------
# the CPU stand-in of the platform sees what the backend does (no GPU needed)

def _fake():
    from tracegraph.backends.cuda import platform
    return platform.platform()


def _moving_reader():
    @tg.compile(backend="cuda")
    def step(x):
        out = tg.empty((3, N))
        for k in range(3):
            scale[1, N](x, float(k + 1), out[k])
        return out
    return step


@pytest.mark.fake_platform
def test_the_fake_platform_counts_one_patch_per_node_using_a_moved_input():
    fake = _fake()
    step = _moving_reader()
    xs = [cuda.to_device(np.arange(N, dtype=np.float64) + k) for k in range(2)]
    step(xs[0])
    before = dict(fake.counts)
    out = step(xs[1])
    assert fake.counts["kernel_patch"] - before.get("kernel_patch", 0) == 3  # three kernel nodes read x
    np.testing.assert_array_equal(out.copy_to_host(), np.outer([1, 2, 3], xs[1].copy_to_host()))
    before = fake.counts["kernel_patch"]
    step(xs[1])  # `out` is still held: the result moves to another allocation, 3 patches
    assert fake.counts["kernel_patch"] - before == 3
    del out
    before = fake.counts["kernel_patch"]
    step(xs[1])
    assert fake.counts["kernel_patch"] == before  # an unchanged pointer costs nothing


@pytest.mark.fake_platform
def test_the_fake_platform_catches_a_broken_re_point(monkeypatch):
    """Mutation check: with re-pointing disabled, replays read the compiling call's array."""
    _fake()
    from tracegraph.backends.cuda import replay
    monkeypatch.setattr(replay.Replayer, "_patch", lambda *a, **k: None)
    step = _moving_reader()
    xs = [cuda.to_device(np.arange(N, dtype=np.float64) + k) for k in range(2)]
    step(xs[0])
    stale = step(xs[1]).copy_to_host()
    assert np.array_equal(stale, np.outer([1, 2, 3], xs[0].copy_to_host()))  # wrong, and seen


# ---------------------------------------------------------------------------
# replay_same: a call with the very objects of the last one launches directly

def _direct_launches(f):
    return [e.executable for e in f.compiled if getattr(e.executable, "armed", None)]


def test_same_objects_replay_directly_and_stay_correct(backend):
    @tg.compile(backend=backend)
    def step(x):
        axpb[2, 32](x, 2.0, 1.0)

    xs = [cuda.to_device(np.arange(N, dtype=np.float64) + 10 * k) for k in range(2)]
    want = [to_host(x) for x in xs]
    for k in [0, 0, 0, 1, 1, 0, 1, 0, 0]:  # runs of one array and ping-pong between two
        step(xs[k])
        want[k] = want[k] * 2 + 1
        for j in range(2):
            np.testing.assert_array_equal(to_host(xs[j]), want[j])
    info = step.cache_info()
    assert info.graphs == 1 and sum(info.hits.values()) == 8
    if backend == "cuda":
        assert _direct_launches(step)


def test_direct_replays_keep_held_results(backend):
    @tg.compile(backend=backend)
    def step(x):
        out = tg.empty_like(x)
        axpb[2, 32](x, 1.0, 1.0)  # x += 1 in place, then out = 2 x
        scale[2, 32](x, 2.0, out)
        return out

    x = cuda.to_device(np.zeros(N))
    held = [step(x) for _ in range(4)]
    for k, out in enumerate(held):
        np.testing.assert_array_equal(to_host(out), 2.0 * (k + 1))


def test_a_call_on_another_stream_stays_ordered_with_the_default_stream_s(
        backend):
    @tg.compile(backend=backend)
    def step(x):
        axpb[2, 32](x, 2.0, 1.0)

    x0, x1 = cuda.to_device(np.zeros(N)), cuda.to_device(np.ones(N))
    step(x0)
    step(x0)
    step(x1, stream=cuda.stream() if backend == "cuda" else None)  # moved: re-pointed
    cuda.synchronize()
    step(x0)
    np.testing.assert_array_equal(to_host(x0), 7)
    np.testing.assert_array_equal(to_host(x1), 3)


def test_direct_replays_after_clear_and_between_threads(backend):
    import threading

    @tg.compile(backend=backend)
    def step(x):
        axpb[2, 32](x, 1.0, 1.0)

    xs = [cuda.to_device(np.zeros(N)) for _ in range(4)]
    step(xs[0])
    step.clear()
    step(xs[0])
    step(xs[0])
    np.testing.assert_array_equal(to_host(xs[0]), 3)

    def worker(x):
        for _ in range(25):
            step(x)
    threads = [threading.Thread(target=worker, args=(x,)) for x in xs[1:]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for x in xs[1:]:
        np.testing.assert_array_equal(to_host(x), 25)


def test_a_direct_replay_raises_a_failed_callback(backend):
    calls = []

    def boom():
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("second call")

    @tg.compile(backend=backend)
    def step(x):
        axpb[2, 32](x, 1.0, 1.0)
        tg.callback(boom, x)

    x = cuda.to_device(np.zeros(N))
    step(x)
    with pytest.raises(tg.TracegraphError, match="second call"):  # then, or on the next call
        step(x)
        cuda.synchronize()
        step(x)
    assert len(calls) == 2


@pytest.mark.fake_platform
def test_each_instantiated_or_updated_executable_is_uploaded():
    fake = _fake()
    before = fake.counts.get("upload", 0)
    f = diamond("cuda")
    x = cuda.to_device(np.ones(N))
    f(x, x)
    assert fake.counts["upload"] == before + 1
    g = tg.compile(lambda x: (axpb[1, N](x, 2.0, 1.0), x)[1], backend="cuda",
                   dynamic={"x": 0}, buckets=(N // 2, N), max_graphs=1)
    g(cuda.to_device(np.ones(N)))
    g(cuda.to_device(np.ones(N // 2)))  # the same topology: updated in place, uploaded
    assert g.cache_info().updates == 1
    assert fake.counts["upload"] == before + 3


def test_an_armed_function_called_inside_another_trace_joins_it(backend):
    @tg.compile(backend=backend)
    def inner(w):
        axpb[2, 32](w, 1.0, 1.0)

    w = cuda.to_device(np.zeros(N))
    inner(w)
    inner(w)  # armed on w

    @tg.compile(backend=backend)
    def outer(x):
        inner(w)  # traced into outer: nothing may run while tracing
        axpb[2, 32](x, 1.0, 1.0)
        return x

    x = cuda.to_device(np.zeros(N))
    outer(x)
    np.testing.assert_array_equal(to_host(w), 3)
    outer(x)
    np.testing.assert_array_equal(to_host(w), 4)
    assert [op.name for op in outer.latest.program.ops if op.kind == "kernel"] == \
        ["axpb", "axpb"]


def test_direct_replays_with_moved_arrays_keep_the_signature(backend):
    """Other device arrays of the same signature are re-pointed on the direct path; one
    sharing memory with another argument, or of other strides, is another signature."""
    @tg.compile(backend=backend)
    def step(x, y):
        add[2, 32](x, y, y)  # y = x + y

    def fresh_pair(k):
        return (cuda.to_device(np.full(N, float(k))), cuda.to_device(np.ones(N)))

    pairs = [fresh_pair(k) for k in range(3)]
    for k in [0, 1, 2, 1, 0, 0]:
        step(*pairs[k])
    want = {0: 1 + 3 * 0.0, 1: 1 + 2 * 1.0, 2: 1 + 1 * 2.0}
    for k, (_, y) in enumerate(pairs):
        np.testing.assert_array_equal(to_host(y), want[k])
    assert step.cache_info().graphs == 1
    x = cuda.to_device(np.full(N, 2.0))
    step(x, x)  # aliasing: y = x + y on one array
    np.testing.assert_array_equal(to_host(x), 4.0)
    wide = cuda.to_device(np.ones(2 * N))
    step(pairs[0][0], wide[::2])  # other strides
    np.testing.assert_array_equal(to_host(wide)[::2], 1.0)
    np.testing.assert_array_equal(to_host(wide)[1::2], 1.0)
    assert step.cache_info().graphs == 3


# ---------------------------------------------------------------------------
# several GPUs: the device is part of the signature

@pytest.fixture
def fake_devices(monkeypatch):
    """Simulated device arrays on the GPUs this dict names (id of the array -> ordinal)."""
    from tracegraph.signature import arguments
    on: dict[int, int] = {}
    monkeypatch.setattr(arguments, "simulated_device", lambda obj: on.get(id(obj), 0))
    if not _numba.SIMULATOR:
        pytest.skip("simulated device arrays stand on made-up GPUs")
    return on


def test_device_arrays_on_two_gpus_are_a_signature_error(backend, fake_devices):
    f = diamond(backend)
    x, y = cuda.to_device(np.ones(N)), cuda.to_device(np.ones(N))
    fake_devices[id(y)] = 1
    with pytest.raises(tg.SignatureError, match=r"x on GPU 0; y on GPU 1"):
        f(x, y)


def test_one_executable_per_gpu(backend, fake_devices):
    f = diamond(backend)
    a = [cuda.to_device(np.full(N, float(k))) for k in range(4)]
    fake_devices[id(a[2])] = fake_devices[id(a[3])] = 1
    for _ in range(2):
        np.testing.assert_array_equal(to_host(f(a[0], a[1])), 3.0)
        np.testing.assert_array_equal(to_host(f(a[2], a[3])), 13.0)
    assert f.cache_info().graphs == 2
    if backend == "cuda":
        from tracegraph.backends.cuda import platform
        devices = sorted(e.executable.device for e in f.compiled)
        assert devices == [0, 1]
        assert {e.executable.platform for e in f.compiled} == {platform.platform(0),
                                                              platform.platform(1)}


def test_a_replay_on_another_gpu_says_so(backend, fake_devices):
    @tg.compile(backend=backend)
    def f(x):
        axpb[1, 32](x, 2.0, 1.0)

    x0, x1 = cuda.to_device(np.ones(8)), cuda.to_device(np.ones(8))
    fake_devices[id(x1)] = 1
    f(x0)
    with pytest.raises(tg.SignatureError, match="argument x: on GPU 1 here, on GPU 0"):
        f.replay(x1)

    @tg.compile(backend=backend)
    def g(x, y):
        axpb[1, 32](x, 2.0, 1.0)
        axpb[1, 32](y, 2.0, 1.0)

    g(x0, cuda.to_device(np.ones(8)))
    with pytest.raises(tg.SignatureError, match="x on GPU 0; y on GPU 1"):
        g.replay(x0, x1)


@pytest.mark.fake_platform
def test_a_failed_re_point_is_retried_on_the_next_call(monkeypatch):
    from tracegraph.backends.cuda import fake_graph
    step = _moving_reader()
    xs = [cuda.to_device(np.arange(N, dtype=np.float64) + k) for k in range(2)]
    step(xs[0])
    real = fake_graph.FakeKernelPatch.apply
    failures = [1]

    def flaky(self, slots, base):
        if failures:
            failures.pop()
            raise RuntimeError("CUDA_ERROR_INVALID_VALUE")
        return real(self, slots, base)
    monkeypatch.setattr(fake_graph.FakeKernelPatch, "apply", flaky)
    with pytest.raises(tg.CudaError):
        step(xs[1])
    out = step(xs[1])  # re-pointed now: not taken for pointed at xs[1] already
    np.testing.assert_array_equal(out.copy_to_host(), np.outer([1, 2, 3], xs[1].copy_to_host()))


@pytest.mark.fake_platform
def test_simulated_ranks_on_two_gpus_run_the_cuda_backend(fake_devices):
    """Each rank's graph on its own (made-up) GPU, with its own stream: a collective in
    one rank's launch waits for the other rank's, as NCCL ranks in two processes do."""
    import threading

    @tg.compile(backend="cuda")
    def step(x, comm):
        axpb[2, 32](x, 2.0, 0.0)
        tg.allreduce(x, comm=comm)
        axpb[2, 32](x, 1.0, 1.0)
        return x

    comms = tg.sim_group(2, timeout=30)
    xs = [cuda.to_device(np.full(N, float(r + 1))) for r in range(2)]
    fake_devices[id(xs[1])] = 1
    errors = []

    def rank(r):
        try:
            for _ in range(2):
                step(xs[r], comms[r])
        except BaseException as exc:  # reported below
            errors.append(exc)
    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    for x in xs:  # (2 + 4) + 1 = 7, then (14 + 14) + 1 = 29 on both
        np.testing.assert_array_equal(to_host(x), 29.0)
    assert sorted(e.executable.device for e in step.compiled) == [0, 1]


def test_replays_launch_through_the_c_helper_where_it_is_built(gpu, monkeypatch):
    """setup.py builds backends/cuda/_graphlaunch.c (the GPU scripts build it in place);
    replays on the default stream launch through it, with TRACEGRAPH_C_LAUNCH=0 through
    cuda.core, with the same results."""
    from tracegraph.backends.cuda.platform import _c_launch
    assert _c_launch() is not None, "build it: python setup.py build_ext --inplace"
    for flag in ("1", "0"):
        monkeypatch.setenv("TRACEGRAPH_C_LAUNCH", flag)
        x, y = cuda.to_device(np.arange(N, dtype=np.float64)), cuda.to_device(np.ones(N))
        f = diamond("cuda")
        want = None
        for _ in range(3):
            got = f.replay(x, y) if want is not None else f(x, y)
            want = got.copy_to_host() if want is None else want
            np.testing.assert_array_equal(got.copy_to_host(), want)
        launcher = f.compiled[0].executable._launcher[1]
        c_launch = getattr(launcher, "func", None)  # (a partial of the C launch, or not)
        assert (getattr(c_launch, "__module__", "") or "").endswith("_graphlaunch") \
            == (flag == "1")


@pytest.mark.fake_platform
def test_a_graph_s_default_stream_launcher_is_made_once_and_remade_after_a_rebuild():
    fake = _fake()
    step = _moving_reader()
    x = cuda.to_device(np.arange(N, dtype=np.float64))
    step(x)
    before = dict(fake.counts)
    for _ in range(5):
        step.replay(x)
    assert fake.counts["launch"] - before.get("launch", 0) == 5
    assert fake.counts["graph_launcher"] == before.get("graph_launcher", 0)
    exe = step.compiled[0].executable
    exe.builder.instantiate(exe.built)  # a new instantiated graph: a new launcher
    out = step.replay(x)
    assert fake.counts["graph_launcher"] == before.get("graph_launcher", 0) + 1
    np.testing.assert_array_equal(out.copy_to_host(), np.outer([1, 2, 3], x.copy_to_host()))


@cuda.jit
def _invert(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = ~a


@pytest.mark.parametrize("value", [np.bool_(True), np.bool_(False)])
def test_a_numpy_bool_scalar_argument_is_a_bool_in_the_kernel(backend, value):
    """~np.bool_(True) is False, as eagerly (the CPU stand-in handed a Python bool: -2)."""
    @tg.compile(backend=backend)
    def step(a):
        out = tg.empty(1)
        _invert[1, 1](a, out)
        return out

    np.testing.assert_array_equal(step(value), [float(not value)])


@pytest.mark.fake_platform
def test_calls_on_the_caller_s_stream_take_the_direct_path():
    """The same objects on the same stream: no argument analysis, one launcher made for the
    stream (then reused), results as eager."""
    fake = _fake()

    @tg.compile(backend="cuda")
    def step(x):
        axpb[2, 32](x, 2.0, 1.0)

    x, s = cuda.to_device(np.zeros(N)), cuda.stream()
    step(x, stream=s)
    before = dict(fake.counts)
    for _ in range(5):
        step(x, stream=s)
    np.testing.assert_array_equal(to_host(x), 63)
    assert step.cache_info().hits.get(0, 0) == 5  # all five direct
    assert fake.counts["graph_launcher"] - before.get("graph_launcher", 0) <= 1


@pytest.mark.fake_platform
def test_ping_pong_arrays_are_described_once_on_the_direct_path(monkeypatch):
    from tracegraph.backends.cuda import executable
    described = []
    real = executable.describe
    monkeypatch.setattr(executable, "describe", lambda a: described.append(1) or real(a))

    @tg.compile(backend="cuda")
    def step(x):
        axpb[2, 32](x, 2.0, 1.0)

    xs = [cuda.to_device(np.zeros(N)) for _ in range(2)]
    step(xs[0])
    for k in range(10):
        step(xs[(k + 1) & 1])
    assert len(described) <= 2
    np.testing.assert_array_equal(to_host(xs[0]), 63)  # 2x + 1 from 0, six times
    np.testing.assert_array_equal(to_host(xs[1]), 31)  # five times
