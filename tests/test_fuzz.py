"""Differential fuzzing (issue 4 item 2): random programs of up to 64 tiny launches over a
pool of buffers (the caller's arrays, NumPy or device, possibly overlapping views of one
array or the same array twice, and tg.zeros temporaries) with disjoint and overlapping
views, in-place updates, fan-out and fan-in, and float32/float64/int32 data.

- CI (simulator): each program compiled by tracegraph must give bit-identical results to
  eager Numba, in program order and in a random valid order of its graph
  (`tracegraph.backends.sim.build(plan, seed)`); a derandomized profile of 200 programs.
- GPU (`TRACEGRAPH_FUZZ=gpu`, skipped without a GPU): a larger profile (1000 programs,
  `TRACEGRAPH_FUZZ_GPU_EXAMPLES`) comparing the `cuda` backend with `sim` and with eager
  Numba on the GPU. `TRACEGRAPH_FUZZ_EXAMPLES` sets the CI profile's count.
- The inferred DAG: every two launches touching the same elements with a write are
  ordered (a path in `program.graph`), and two launches are ordered only when a chain of
  launches overlapping (in bytes) with a write links them.

Every kernel keeps values bounded (averages, halving, negation, copies, small constants),
so int32 never overflows and float results are exact on every backend.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from numba import cuda
from small_kernels import copy, fill, iscale

import tracegraph as tg
from tracegraph import ir
from tracegraph.signature import arguments
from tracegraph.backends import gpu_usable, sim

FUZZ = os.environ.get("TRACEGRAPH_FUZZ", "").strip().lower()
DTYPES = ("float32", "float64", "int32")
MAX_LAUNCHES = 64
COUNTS = {"sim programs": 0, "gpu programs": 0, "launches": 0, "mismatches": 0}

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*Grid size .* will likely result in GPU under-utilization",
    "ignore:.*Host array used in CUDA kernel")


# ---------------------------------------------------------------------------
# kernels: tiny, bounded, one thread per element (all views of a launch have one length)


@cuda.jit
def avg(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = (x[i] + y[i]) * 0.5


@cuda.jit
def avg3(x, y, z, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = (x[i] + y[i] + z[i]) * 0.25


@cuda.jit
def iavg(x, y):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = (x[i] + y[i]) * 0.5


@cuda.jit
def split(x, half, neg):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        half[i] = v * 0.5
        neg[i] = -v


# name -> (kernel, the access mode of each array argument, the scalars it may take)
KERNELS = {
    "copy": (copy, ("r", "w"), ()),
    "avg": (avg, ("r", "r", "w"), ()),
    "avg3": (avg3, ("r", "r", "r", "w"), ()),
    "iavg": (iavg, ("rw", "r"), ()),
    "iscale": (iscale, ("rw",), (-1.0, 0.5)),
    "fill": (fill, ("w",), (-3.0, 1.0, 7.0)),
    "split": (split, ("r", "w", "w"), ()),
}


# ---------------------------------------------------------------------------
# programs

@dataclass(frozen=True)
class Buf:
    """A buffer of the program: an input (a slice of a caller's base array) or a temp."""
    dtype: str
    size: int
    base: int | None = None  # inputs: which base array
    offset: int = 0          # inputs: first element in the base


@dataclass(frozen=True)
class View:
    buf: int
    start: int
    length: int
    step: int

    def index(self) -> slice:
        stop = self.start + self.step * self.length
        return slice(self.start, None if stop < 0 else stop, self.step)


@dataclass(frozen=True)
class Launch:
    kernel: str
    views: tuple[View, ...]
    scalar: float | None
    tpb: int


@dataclass(frozen=True)
class Program:
    bases: tuple[tuple[str, int, str], ...]   # (dtype, size, "host" | "device")
    bufs: tuple[Buf, ...]                      # inputs first, then temps
    n_inputs: int
    same_as: tuple[int | None, ...]            # input k is the very object of input j
    launches: tuple[Launch, ...]

    def elements(self, v: View) -> list[tuple]:
        """The memory each thread k of the launch touches: (memory, element)."""
        b = self.bufs[v.buf]
        mem = ("base", b.base) if v.buf < self.n_inputs else ("temp", v.buf)
        return [(mem, b.offset + v.start + v.step * k) for k in range(v.length)]


def _racy(prog_draft: Program, launch: Launch) -> bool:
    """A launch whose written elements another of its views touches through another thread
    races with itself (eagerly too): not a program anyone can compare."""
    _, modes, _ = KERNELS[launch.kernel]
    elems = [prog_draft.elements(v) for v in launch.views]
    for a, (ea, ma) in enumerate(zip(elems, modes)):
        if "w" not in ma:
            continue
        for b, eb in enumerate(elems):
            if a != b and set(ea) & set(eb) and ea != eb:
                return True
    return False


@st.composite
def _view(draw, prog: Program, length: int) -> View:
    buf = draw(st.integers(0, len(prog.bufs) - 1))
    size = prog.bufs[buf].size
    step = draw(st.sampled_from([1, 1, 2, -1]))
    span = abs(step) * (length - 1) + 1
    if span > size:
        step, span = 1, length
    first = draw(st.integers(0, size - span))
    return View(buf, first if step > 0 else first + span - 1, length, step)


@st.composite
def programs(draw, max_launches: int = MAX_LAUNCHES) -> Program:
    placement = draw(st.sampled_from(["host", "device", "mixed"]))
    bases = []
    for _ in range(draw(st.integers(1, 3))):
        where = placement if placement != "mixed" else draw(st.sampled_from(["host", "device"]))
        bases.append((draw(st.sampled_from(DTYPES)), draw(st.sampled_from([16, 24])), where))
    bufs, same_as = [], []
    for _ in range(draw(st.integers(1, 4))):
        if bufs and draw(st.integers(0, 5)) == 0:   # the very same array again
            j = draw(st.integers(0, len(bufs) - 1))
            bufs.append(bufs[j])
            same_as.append(same_as[j] if same_as[j] is not None else j)
            continue
        b = draw(st.integers(0, len(bases) - 1))
        dtype, size, _ = bases[b]
        n = draw(st.integers(8, size))
        bufs.append(Buf(dtype, n, b, draw(st.integers(0, size - n))))
        same_as.append(None)
    n_inputs = len(bufs)
    for _ in range(draw(st.integers(0, 3))):
        bufs.append(Buf(draw(st.sampled_from(DTYPES)), draw(st.integers(8, 16))))
    prog = Program(tuple(bases), tuple(bufs), n_inputs, tuple(same_as), ())
    launches = []
    for _ in range(draw(st.integers(1, max_launches))):
        for _attempt in range(3):
            name = draw(st.sampled_from(sorted(KERNELS)))
            _, modes, scalars = KERNELS[name]
            length = draw(st.sampled_from([4, 8]))
            views = tuple(draw(_view(prog, length)) for _ in modes)
            scalar = draw(st.sampled_from(scalars)) if scalars else None
            launch = Launch(name, views, scalar, draw(st.sampled_from([4, 8])))
            if not _racy(prog, launch):
                launches.append(launch)
                break
    if not launches:  # never empty: fill the first buffer
        launches.append(Launch("fill", (View(0, 0, 4, 1),), 1.0, 4))
    return replace(prog, launches=tuple(launches))


# ---------------------------------------------------------------------------
# running a program: eagerly, or traced (the same Python code)

def run_program(prog: Program, args: tuple, zeros) -> tuple:
    temps = tuple(zeros(b.size, np.dtype(b.dtype)) for b in prog.bufs[prog.n_inputs:])
    bufs = tuple(args) + temps
    for launch in prog.launches:
        kernel = KERNELS[launch.kernel][0]
        views = [bufs[v.buf][v.index()] for v in launch.views]
        grid = (launch.views[0].length + launch.tpb - 1) // launch.tpb
        scalars = () if launch.scalar is None else (launch.scalar,)
        kernel[grid, launch.tpb](*views, *scalars)
    return tuple(args) + temps


def _initial(prog: Program) -> list[np.ndarray]:
    return [((np.arange(size) * 7 + 5 * k) % 17 - 8).astype(dtype)
            for k, (dtype, size, _) in enumerate(prog.bases)]


def _arguments(prog: Program, bases: list) -> tuple:
    args = []
    for k, (b, same) in enumerate(zip(prog.bufs[:prog.n_inputs], prog.same_as)):
        args.append(args[same] if same is not None else bases[b.base][b.offset:b.offset + b.size])
    return tuple(args)


def _host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else np.array(a)


def _state(prog: Program, bases: list, results: tuple) -> list[np.ndarray]:
    """What a run leaves behind: every base array and every temp it returned."""
    return [_host(b) for b in bases] + [_host(t) for t in results[prog.n_inputs:]]


def eager(prog: Program) -> list[np.ndarray]:
    bases = [cuda.to_device(a) for a in _initial(prog)]
    results = run_program(prog, _arguments(prog, bases),
                          lambda n, dtype: cuda.to_device(np.zeros(n, dtype)))
    return _state(prog, bases, results)


def _caller_bases(prog: Program) -> list:
    return [a if where == "host" else cuda.to_device(a)
            for a, (_, _, where) in zip(_initial(prog), prog.bases)]


def compile_program(prog: Program, backend: str) -> tg.CompiledFunction:
    return tg.compile(lambda *args: run_program(prog, args, tg.zeros), backend=backend)


def run_compiled(prog: Program, f: tg.CompiledFunction) -> list[np.ndarray]:
    bases = _caller_bases(prog)
    args = _arguments(prog, bases)
    results = f(*args)
    for a, r in zip(args, results):
        assert r is a  # an input handed back is the caller's own object
    return _state(prog, bases, results)


def run_in_order(prog: Program, plan: tg.Plan, seed: int) -> list[np.ndarray]:
    """The plan on the simulator in a random valid order of its graph."""
    bases = _caller_bases(prog)
    args = _arguments(prog, bases)
    results = sim.build(plan, seed).run(list(args), [arguments.describe(a) for a in args])
    return _state(prog, bases, results)


def assert_same(got: list, want: list, what: str) -> None:
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, (what, k)
        if not np.array_equal(g, w, equal_nan=g.dtype.kind == "f"):
            COUNTS["mismatches"] += 1
            np.testing.assert_array_equal(g, w, err_msg=f"{what}: array {k}")


# ---------------------------------------------------------------------------
# the DAG: ordered exactly when a chain of conflicting launches links two launches

def _extent(prog: Program, v: View) -> tuple[tuple, int, int]:
    elems = [e for _, e in prog.elements(v)]
    mem = prog.elements(v)[0][0]
    return mem, min(elems), max(elems) + 1


def conflicts(prog: Program) -> tuple[set, set]:
    """(pairs touching a common element with a write, pairs whose byte extents overlap
    with a write), as (i, j) launch indices with i < j."""
    touched = []
    for launch in prog.launches:
        modes = KERNELS[launch.kernel][1]
        touched.append([(set(prog.elements(v)), _extent(prog, v), "w" in m)
                        for v, m in zip(launch.views, modes)])
    exact, extent = set(), set()
    for j in range(len(touched)):
        for i in range(j):
            for ei, (mi, lo_i, hi_i), wi in touched[i]:
                for ej, (mj, lo_j, hi_j), wj in touched[j]:
                    if not (wi or wj) or mi != mj or hi_i <= lo_j or hi_j <= lo_i:
                        continue
                    extent.add((i, j))
                    if ei & ej:
                        exact.add((i, j))
    return exact, extent


def check_dag(prog: Program, program: tg.Program) -> None:
    kernels = [i for i, op in enumerate(program.ops) if op.kind == "kernel"]
    assert [program.ops[i].name for i in kernels] == [la.kernel for la in prog.launches]
    exact, extent = conflicts(prog)
    closure = nx.transitive_closure_dag(nx.DiGraph(list(extent)))
    reach = {i: nx.descendants(program.graph, kernels[i]) for i in range(len(kernels))}
    for i, j in exact:
        assert kernels[j] in reach[i], f"launches {i} and {j} conflict but are not ordered"
    for i in range(len(kernels)):
        for j in range(i + 1, len(kernels)):
            if kernels[j] in reach[i]:
                assert closure.has_edge(i, j), \
                    f"launches {i} and {j} are ordered but no chain of conflicts links them"
    tg.verify(program, check_order=True)


# ---------------------------------------------------------------------------
# the tests

def _settings(examples: int, derandomize: bool) -> settings:
    return settings(max_examples=examples, derandomize=derandomize, deadline=None,
                    database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


CI = _settings(int(os.environ.get("TRACEGRAPH_FUZZ_EXAMPLES", 200)), derandomize=True)
GPU = _settings(int(os.environ.get("TRACEGRAPH_FUZZ_GPU_EXAMPLES", 1000)), derandomize=False)


def _note(prog: Program, profile: str) -> None:
    n = len(prog.launches)
    event(f"launches: {'1-8' if n <= 8 else '9-32' if n <= 32 else '33-64'}")
    event(f"placement: {'/'.join(sorted({w for _, _, w in prog.bases}))}")
    COUNTS[f"{profile} programs"] += 1
    COUNTS["launches"] += n


@CI
@given(prog=programs(), seed=st.integers(0, 2**16))
def test_random_programs_match_eager_on_sim(prog, seed):
    _note(prog, "sim")
    want = eager(prog)
    f = compile_program(prog, "sim")
    assert_same(run_compiled(prog, f), want, "sim, program order")
    check_dag(prog, f.latest.program)
    assert_same(run_in_order(prog, f.latest.plan, seed), want, f"sim, order seed {seed}")


@pytest.mark.skipif(FUZZ != "gpu", reason="the GPU profile runs with TRACEGRAPH_FUZZ=gpu")
@pytest.mark.skipif(not gpu_usable(), reason="no CUDA GPU usable here")
@GPU
@given(prog=programs(), seed=st.integers(0, 2**16))
def test_random_programs_cuda_matches_sim(prog, seed):
    _note(prog, "gpu")
    want = eager(prog)
    on_gpu = compile_program(prog, "cuda")
    assert_same(run_compiled(prog, on_gpu), want, "cuda vs eager")
    assert_same(run_compiled(prog, on_gpu), want, "cuda, replayed on fresh arrays")
    reference = compile_program(prog, "sim")
    assert_same(run_compiled(prog, reference), want, "sim vs eager")
    assert_same(run_in_order(prog, reference.latest.plan, seed), want, f"sim, seed {seed}")
    check_dag(prog, on_gpu.latest.program)


def test_generated_programs_cover_the_space():
    """The strategy makes what the fuzzer claims: long programs, every kernel, aliasing
    inputs, overlapping views, every dtype and placement."""
    seen = {"kernels": set(), "dtypes": set(), "placements": set(), "same object": 0,
            "overlapping inputs": 0, "max launches": 0, "strided": 0}

    @settings(max_examples=150, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(prog=programs())
    def collect(prog):
        seen["kernels"] |= {la.kernel for la in prog.launches}
        seen["dtypes"] |= {b.dtype for b in prog.bufs}
        seen["placements"] |= {w for _, _, w in prog.bases}
        seen["same object"] += any(s is not None for s in prog.same_as)
        spans = [(b.base, b.offset, b.offset + b.size) for b in prog.bufs[:prog.n_inputs]]
        seen["overlapping inputs"] += any(
            a[0] == b[0] and a[1] < b[2] and b[1] < a[2] and a != b
            for k, a in enumerate(spans) for b in spans[k + 1:])
        seen["max launches"] = max(seen["max launches"], len(prog.launches))
        seen["strided"] += any(v.step != 1 for la in prog.launches for v in la.views)

    collect()
    assert seen["kernels"] == set(KERNELS)
    assert seen["dtypes"] == set(DTYPES)
    assert seen["placements"] == {"host", "device"}
    assert seen["same object"] > 5 and seen["overlapping inputs"] > 5 and seen["strided"] > 50
    assert seen["max launches"] >= 40


def test_dag_checker_catches_a_missing_edge():
    """The DAG check is not vacuous: a graph without its edges fails it."""
    prog = Program((("float64", 16, "host"),), (Buf("float64", 16, 0, 0),), 1, (None,), (
        Launch("iscale", (View(0, 0, 8, 1),), 0.5, 8),
        Launch("copy", (View(0, 0, 8, 1), View(0, 8, 8, 1)), None, 8)))
    f = compile_program(prog, "sim")
    program = f.trace(*_arguments(prog, _caller_bases(prog)))
    check_dag(prog, program)
    bare = program.replace(graph=ir.op_graph(program.ops))
    with pytest.raises(AssertionError, match="conflict but are not ordered"):
        check_dag(prog, bare)


def test_zz_fuzz_counts():
    """The profiles ran all their programs (the counts show with -s or -rA)."""
    if not COUNTS["sim programs"] + COUNTS["gpu programs"]:
        pytest.skip("the fuzz tests did not run in this session")
    print(f"\nfuzz counts: {COUNTS}")
    assert COUNTS["sim programs"] in (0, CI.max_examples)
    assert COUNTS["gpu programs"] in (0, GPU.max_examples)
    assert COUNTS["mismatches"] == 0
