"""A second hostile round on the access analysis (each case failed before its fix): slices
the analysis cannot see used as indexes (a view, not an element), @overload implementations
(Numba compiles what the overload returns, not the stub), a global device function rebound
between traces, keyword calls past a skipped default on the simulator, and device-array
methods of a traced array inside the traced function."""
from __future__ import annotations

import numpy as np
import pytest
from eager import matches_eager
from numba import cuda
from numba.extending import overload
from small_kernels import copy, fill

import tracegraph as tg

N = 8


def _mode_of(prog, kernel, buffer_pred):
    op = next(op for op in prog.ops if op.name == kernel.py_func.__name__)
    return "".join(("r" if a.reads else "") + ("w" if a.writes else "")
                   for a in op.accesses if buffer_pred(prog.buffers[a.buffer]))


# ---------------------------------------------------------------------------------------
# 1. A slice the analysis cannot see (a device-function parameter or result, a member of a
#    tuple of slices) is counted as an integer index: `a[s]` on a 1-D array is taken for an
#    element (a read), so stores through the view `a[s][j] = v` are lost.
#    All five kernels are GPU-compilable.

@cuda.jit(device=True)
def _zero_part(a, part, j):
    sub = a[part]
    sub[j] = 0.0


@cuda.jit
def slice_passed_to_device_function(x):
    i = cuda.grid(1)
    if i < 4:
        _zero_part(x, slice(4, 8), i)


