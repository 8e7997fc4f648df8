"""A third hostile round on the access analysis and tg.Array's methods (each case failed
before its fix): namedtuples of slices as indexes, names rebound behind calls the analysis
cannot follow, grid synchronization through a rebound name, transposes as copies (as
Numba's device arrays make them), views and contiguity flags as Numba's, @overload_method
implementations, method arguments Numba accepts. On the simulator (these check what the
trace records and eager Numba's simulator; the GPU suite runs the other test modules)."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest
from numba import cuda
from small_kernels import copy, fill

import tracegraph as tg

N = 8
SEEDS = (0, 1, 2, 3, 4, 5, 6, 7)


def _modes(prog, kernel_name, pred=lambda _: True):
    return ["".join(("r" if a.reads else "", "w" if a.writes else ""))
            for op in prog.ops if op.name == kernel_name
            for a in op.accesses if pred(prog.buffers[a.buffer])]


def _host(v):
    return v.copy_to_host() if hasattr(v, "copy_to_host") else v


def _differs_from_eager(step, make, monkeypatch):
    """Seeds (random valid orders) whose results differ from eager Numba's."""
    want = make()
    step(*want)
    want = [_host(a).copy() for a in want]
    bad = []
    for seed in SEEDS:
        monkeypatch.setenv("TRACEGRAPH_SIM_ORDER", str(seed))
        args = make()
        tg.compile(step, backend="sim")(*args)
        if not all(np.array_equal(_host(g), w) for g, w in zip(args, want)):
            bad.append(seed)
    return bad


# ---------------------------------------------------------------------------------------
# 1. A field of a namedtuple of slices used as an index: `x[p.hi]` is a view, but the
#    analysis gives a getattr on a non-array value no "may be a slice" mark, so the index
#    counts as a number: `x[p.hi]` is taken for an element (a read) and the store
#    `x[p.hi][i] = v` is lost. All four kernels compile to PTX.

Parts = namedtuple("Parts", "lo hi")
PARTS = (Parts(slice(0, 4), slice(4, 8)), Parts(slice(0, 2), slice(2, 8)))


@cuda.jit
def nt_built_in_kernel(x):
    i = cuda.grid(1)
    if i < 4:
        p = Parts(slice(0, 4), slice(4, 8))
        x[p.hi][i] = 0.0


@cuda.jit(device=True)
def _zero_hi(a, p, j):
    a[p.hi][j] = 0.0


@cuda.jit
def nt_passed_to_device_function(x):
    i = cuda.grid(1)
    if i < 4:
        _zero_hi(x, Parts(slice(0, 4), slice(4, 8)), i)


