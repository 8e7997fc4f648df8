"""numba-cuda's host API inside a traced function, row by row of the table in docs/api.md
("Numba's host API inside a traced function"): what is recorded as a node gives eager
Numba's results on every call, what runs at trace time runs, and what is refused is a
tg.TraceError at the user's line naming the call and the fix. Rows the simulator lacks
run where a GPU is usable. (Ufuncs: test_cuda_ufuncs.py; assignment:
test_host_assignment.py.)"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from eager import fresh, host, matches_eager, to_device
from numba import cuda
from small_kernels import add, iscale, scale

import tracegraph as tg
from tracegraph import _numba
from tracegraph.signature import arguments

N = 8
GRID, BLOCK = 1, N
CAPTURED = cuda.to_device(np.arange(N, dtype=np.float64))
HOST = np.linspace(0.0, 1.0, N)

if _numba.SIMULATOR:
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray as DeviceArray
else:
    from numba.cuda.cudadrv.devicearray import DeviceNDArray as DeviceArray


def _x():
    return np.arange(N, dtype=np.float64) + 1


def _refused(backend, step, *names, args=None):
    """step raises a TraceError at this file's line that names each of `names`."""
    with pytest.raises(tg.TraceError) as e:
        tg.compile(step, backend=backend)(*(args or (cuda.to_device(_x()),)))
    assert e.value.where.startswith(__file__), e.value
    assert e.value.fix, e.value
    for name in names:
        assert name in str(e.value), (name, str(e.value))
    return e.value


def _needs(name):
    if not hasattr(cuda, name):
        pytest.skip(f"Numba's simulator has no cuda.{name}")


# ---------------------------------------------------------------------------
# memory

def test_device_arrays_made_inside_are_graph_owned(backend, monkeypatch):
    def step(x):
        c = cuda.device_array((N,), np.float64)
        f = cuda.device_array((2, 4), np.float64, order="F")
        like = cuda.device_array_like(f)
        assert f.strides == like.strides == (8, 16)
        scale[GRID, BLOCK](x, 2.0, c)
        scale[GRID, BLOCK](c, 0.5, f.T.ravel())  # (f.T: a copy on a GPU, a view here)
        return c

    matches_eager(step, lambda: to_device((_x(),)), backend, monkeypatch=monkeypatch)


def test_device_array_with_strides_is_refused(backend):
    def step(x):
        cuda.device_array(N, strides=(8,))
        return x

    _refused(backend, step, "cuda.device_array", "strides")


def test_to_device_copies_on_every_replay_and_keeps_device_arrays(backend, monkeypatch):
    def step(x):
        h = cuda.to_device(HOST)          # a memcpy node from HOST's current contents
        same = cuda.to_device(x)          # a device array comes back as it is (on a GPU)
        dst = cuda.device_array(N)
        cuda.to_device(HOST, to=dst)      # into an array
        out = cuda.device_array(N)
        add[GRID, BLOCK](h, dst, out)
        add[GRID, BLOCK](out, same, out)
        return out

    f = matches_eager(step, lambda: to_device((_x(),)), backend, monkeypatch=monkeypatch)
    HOST[:] += 1.0
    try:
        np.testing.assert_array_equal(host(f(cuda.to_device(_x()))),
                                      host(step(cuda.to_device(_x()))))
    finally:
        HOST[:] -= 1.0


def test_copy_to_device_of_traced_and_captured_arrays(backend, monkeypatch):
    def step(x):
        y = cuda.device_array_like(x)
        y.copy_to_device(x)               # device to device
        CAPTURED.copy_to_device(HOST)     # host into a captured array
        z = cuda.device_array_like(x)
        z.copy_to_device(CAPTURED)
        return y, z

    matches_eager(step, lambda: to_device((_x(),)), backend, monkeypatch=monkeypatch)
    CAPTURED.copy_to_device(np.arange(N, dtype=np.float64))


@pytest.mark.parametrize("name", ["pinned_array", "pinned_array_like", "mapped_array",
                                  "mapped_array_like", "managed_array", "mapped"])
def test_host_and_mapped_allocations_are_refused(backend, name):
    _needs(name)
    arg = HOST if name in ("pinned_array_like", "mapped_array_like", "mapped") else N

    def step(x):
        made = getattr(cuda, name)(arg)
        if hasattr(made, "__enter__"):
            with made:
                pass
        return x

    _refused(backend, step, f"cuda.{name}")


def test_pinned_runs_at_trace_time(backend, monkeypatch):
    def step(x):
        with cuda.pinned(HOST):
            h = cuda.to_device(HOST)
        out = cuda.device_array_like(x)
        add[GRID, BLOCK](x, h, out)
        return out

    matches_eager(step, lambda: to_device((_x(),)), backend, monkeypatch=monkeypatch)


