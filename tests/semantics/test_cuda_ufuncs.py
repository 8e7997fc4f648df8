"""CUDA ufuncs and gufuncs (`@vectorize` / `@guvectorize` with target="cuda") called inside
a traced function are kernel nodes with Numba's own kernels, dtype choice, scalars,
broadcasting and `out=` handling: the graph gives eager Numba's results, on traced,
captured and host operands, over replays with new arrays. What Numba returns on the host
(no device operand, a host `out=`, `ufunc.reduce`, `cuda.reduce` without `res=`) is a
TraceError at the user's line naming the call and the fix."""
from __future__ import annotations

import numpy as np
import pytest
from eager import fresh, host, matches_eager, to_device
from numba import cuda, guvectorize, vectorize

import tracegraph as tg

N = 12


@vectorize(["float64(float64, float64)", "float32(float32, float32)",
            "int64(int64, int64)"], target="cuda")
def axpb(a, b):
    return 2 * a + b


@vectorize(["float32(float32)", "float64(float64)"], target="cuda")
def halve(a):
    return a / 2


@guvectorize(["void(float64[:], float64[:])", "void(float32[:], float32[:])"],
             "(n)->(n)", target="cuda")
def cumsum(a, out):
    acc = a[0] - a[0]
    for i in range(a.shape[0]):
        acc += a[i]
        out[i] = acc


@guvectorize(["void(float64[:], float64, float64[:])"], "(n),()->(n)", target="cuda")
def shifted(a, s, out):
    for i in range(a.shape[0]):
        out[i] = a[i] + s


@guvectorize(["void(float64[:,:], float64[:,:], float64[:,:])"], "(m,n),(n,p)->(m,p)",
             target="cuda")
def matmul(a, b, out):
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = 0.0
            for k in range(a.shape[1]):
                acc += a[i, k] * b[k, j]
            out[i, j] = acc


@guvectorize(["void(float64[:], float64[:], float64[:])"], "(n)->(),()", target="cuda")
def extremes(a, lo, hi):
    lo[0] = a[0]
    hi[0] = a[0]
    for i in range(a.shape[0]):
        lo[0] = min(lo[0], a[i])
        hi[0] = max(hi[0], a[i])


ROW = cuda.to_device(np.arange(4.0))  # a captured device array
TABLE = np.linspace(-1.0, 1.0, N)  # a captured host array