@cuda.jit(device=True)
def _upper_half(n):
    return slice(n // 2, n)


@cuda.jit
def slice_returned_by_device_function(x):
    i = cuda.grid(1)
    if i < 4:
        hi = x[_upper_half(x.size)]
        hi[i] = 0.0


PARTS = (slice(0, 4), slice(4, 8))


@cuda.jit
def slice_from_global_tuple(x):
    i = cuda.grid(1)
    if i < 4:
        x[PARTS[1]][i] = 0.0


@cuda.jit
def slice_from_local_tuple(x):
    i = cuda.grid(1)
    if i < 4:
        parts = (slice(0, 4), slice(4, 8))
        x[parts[1]][i] = 0.0


@cuda.jit
def slice_from_loop_over_tuple(x):
    i = cuda.grid(1)
    if i < 4:
        for s in (slice(0, 4), slice(4, 8)):
            x[s][i] = 0.0


SLICE_KERNELS = [slice_passed_to_device_function, slice_returned_by_device_function,
                 slice_from_global_tuple, slice_from_local_tuple, slice_from_loop_over_tuple]


@pytest.mark.parametrize("kernel", SLICE_KERNELS, ids=lambda k: k.py_func.__name__)
def test_store_through_view_made_by_an_unseen_slice(backend, monkeypatch, kernel):
    """`a[s][j] = v`, s a slice from a device function's parameter or result, or a tuple."""
    def step(x, out):
        fill[1, N](x, 3.0)
        kernel[1, N](x)          # writes x[4:8] through a view
        copy[1, N](x, out)
        return out

    def make():
        return cuda.to_device(np.zeros(N)), cuda.to_device(np.ones(N))

    f = matches_eager(step, make, backend, monkeypatch=monkeypatch)
    if f is not None:
        assert "w" in _mode_of(f.trace(*make()), kernel, lambda _: True)


# ---------------------------------------------------------------------------------------
# 2. @overload(stub, target="cuda"): the analysis follows the Python stub (which raises),
#    not the CUDA implementation that Numba compiles into the kernel. GPU-compilable;
#    on sim the stub itself would run, so this shows only in the recorded accesses.

MARKS = cuda.to_device(np.zeros(N))


def mark(i):
    """Python stub; the CUDA implementation is the overload below."""
    raise NotImplementedError("only in CUDA kernels")


@overload(mark, target="cuda")
def _mark_cuda(i):
    def impl(i):
        MARKS[i] = 1.0
    return impl


@cuda.jit
def marks_through_an_overload(out):
    i = cuda.grid(1)
    if i < out.size:
        mark(i)


def test_overload_implementation_store_to_a_captured_array_is_recorded(backend):
    """An @overload(target='cuda') implementation that stores to a captured global."""
    def step(out):
        marks_through_an_overload[1, N](out)
        copy[1, N](MARKS, out)
        return out

    prog = tg.compile(step, backend=backend).trace(cuda.to_device(np.zeros(N)))
    assert "w" in _mode_of(prog, marks_through_an_overload,
                           lambda b: b.external is MARKS), \
        "the overload's store to MARKS is not recorded (the stub was analysed instead)"


# ---------------------------------------------------------------------------------------
# 3. The inference cache (per kernel Python function and argument ranks) keeps what the
#    kernel reached through a global device function at its first trace: rebind the name
#    and a new trace still records the old callee's arrays. (On a GPU the same happens when
#    Numba compiles a new specialization, e.g. for float32 arguments, after the rebinding.)

OLD = cuda.to_device(np.zeros(N))
NEW = cuda.to_device(np.zeros(N))


@cuda.jit(device=True)
def _write_old(i):
    OLD[i] = 7.0


@cuda.jit(device=True)
def _write_new(i):
    NEW[i] = 7.0


OP = _write_old


@cuda.jit
def calls_the_global_op(out):
    i = cuda.grid(1)
    if i < out.size:
        OP(i)


def test_rebinding_a_global_device_function_is_seen_by_a_new_trace(monkeypatch):
    """A global device-function name (`OP = ...`) rebound after the kernel's first trace
    (sim: the simulator calls what the name holds when the kernel runs; on a GPU Numba keeps
    the first callee it compiled, which the baked-array check refuses)."""
    global OP

    def step(out):
        calls_the_global_op[1, N](out)
        copy[1, N](NEW, out)
        return out

    def make():
        return (cuda.to_device(np.ones(N)),)

    def reset():
        OLD.copy_to_device(np.zeros(N))
        NEW.copy_to_device(np.zeros(N))

    f = tg.compile(step, backend="sim")
    f(*make())   # first trace: OP is _write_old
    OP = _write_new
    try:
        with pytest.raises(tg.TracegraphError, match="bound to another array or function"):
            f(*make())  # the graph traced for the old callee is refused
        prog = tg.compile(step, backend="sim").trace(*make())
        assert "w" in _mode_of(prog, calls_the_global_op, lambda b: b.external is NEW), \
            "new trace still records the old callee's array"
        reset()
        matches_eager(step, make, "sim", monkeypatch=monkeypatch)
    finally:
        OP = _write_old


def test_a_device_function_name_rebound_inside_the_traced_function_is_refused(backend):
    global OP

    def step(out):
        global OP
        calls_the_global_op[1, N](out)
        OP = _write_new
        calls_the_global_op[1, N](out)
        OP = _write_old

    with pytest.raises(tg.TraceError, match="bound to another function"):
        tg.compile(step, backend=backend)(cuda.to_device(np.zeros(N)))
    OP = _write_old


# ---------------------------------------------------------------------------------------
# 4. tracegraph's simulator hook for device functions called with keywords keeps only
#    BoundArguments.args: a keyword after a skipped defaulted parameter is dropped, so the
#    callee silently uses its default (here: stores into the captured DEFAULT array
#    instead of the kernel's argument). GPU-compilable; plain Numba sim raises TypeError.

DEFAULT = cuda.to_device(np.zeros(N))


@cuda.jit(device=True)
def _put(i, v=1.0, arr=DEFAULT):
    arr[i] = v


@cuda.jit
def put_with_a_keyword_after_a_skipped_default(x):
    i = cuda.grid(1)
    if i < x.size:
        _put(i, arr=x)


def test_keyword_after_a_skipped_default_reaches_the_device_function(backend):
    """Device-function call `put(i, arr=x)` skipping defaulted `v`: sim drops `arr=x`."""
    def step(x):
        put_with_a_keyword_after_a_skipped_default[1, N](x)
        return x

    DEFAULT.copy_to_device(np.zeros(N))
    x = cuda.to_device(np.zeros(N))
    tg.compile(step, backend=backend)(x)
    np.testing.assert_array_equal(x.copy_to_host(), np.ones(N))    # as Numba on a GPU
    np.testing.assert_array_equal(DEFAULT.copy_to_host(), np.zeros(N))


# ---------------------------------------------------------------------------------------
# 5. Host-side DeviceNDArray methods on an argument inside a traced function crash with a
#    bare AttributeError on tracegraph's Array (no TraceError naming the unsupported call).

@pytest.mark.parametrize("method", ["view", "ravel", "squeeze", "transpose",
                                    "is_c_contiguous"])
def test_device_array_methods_inside_a_traced_function(backend, method):
    """x.view(np.int64) / x.ravel() / x.squeeze() / x.transpose() / x.is_c_contiguous() in step."""
    calls = {"view": lambda x: x.view(np.float64), "ravel": lambda x: x.ravel(),
             "squeeze": lambda x: x.squeeze(), "transpose": lambda x: x.transpose((0,)),
             "is_c_contiguous": lambda x: x if x.is_c_contiguous() else x[::-1]}

    def step(x):
        fill[1, N](calls[method](x), 5.0)
        return x

    want = step(cuda.to_device(np.zeros(N))).copy_to_host()   # eager Numba: fine
    got = tg.compile(step, backend=backend)(cuda.to_device(np.zeros(N))).copy_to_host()
    np.testing.assert_array_equal(got, want)


def test_a_device_array_attribute_a_traced_array_lacks_is_a_trace_error(backend):
    def step(x):
        return x.gpu_data

    with pytest.raises(tg.TraceError, match="no attribute 'gpu_data'") as e:
        tg.compile(step, backend=backend)(cuda.to_device(np.zeros(N)))
    assert isinstance(e.value, AttributeError)  # hasattr() answers False