def test_random_states(backend, monkeypatch):
    from numba.cuda.random import create_xoroshiro128p_states, xoroshiro128p_uniform_float64

    @cuda.jit
    def draw(states, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = xoroshiro128p_uniform_float64(states, i)

    def step(x):
        states = create_xoroshiro128p_states(N, seed=3)
        out = cuda.device_array_like(x)
        draw[GRID, BLOCK](states, out)
        return out

    prog = tg.compile(step, backend=backend).trace(cuda.to_device(_x()))
    assert "memcpy" in [op.kind for op in prog.ops]  # the states, refilled on every replay
    matches_eager(step, lambda: to_device((_x(),)), backend, monkeypatch=monkeypatch)


# ---------------------------------------------------------------------------
# code that checks for device arrays

def _as_device(a):
    """What libraries do: keep device arrays, copy host ones."""
    if isinstance(a, DeviceArray) and cuda.devicearray.is_cuda_ndarray(a):
        return a
    if cuda.is_cuda_array(a):
        return cuda.as_cuda_array(a)
    raise TypeError("expected a device array")  # the host path a traced array must not take


def test_traced_arrays_pass_device_array_checks(backend, monkeypatch):
    seen = []

    def step(x):
        y = _as_device(x)
        out = _as_device(cuda.device_array_like(y))
        seen.append((isinstance(x, DeviceArray), cuda.is_cuda_array(x),
                     cuda.devicearray.is_cuda_ndarray(x), cuda.as_cuda_array(x) is x,
                     isinstance(x, np.ndarray), type(x) is tg.Array))
        scale[GRID, BLOCK](y, 3.0, out)
        return out

    matches_eager(step, lambda: to_device((_x(),)), backend, monkeypatch=monkeypatch)
    assert seen[-1] == (True, True, True, True, False, True)
    # for NumPy arguments too: a traced array is a device array inside the graph
    f = tg.compile(step, backend=backend)
    np.testing.assert_array_equal(f(_x()), 3.0 * _x())
    assert seen[-1][:4] == (True, True, True, True)


def test_tracegraph_still_tells_traced_arrays_from_device_arrays(backend):
    def step(x):
        assert arguments.describe(x) is None and not _numba.is_simulated_device_array(x)
        y = cuda.device_array_like(x)
        scale[GRID, BLOCK](x, 2.0, y)
        return y, x

    y, x = tg.compile(step, backend=backend)(cuda.to_device(_x()))
    assert type(y) is type(x) is not tg.Array and isinstance(y, DeviceArray)


# ---------------------------------------------------------------------------
# device array methods

def test_metadata_and_views_run_at_trace_time(backend, monkeypatch):
    def step(m):
        # (no m.itemsize: numba-cuda's DeviceNDArray has none on a GPU)
        assert (m.shape, m.ndim, m.size, m.dtype.itemsize, m.nbytes, len(m)) == \
            ((2, N), 2, 2 * N, 8, 16 * N, 2)
        assert m.is_c_contiguous() and not m.is_f_contiguous()
        flat = m.ravel()
        first, second = flat.split(N)
        # (no Ellipsis or None index: numba-cuda refuses both on a GPU, eagerly)
        row = m[1:, :].squeeze().view(np.int64).view(np.float64)
        out = cuda.device_array(N).bind(0)
        add[GRID, BLOCK](first, row, out)
        add[GRID, BLOCK](out, second.reshape(N), out)
        return out, m.T

    matches_eager(step, lambda: to_device((np.arange(2.0 * N).reshape(2, N),)), backend,
                  monkeypatch=monkeypatch)


def test_ravel_of_a_non_contiguous_array_is_numbas_not_implemented(backend):
    def step(m):
        m[:, ::2].ravel()
        return m

    e = _refused(backend, step, "non-contiguous", args=(cuda.to_device(np.ones((2, N))),))
    assert isinstance(e, NotImplementedError)  # what Numba's device arrays raise


@pytest.mark.parametrize("read", ["element", "copy_to_host", "asarray", "tolist", "item",
                                  "float", "iterate"])
@pytest.mark.parametrize("which", ["traced", "captured"])
def test_reading_data_on_the_host_is_refused(backend, read, which):
    names = {"element": "element", "copy_to_host": "copy_to_host", "asarray": "asarray",
             "tolist": "tolist", "item": "item", "float": "float", "iterate": "iterat"}

    def step(x):
        a = x if which == "traced" else CAPTURED
        if read == "element":
            float(a[0])
        elif read == "copy_to_host":
            a.copy_to_host()
        elif read == "asarray":
            np.asarray(a)
        elif read == "tolist":
            a.tolist()
        elif read == "item":
            a[0:1].item()
        elif read == "float":
            float(a[0:1])
        else:
            list(a)
        return x

    if which == "captured" and read == "float":
        pytest.skip("float() of a Numba device array is a TypeError, eagerly too")
    if which == "captured" and read in ("tolist", "item") and not hasattr(CAPTURED, read):
        pytest.skip(f"Numba's device arrays have no {read}() (the simulator's have)")
    if which == "captured":
        names.update(element="reading an element", iterate="reading an element",
                     asarray="__array")
    _refused(backend, step, names[read])


@pytest.mark.parametrize("name", ["gpu_data", "device_ctypes_pointer", "get_ipc_handle",
                                  "__cuda_array_interface__"])
def test_device_memory_of_a_traced_array_is_refused(backend, name):
    def step(x):
        getattr(x, name)
        return x

    _refused(backend, step, name if name != "__cuda_array_interface__" else "device memory")


# ---------------------------------------------------------------------------
# streams, events, synchronization

def test_streams_and_synchronization_run_at_trace_time(backend, monkeypatch):
    def step(x):
        s = cuda.stream()
        with s.auto_synchronize():
            out = cuda.device_array_like(x)
            scale[GRID, BLOCK, s](x, 2.0, out)
        s.synchronize()
        cuda.synchronize()
        cuda.default_stream().synchronize()
        return out

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "a stream given to")
        matches_eager(step, lambda: to_device((_x(),)), backend, monkeypatch=monkeypatch)
    with pytest.warns(UserWarning, match="a stream given to scale inside a traced function"):
        tg.compile(step, backend=backend)(cuda.to_device(_x()))