def _vec(n=N, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal(n).astype(dtype)


def _mat(rows=3, cols=4, seed=1):
    return np.random.default_rng(seed).standard_normal((rows, cols))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_vectorize_picks_numbas_signature_per_dtype(backend, monkeypatch, dtype):
    def step(x, y):
        return axpb(x, y), halve(axpb(x, y)) if dtype != np.int64 else axpb(y, x)

    data = (np.arange(N) - 3).astype(dtype)
    matches_eager(step, lambda: to_device((data, data[::-1].copy())), backend,
                  monkeypatch=monkeypatch)


def test_vectorize_scalars_broadcasting_and_captured_operands(backend, monkeypatch):
    def step(m, v):
        a = axpb(m, 1.5)            # a Python scalar
        b = axpb(np.float64(-2.0), m)  # a NumPy scalar first
        c = axpb(m, ROW)            # a captured row (Numba matches its axis from the left)
        d = axpb(v, TABLE)          # a captured host array, copied in on every call
        e = axpb(m[:, ::2], m[:, 1::2])  # non-contiguous 2-D operands
        return a, b, c, d, e

    matches_eager(step, lambda: to_device((_mat(), _vec())), backend, monkeypatch=monkeypatch)


def test_vectorize_out_argument(backend, monkeypatch):
    def step(x, m):
        out = cuda.device_array_like(x)
        axpb(x, x, out=out)
        axpb(out, 1.0, out=out)  # in place
        strided = cuda.device_array((3, 8))
        r = axpb(m, m, out=strided[:, ::2])  # a non-contiguous 2-D out: Numba writes a copy
        return out, r, m

    matches_eager(step, lambda: to_device((_vec(), _mat())), backend, monkeypatch=monkeypatch)


def test_vectorize_on_numpy_arguments_returns_numpy(backend, monkeypatch):
    """A NumPy argument of the traced function is a device array inside the graph: the
    ufunc's result is a graph result, returned as NumPy as the eager one is."""
    def step(x):
        return halve(x)

    f = matches_eager(step, fresh(_vec(dtype=np.float32)), backend, monkeypatch=monkeypatch)
    assert isinstance(f(_vec(dtype=np.float32)), np.ndarray)


def test_gufuncs(backend, monkeypatch):
    def step(v, m, a, b):
        c = cumsum(v)                 # loop dims (): one instance
        rows = cumsum(m)              # one instance per row
        s = shifted(m, 0.5)           # a scalar core input, broadcast
        p = matmul(a, b)
        lo, hi = extremes(m)          # two outputs
        out = cuda.device_array_like(m)
        cumsum(m, out)                # the output given positionally
        cumsum(m, out=out)            # and by keyword
        return c, rows, s, p, lo, hi, out

    matches_eager(step, lambda: to_device((_vec(), _mat(), _mat(3, 2, 5), _mat(2, 4, 6))),
                  backend, monkeypatch=monkeypatch)


def test_gufunc_pins_an_input_of_one_instance(backend, monkeypatch):
    def step(a, b):
        return matmul(a, b)  # a: 4 instances, b: one, pinned for all of them

    matches_eager(step, lambda: to_device((_mat(4, 6).reshape(4, 2, 3), _mat(3, 2, 2))),
                  backend, monkeypatch=monkeypatch)


def test_replays_with_new_arrays(backend):
    def step(x):
        y = axpb(x, ROW[:1])
        return cumsum(y)

    f = tg.compile(step, backend=backend)
    for seed in range(3):
        x = cuda.to_device(_vec(seed=seed))
        want = host(step(cuda.to_device(_vec(seed=seed))))
        np.testing.assert_array_equal(host(f(x) if seed < 2 else f.replay(x)), want)


def test_ufunc_launches_are_kernel_nodes_ordered_by_data(backend):
    def step(x):
        a = halve(x)
        b = axpb(x, 3.0)
        return axpb(a, b)

    prog = tg.compile(step, backend=backend).trace(cuda.to_device(_vec()))
    kernels = [i for i, op in enumerate(prog.ops) if op.kind == "kernel"]
    assert [prog.ops[i].name for i in kernels] == ["__vectorized_halve", "__vectorized_axpb",
                                                  "__vectorized_axpb"]
    last = kernels[-1]
    assert set(prog.graph.predecessors(last)) >= {kernels[0]}  # a RAW edge from halve
    assert all(op.location.startswith(__file__) for op in prog.ops)


# ---------------------------------------------------------------------------
# reductions

def _add(a, b):
    return a + b


SUM = cuda.reduce(_add)


@pytest.mark.parametrize("n", [5, 128, 300])
def test_cuda_reduce_into_a_device_array(backend, monkeypatch, n):
    def step(x):
        res = cuda.device_array(1, np.int64)
        SUM(x, res=res)
        return res

    matches_eager(step, lambda: to_device((np.arange(n, dtype=np.int64),)), backend,
                  monkeypatch=monkeypatch)


@pytest.mark.parametrize("call", ["ufunc_reduce", "cuda_reduce", "all_host", "host_out",
                                  "gufunc_all_host", "gufunc_host_out"])
def test_results_on_the_host_are_trace_errors(backend, call):
    def step(x):
        if call == "ufunc_reduce":
            axpb.reduce(x)
        elif call == "cuda_reduce":
            SUM(x)
        elif call == "all_host":
            axpb(TABLE, 1.0)
        elif call == "host_out":
            axpb(x, x, out=np.empty(N))
        elif call == "gufunc_all_host":
            cumsum(TABLE)
        else:
            cumsum(x, out=np.empty(N))
        return halve(x)

    with pytest.raises(tg.TraceError) as e:
        tg.compile(step, backend=backend)(cuda.to_device(_vec()))
    assert e.value.where.startswith(__file__) and e.value.fix
    name = {"ufunc_reduce": "reduce", "cuda_reduce": "cuda.reduce"}.get(call, "CUDA")
    assert name in e.value.what


def test_cuda_reduce_of_floats_in_numbas_order(backend, gpu):
    """Eager Numba on a GPU and the graph (its kernels on cuda, the simulator's step-by-step
    stand-in on sim) sum floats in one order: the same bits."""
    data = np.random.default_rng(3).standard_normal(1000).astype(np.float32)

    def step(x):
        res = cuda.device_array(1, np.float32)
        SUM(x, res=res, init=np.float32(0.25))
        return res

    want = host(step(cuda.to_device(data)))
    got = host(tg.compile(step, backend=backend)(cuda.to_device(data)))
    assert got.tobytes() == want.tobytes()


@vectorize(["float64(float64, float64)"], target="cuda")
def times(a, b):
    return a * b


@vectorize(["float64(float64, float64)"], target="cuda")
def plus(a, b):
    return a + b


@guvectorize(["void(float64[:], float64[:])"], "(n)->(n)", target="cuda")
def reverse(a, out):
    for i in range(a.shape[0]):
        out[i] = a[a.shape[0] - 1 - i]


MAX = cuda.reduce(lambda a, b: max(a, b))
UFUNC, GUFUNC, REDUCE = times, cumsum, SUM


def test_rebinding_a_name_that_holds_a_ufunc_traces_again(backend):
    """A ufunc, gufunc or cuda.reduce object the function names is checked by identity on
    every call, as a kernel is: another one bound to the name is a new graph."""
    global UFUNC, GUFUNC, REDUCE

    def step(x):
        r = cuda.device_array(1)
        REDUCE(x, res=r)
        return UFUNC(x, x), GUFUNC(x), r

    f = tg.compile(step, backend=backend)
    x = np.arange(1.0, N + 1)
    try:
        for ufunc, gufunc, reduce in ((times, cumsum, SUM), (plus, reverse, MAX)):
            UFUNC, GUFUNC, REDUCE = ufunc, gufunc, reduce
            want = [host(a) for a in step(cuda.to_device(x))]
            got = [host(a) for a in f(cuda.to_device(x))]
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
    finally:
        UFUNC, GUFUNC, REDUCE = times, cumsum, SUM