@cuda.jit(device=True)
def _halves(n):
    return Parts(slice(0, n // 2), slice(n // 2, n))


@cuda.jit
def nt_returned_by_device_function(x):
    i = cuda.grid(1)
    if i < 4:
        x[_halves(x.size).hi][i] = 0.0


@cuda.jit
def nt_member_of_global_tuple(x):
    i = cuda.grid(1)
    if i < 4:
        x[PARTS[0].hi][i] = 0.0


NT_KERNELS = [nt_built_in_kernel, nt_passed_to_device_function,
              nt_returned_by_device_function, nt_member_of_global_tuple]


@pytest.mark.parametrize("kernel", NT_KERNELS, ids=lambda k: k.py_func.__name__)
def test_namedtuple_field_slice_index_store_is_recorded(kernel, monkeypatch):
    """`x[p.hi][i] = v` with p a namedtuple of slices (local, parameter, result, tuple member)."""
    def step(x, out):
        fill[1, N](x, 3.0)
        kernel[1, N](x)          # zeroes x[4:8] through the view x[p.hi]
        copy[1, N](x, out)

    def make():
        return cuda.to_device(np.zeros(N)), cuda.to_device(np.ones(N))

    prog = tg.compile(step, backend="sim").trace(*make())
    assert "w" in "".join(_modes(prog, kernel.py_func.__name__)), \
        "store through x[p.hi] not recorded"
    assert _differs_from_eager(step, make, monkeypatch) == []


# ---------------------------------------------------------------------------------------
# 2. A global namedtuple holding a device array and a slice: `CFG.part` takes the early
#    return in _getattr (a non-array member of a tuple of arrays is bound as a value, but
#    never marked a slice), so `x[CFG.part][i] = v` counts as an element read.
#    Compiles to PTX (checked with a CUDA-Array-Interface stand-in for CFG.buf).

Cfg = namedtuple("Cfg", "buf part")
CFG = Cfg(cuda.to_device(np.zeros(N)), slice(4, 8))


@cuda.jit
def global_namedtuple_of_array_and_slice(x):
    i = cuda.grid(1)
    if i < 4:
        x[CFG.part][i] = CFG.buf[i]


def test_slice_member_of_a_global_namedtuple_of_arrays_makes_a_view(monkeypatch):
    """`x[CFG.part][i] = v`, CFG a global namedtuple (device array, slice)."""
    def step(x, out):
        fill[1, N](x, 3.0)
        global_namedtuple_of_array_and_slice[1, N](x)
        copy[1, N](x, out)

    def make():
        return cuda.to_device(np.zeros(N)), cuda.to_device(np.ones(N))

    prog = tg.compile(step, backend="sim").trace(*make())
    assert "w" in "".join(_modes(prog, "global_namedtuple_of_array_and_slice",
                                 lambda b: b.external is None)), \
        "store through x[CFG.part] not recorded"
    assert _differs_from_eager(step, make, monkeypatch) == []


# ---------------------------------------------------------------------------------------
# 3. Stale analysis through unknown_globals: a call the analysis cannot follow (`put(*t)`)
#    counts every array reachable from the callee's names, found at the first trace and
#    cached; `depends` holds only the kernel's own names, so rebinding the global device
#    function the callee calls (PUT) is not seen: a new trace still records the old
#    callee's array (H1), the simulator runs the new one (writing H2), and the launch
#    reading H2 is not ordered after it. The graph traced before the rebinding is not
#    refused either. Compiles to PTX; on a GPU it shows with a new specialization.

H1 = cuda.to_device(np.zeros(N))
H2 = cuda.to_device(np.zeros(N))


@cuda.jit(device=True)
def _put1(i, v):
    H1[i] = v


@cuda.jit(device=True)
def _put2(i, v):
    H2[i] = v


PUT = _put1


@cuda.jit(device=True)
def _put(i, v):
    PUT(i, v)


@cuda.jit
def calls_put_with_star_args(x):
    i = cuda.grid(1)
    if i < x.size:
        t = (i, x[i])
        _put(*t)


def test_rebinding_a_name_an_unfollowed_callee_calls_is_seen(monkeypatch):
    """Global device function PUT called by a callee reached through `f(*t)`, rebound."""
    global PUT

    def step(x, out):
        calls_put_with_star_args[1, N](x)
        copy[1, N](H2, out)

    def make():
        H1.copy_to_device(np.zeros(N))
        H2.copy_to_device(np.zeros(N))
        return cuda.to_device(np.arange(N) + 1.0), cuda.to_device(np.zeros(N))

    tg.compile(step, backend="sim").trace(*make())      # analysed with PUT = _put1
    PUT = _put2
    try:
        prog = tg.compile(step, backend="sim").trace(*make())
        assert "w" in "".join(_modes(prog, "calls_put_with_star_args",
                                     lambda b: b.external is H2)), \
            "the new trace still records the old callee's array (H1), not H2"
        assert _differs_from_eager(step, make, monkeypatch) == []
    finally:
        PUT = _put1


# ---------------------------------------------------------------------------------------
# 4. uses_grid_sync is cached per kernel forever: rebind the device function a kernel calls
#    by a global name to one that syncs the grid, and a new trace launches it
#    non-cooperatively; the simulator then fails with a misleading LoweringError ("through
#    a call tracegraph could not follow... call the device function by its own name"),
#    although it is called by its own name. (Simulator; the same kernel with SYNC bound to
#    _grid_sync from the start runs fine.)

@cuda.jit(device=True)
def _no_sync():
    pass


@cuda.jit(device=True)
def _grid_sync():
    cuda.cg.this_grid().sync()


SYNC = _no_sync


@cuda.jit
def rotate_with_global_sync(a, out):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = i
    SYNC()
    if i < a.size:
        out[i] = a[(i + 33) % a.size]


def test_rebinding_to_a_grid_syncing_device_function_launches_cooperatively():
    """Global SYNC rebound from a no-op to a grid-syncing device function between traces."""
    global SYNC

    def step(a, out):
        rotate_with_global_sync[2, 32](a, out)

    def make():
        return cuda.to_device(np.zeros(64)), cuda.to_device(np.zeros(64))

    tg.compile(step, backend="sim")(*make())
    SYNC = _grid_sync
    try:
        a, out = make()
        tg.compile(step, backend="sim")(a, out)
        np.testing.assert_array_equal(out.copy_to_host(), (np.arange(64) + 33) % 64)
    finally:
        SYNC = _no_sync


# ---------------------------------------------------------------------------------------
# 5. tg.Array.transpose() / .T is a view of the caller's array; Numba's DeviceNDArray
#    .transpose() / .T launches numba.cuda.kernels.transpose and returns a transposed COPY
#    (2-D; other ranks raise NotImplementedError). Writing through x.T inside a traced
#    function changes the caller's x; eagerly on a GPU it changes only a temporary.
#    (Numba's simulator's FakeCUDAArray returns a NumPy view, so eager-on-sim agrees with
#    tracegraph: the divergence is against Numba on a GPU, read from
#    numba_cuda/numba/cuda/cudadrv/devicearray.py: DeviceNDArray.transpose.)

@cuda.jit
def fill2d(x, v):
    i, j = cuda.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        x[i, j] = v


def test_transpose_of_a_device_array_is_a_copy_as_in_numba():
    """fill2d(x.T, 5) in a traced function: Numba on a GPU leaves x alone (x.T is a copy)."""
    def step(x):
        fill2d[(1, 1), (8, 8)](x.transpose(), 5.0)

    x = cuda.to_device(np.zeros((2, 4)))
    tg.compile(step, backend="sim")(x)
    np.testing.assert_array_equal(x.copy_to_host(), np.zeros((2, 4)))


# ---------------------------------------------------------------------------------------
# 6. tg.Array.view(dtype) with a dtype of the same itemsize refuses every non-C-contiguous
#    array (a column, a strided or reversed slice); Numba's DeviceNDArray.view (and the
#    simulator's, and NumPy's) keep the strides and return the view.

@pytest.mark.parametrize("index", [np.s_[::2], np.s_[::-1]], ids=["strided", "reversed"])
def test_same_itemsize_view_of_a_strided_array(index):
    """x[::2].view(np.int64) of a float64 array (eager Numba: a strided int64 view)."""
    @cuda.jit
    def set_bits(v):
        i = cuda.grid(1)
        if i < v.size:
            v[i] = 1

    def step(x):
        set_bits[1, N](x[index].view(np.int64))

    want = cuda.to_device(np.zeros(N))
    step(want)
    got = cuda.to_device(np.zeros(N))
    tg.compile(step, backend="sim")(got)
    np.testing.assert_array_equal(got.copy_to_host(), want.copy_to_host())


# ---------------------------------------------------------------------------------------
# 7. is_f_contiguous / is_c_contiguous answer differently from Numba's DeviceNDArray (and
#    NumPy) where an axis has length 1 or the array is empty: a (1, 6) row is F-contiguous
#    (tracegraph: False); an empty strided (0, 3) array is C-contiguous (tracegraph: False,
#    so ravel()/reshape()/view() of it are refused where Numba returns the view).

@pytest.mark.parametrize("index,method", [
    (np.s_[1:2], "is_f_contiguous"),
    (np.s_[0:0, ::2], "is_c_contiguous"),
], ids=["row-f", "empty-strided-c"])
def test_contiguity_flags_match_numba(index, method):
    """x[1:2].is_f_contiguous() / x[0:0, ::2].is_c_contiguous() on a traced (4, 6) array."""
    seen = {}

    def step(x):
        seen["got"] = getattr(x[index], method)()
        fill2d[(1, 1), (8, 8)](x, 1.0)

    x = cuda.to_device(np.zeros((4, 6)))
    want = getattr(x[index], method)()       # eager (simulator: NumPy's flags)
    assert want is True                      # also what DeviceNDArray's dummyarray says
    tg.compile(step, backend="sim").trace(x)
    assert seen["got"] == want


# ---------------------------------------------------------------------------------------
# 8. An @overload_method on arrays (numba.cuda.extending.overload_method(types.Array, ...))
#    whose implementation stores to a captured global: `x.mark_seen(i)` counts only as
#    read+write of x (a method of an array); the implementation Numba compiles into the
#    kernel is never looked at (round 2 fixed this for @overload of functions only), so the
#    store to G is not recorded and the launch reading G is not ordered after it.
#    Compiles to PTX; GPU-only in effect (the simulator cannot run overload_method), so this
#    shows in the recorded accesses.

from numba.cuda import types as _cuda_types  # noqa: E402
from numba.cuda.extending import overload_method  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:the traced function .*:UserWarning")

SEEN = cuda.to_device(np.zeros(N))


@overload_method(_cuda_types.Array, "mark_seen")
def _array_mark_seen(arr, i):
    def impl(arr, i):
        SEEN[i] = arr[i]
    return impl


@cuda.jit
def marks_through_an_overload_method(x):
    i = cuda.grid(1)
    if i < x.size:
        x.mark_seen(i)


def test_overload_method_store_to_a_captured_array_is_recorded():
    """x.mark_seen(i), an @overload_method whose implementation stores to global SEEN."""
    def step(x, out):
        marks_through_an_overload_method[1, N](x)
        copy[1, N](SEEN, out)

    prog = tg.compile(step, backend="sim").trace(cuda.to_device(np.ones(N)),
                                                 cuda.to_device(np.zeros(N)))
    assert "w" in "".join(_modes(prog, "marks_through_an_overload_method",
                                 lambda b: b.external is SEEN)), \
        "the overload_method implementation's store to SEEN is not recorded"


# ---------------------------------------------------------------------------------------
# 9. tg.Array's new methods crash with bare Python errors on arguments Numba's device arrays
#    take: ravel(order="C") / reshape(..., order="C") (DeviceNDArray.ravel(order="C",
#    stream=0), reshape(*shape, order=...)) raise TypeError "unexpected keyword argument
#    'order'"; squeeze(axis=0) of a 0-d view raises ZeroDivisionError (`a % len(shape)`).
#    Expected: the eager result, or a TraceError naming the unsupported call.

@pytest.mark.parametrize("call", [
    lambda x: x.ravel(order="C"),
    lambda x: x.reshape(2, 12, order="C"),
    lambda x: x[1, 2].squeeze(axis=0),
], ids=["ravel-order", "reshape-order", "squeeze-0d-axis"])
def test_array_method_arguments_numba_accepts(call):
    """x.ravel(order='C'), x.reshape(2, 12, order='C'), x[1, 2].squeeze(axis=0) in a trace."""
    @cuda.jit
    def touch(a):
        pass

    def step(x):
        touch[1, 1](call(x))

    try:
        tg.compile(step, backend="sim").trace(cuda.to_device(np.zeros((4, 6))))
    except tg.TraceError as e:  # a clear refusal, at the user's line
        assert "test_access_round3.py" in (e.where or "")