def test_event_record_and_wait_are_event_nodes(backend, monkeypatch):
    done, ready = cuda.event(), cuda.event()

    def step(x):
        out = cuda.device_array_like(x)
        scale[GRID, BLOCK](x, 2.0, out)
        done.record()
        ready.wait()
        iscale[GRID, BLOCK](out, 3.0)
        return out

    prog = tg.compile(step, backend=backend).trace(cuda.to_device(_x()))
    assert [op.kind for op in prog.ops] == ["kernel", "event_record", "event_wait", "kernel"]
    assert all(op.location.startswith(__file__) for op in prog.ops)
    matches_eager(step, lambda: to_device((_x(),)), backend, monkeypatch=monkeypatch)


@pytest.mark.parametrize("call", ["synchronize", "query", "elapsed_time",
                                  "event_elapsed_time"])
def test_reading_events_is_refused(backend, call):
    a, b = cuda.event(), cuda.event()
    if call == "query" and not hasattr(a, "query"):
        pytest.skip("Numba's simulator events have no query()")
    if call == "event_elapsed_time":
        _needs(call)

    def step(x):
        if call == "event_elapsed_time":
            cuda.event_elapsed_time(a, b)
        else:
            args = (b,) if call == "elapsed_time" else ()
            getattr(a, call)(*args)
        return x

    _refused(backend, step, call)


@pytest.mark.parametrize("call", ["add_callback", "async_done"])
def test_stream_callbacks_are_refused(backend, call):
    s = cuda.stream()
    if not hasattr(s, call):
        pytest.skip(f"Numba's simulator streams have no {call}()")

    def step(x):
        getattr(s, call)(*((lambda *_: None,) if call == "add_callback" else ()))
        return x

    _refused(backend, step, call, "tg.callback" if call == "add_callback" else "")


# ---------------------------------------------------------------------------
# devices, contexts, compilation, profiling

@pytest.mark.parametrize("call", ["select_device", "close", "open_ipc_array"])
def test_device_and_context_changes_are_refused(backend, call):
    _needs(call)

    def step(x):
        getattr(cuda, call)(*((0,) if call == "select_device" else
                              (None, (N,), np.float64) if call == "open_ipc_array" else ()))
        return x

    _refused(backend, step, f"cuda.{call}")


def test_device_queries_and_compilation_run_at_trace_time(backend, monkeypatch):
    def step(x):
        assert cuda.is_available() and cuda.get_current_device() is not None
        assert len(cuda.list_devices()) >= 1 and len(cuda.gpus) >= 1
        assert cuda.current_context() is not None
        with cuda.defer_cleanup():
            pass

        @cuda.jit
        def triple(a):
            i = cuda.grid(1)
            if i < a.size:
                a[i] *= 3

        out = cuda.device_array_like(x)
        scale[GRID, BLOCK](x, 1.0, out)
        triple[GRID, BLOCK](out)
        return out

    matches_eager(step, lambda: to_device((_x(),)), backend, monkeypatch=monkeypatch)


def test_profiling_runs_at_trace_time(backend, monkeypatch):
    _needs("profile_start")

    def step(x):
        cuda.profile_start()
        out = cuda.device_array_like(x)
        scale[GRID, BLOCK](x, 2.0, out)
        cuda.profile_stop()
        return out

    matches_eager(step, lambda: to_device((_x(),)), backend, monkeypatch=monkeypatch)


def test_from_cuda_array_interface_is_captured(backend, monkeypatch):
    _needs("from_cuda_array_interface")

    def step(x):
        view = cuda.from_cuda_array_interface(CAPTURED.__cuda_array_interface__,
                                              owner=CAPTURED)
        out = cuda.device_array_like(x)
        add[GRID, BLOCK](x, view, out)
        return out

    matches_eager(step, lambda: to_device((_x(),)), backend, monkeypatch=monkeypatch)


TABLE = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0])


@cuda.jit
def add_table(x, out):
    t = cuda.const.array_like(TABLE)
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + t[i]


def test_const_arrays_are_compiled_in(backend, monkeypatch):
    def step(x):
        out = cuda.device_array_like(x)
        add_table[GRID, BLOCK](x, out)
        return out

    matches_eager(step, fresh(_x()), backend, monkeypatch=monkeypatch)
