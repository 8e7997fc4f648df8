"""Differential tests: random programs of small kernels on views of a pool of buffers,
compiled by tracegraph and compared with the same launches run eagerly by Numba.

Each program launches in-place scale/add, copy and out-of-place add kernels on slices
(contiguous, strided, reversed; disjoint or overlapping) of 2-4 buffers: some are the
caller's arrays (NumPy or device, possibly views of one shared array), some are
`tg.zeros` temporaries. The graph must give bit-identical results to eager Numba, also
when the sim backend runs its nodes in random valid orders; its direct edges must all
stand for real byte conflicts, and every pair of launches that touch the same elements
with a write must be ordered.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import networkx as nx
import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from numba import cuda
from small_kernels import add, copy, iadd, iscale

import tracegraph as tg

N = 16          # elements per buffer
TPB = 8         # threads per block: the simulator runs one Python thread per CUDA thread
SCALES = (2.0, 0.5, -1.0, 3.0)

# kernel name -> (kernel, the access mode of each view argument)
KERNELS = {
    "iscale": (iscale, ("rw",)),
    "iadd": (iadd, ("rw", "r")),
    "copy": (copy, ("r", "w")),
    "add": (add, ("r", "r", "w")),
}


@dataclass(frozen=True)
class Launch:
    kernel: str
    views: tuple[tuple[int, int, int, int], ...]  # (buffer, start, length, step)
    scalar: float | None = None


@dataclass(frozen=True)
class Case:
    n_inputs: int
    n_temps: int
    offsets: tuple[int, ...]    # where each input starts in the shared base array
    device: bool                # inputs as device arrays (else NumPy)
    launches: tuple[Launch, ...]
    returns_inputs: bool

    @property
    def n_buffers(self) -> int:
        return self.n_inputs + self.n_temps


def _index(start: int, length: int, step: int) -> slice:
    stop = start + step * length
    return slice(start, None if stop < 0 else stop, step)


def _elements(view: tuple[int, int, int, int]) -> set[int]:
    _, start, length, step = view
    return {start + step * k for k in range(length)}


def _extent(view: tuple[int, int, int, int]) -> tuple[int, int]:
    e = _elements(view)
    return min(e), max(e) + 1


@st.composite
def _views(draw, n_buffers: int, length: int):
    buf = draw(st.integers(0, n_buffers - 1))
    step = draw(st.sampled_from([1, 1, 2, -1]))
    span = abs(step) * (length - 1) + 1
    first = draw(st.integers(0, N - span))
    start = first if step > 0 else first + span - 1
    return (buf, start, length, step)


def _same_memory(case: Case, a: tuple, b: tuple) -> set[int] | None:
    """Elements of the base (inputs) or of a temp shared by two views; None: different memory."""
    def absolute(v):
        if v[0] < case.n_inputs:
            return ("base", {case.offsets[v[0]] + e for e in _elements(v)})
        return (v[0], _elements(v))
    (ma, ea), (mb, eb) = absolute(a), absolute(b)
    return ea & eb if ma == mb else None


@st.composite
def _launches(draw, n_buffers: int):
    name = draw(st.sampled_from(sorted(KERNELS)))
    length = draw(st.sampled_from([4, 8]))
    nviews = len(KERNELS[name][1])
    views = tuple(draw(_views(n_buffers, length)) for _ in range(nviews))
    scalar = draw(st.sampled_from(SCALES)) if name == "iscale" else None
    return Launch(name, views, scalar)


@st.composite
def cases(draw):
    n_inputs = draw(st.integers(1, 3))
    n_temps = draw(st.integers(0 if n_inputs > 1 else 1, 4 - n_inputs))
    if draw(st.booleans()):   # separate arrays
        offsets = tuple(N * i for i in range(n_inputs))
    else:                     # views of one array, maybe overlapping
        offsets = tuple(sorted(draw(st.lists(st.sampled_from(range(0, N * n_inputs, 4)),
                                             min_size=n_inputs, max_size=n_inputs))))
    draft = Case(n_inputs, n_temps, offsets, draw(st.booleans()), (), draw(st.booleans()))
    launches = []
    for _ in range(draw(st.integers(1, 8))):
        for _attempt in range(3):
            launch = draw(_launches(draft.n_buffers))
            # a launch whose written view shares memory with another of its views races
            # with itself (eagerly too): not a program anyone can compare
            modes = KERNELS[launch.kernel][1]
            racy = any(_same_memory(draft, launch.views[i], launch.views[j])
                       for i in range(len(modes)) for j in range(len(modes))
                       if i != j and "w" in modes[i])
            if not racy:
                launches.append(launch)
                break
    if not launches:
        launches.append(Launch("iscale", ((n_inputs - 1, 0, 8, 1),), 2.0))
    return Case(n_inputs, n_temps, offsets, draft.device, tuple(launches), draft.returns_inputs)


# ---------------------------------------------------------------------------
# running a case

def _launch_all(case: Case, pool: list) -> None:
    for launch in case.launches:
        kernel, _ = KERNELS[launch.kernel]
        args = [pool[b][_index(s, n, st_)] for b, s, n, st_ in launch.views]
        if launch.scalar is not None:
            args.append(launch.scalar)
        kernel[1, TPB](*args)


def _base_init(case: Case) -> np.ndarray:
    size = max(case.offsets) + N
    rng = np.random.default_rng(len(case.launches) * 7 + case.n_buffers)
    return rng.integers(-8, 9, size).astype(np.float64)


def _eager(case: Case) -> tuple[np.ndarray, list[np.ndarray]]:
    base = cuda.to_device(_base_init(case))
    temps = [cuda.to_device(np.zeros(N)) for _ in range(case.n_temps)]
    pool = [base[o:o + N] for o in case.offsets] + temps
    _launch_all(case, pool)
    return base.copy_to_host(), [t.copy_to_host() for t in temps]


def _traced_fn(case: Case):
    def fn(*inputs):
        temps = [tg.zeros(N) for _ in range(case.n_temps)]
        _launch_all(case, list(inputs) + temps)
        return (tuple(inputs) if case.returns_inputs else ()) + tuple(temps)
    return fn


def _host(a) -> np.ndarray:
    return a if isinstance(a, np.ndarray) else a.copy_to_host()


@contextlib.contextmanager
def _sim_order(seed: int | None):
    old = os.environ.pop("TRACEGRAPH_SIM_ORDER", None)
    if seed is not None:
        os.environ["TRACEGRAPH_SIM_ORDER"] = str(seed)
    try:
        yield
    finally:
        os.environ.pop("TRACEGRAPH_SIM_ORDER", None)
        if old is not None:
            os.environ["TRACEGRAPH_SIM_ORDER"] = old


def _run_graph(case: Case, backend: str, seed: int | None = None):
    init = _base_init(case)
    base = cuda.to_device(init) if case.device else init.copy()
    inputs = [base[o:o + N] for o in case.offsets]
    with _sim_order(seed):
        f = tg.compile(_traced_fn(case), backend=backend)
        result = f(*inputs)
    assert isinstance(result, tuple)
    k = case.n_inputs if case.returns_inputs else 0
    assert all(r is i for r, i in zip(result[:k], inputs))
    temps = [_host(t) for t in result[k:]]
    assert all(isinstance(t, np.ndarray) != case.device for t in result[k:])
    return f, _host(base), temps


# ---------------------------------------------------------------------------
# checks of the graph against the case itself (not against the IR)

def _check_graph(case: Case, program: tg.Program) -> None:
    tg.verify(program, check_order=True)
    kernel_nodes = [i for i, op in enumerate(program.ops) if op.kind == "kernel"]
    assert [program.ops[i].name for i in kernel_nodes] == [ln.kernel for ln in case.launches]
    node_of = dict(enumerate(kernel_nodes))
    g = program.graph

    def touched(launch, byte_ranges: bool):
        modes = KERNELS[launch.kernel][1]
        for v, m in zip(launch.views, modes):
            yield v, m

    def conflict(a: Launch, b: Launch, exact: bool) -> bool:
        for va, ma in touched(a, exact):
            for vb, mb in touched(b, exact):
                if "w" not in ma + mb:
                    continue
                if exact:
                    if _same_memory(case, va, vb):
                        return True
                else:
                    if _extents_overlap(case, va, vb):
                        return True
        return False

    for i, a in enumerate(case.launches):
        for j in range(i + 1, len(case.launches)):
            b = case.launches[j]
            u, v = node_of[i], node_of[j]
            if conflict(a, b, exact=True):
                assert nx.has_path(g, u, v), f"launches {i} and {j} conflict but are unordered"
            if g.has_edge(u, v):
                assert conflict(a, b, exact=False), f"edge {i}->{j} without a byte conflict"


def _extents_overlap(case: Case, a: tuple, b: tuple) -> bool:
    def absolute(v):
        lo, hi = _extent(v)
        if v[0] < case.n_inputs:
            return ("base", lo + case.offsets[v[0]], hi + case.offsets[v[0]])
        return (v[0], lo, hi)
    ma, la, ha = absolute(a)
    mb, lb, hb = absolute(b)
    return ma == mb and max(la, lb) < min(ha, hb)


# ---------------------------------------------------------------------------
# the tests

@settings(max_examples=500, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=cases())
def test_random_programs_match_eager(backend, case):
    expected_base, expected_temps = _eager(case)
    f, base, temps = _run_graph(case, backend)
    _check_graph(case, f.latest.program)
    g = f.latest.program.graph
    event(f"{len(case.launches)} launches, {g.graph['lanes']} lanes")
    event("aliased inputs" if len(set(case.offsets)) < case.n_inputs or
          any(b - a < N for a, b in zip(case.offsets, case.offsets[1:])) else "separate inputs")
    np.testing.assert_array_equal(base, expected_base)
    for got, want in zip(temps, expected_temps):
        np.testing.assert_array_equal(got, want)
    # replay with the same signature and fresh inputs gives the same again
    init = _base_init(case)
    again = cuda.to_device(init) if case.device else init.copy()
    f.replay(*[again[o:o + N] for o in case.offsets])
    np.testing.assert_array_equal(_host(again), expected_base)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(case=cases(), seed=st.integers(0, 2**16))
def test_random_programs_in_random_orders(case, seed):
    if len(case.launches) < 2:
        return
    expected_base, expected_temps = _eager(case)
    for s in (seed, seed + 1, seed + 2):
        f, base, temps = _run_graph(case, "sim", s)
        assert f.latest.executable.seed == s
        np.testing.assert_array_equal(base, expected_base)
        for got, want in zip(temps, expected_temps):
            np.testing.assert_array_equal(got, want)
        order = list(f.latest.executable.order)
        event("shuffled" if order != sorted(order) else "program order")
