"""Random programs of tiny Numba launches, the same launches run eagerly, and the checks
that a program compiled by tracegraph means what the launches mean.

One hypothesis strategy, `programs()`, draws a `Program`:

- a pool of buffers: the caller's arrays (`inputs`), each a view of one of 1-4 base arrays
  that are NumPy arrays or device arrays (or some of each): contiguous, strided or
  reversed views, a new base or another view of an existing one (disjoint, overlapping or
  equal in memory), or the very same object passed twice; sometimes views of a device
  array the function body captures (`captured`: it closes over them, tracegraph binds
  them by address, and they keep their values from call to call), which inputs may
  overlap too; and 0-3 `tg.zeros` temporaries (`temps`). float32, float64 and int32
  data, one dtype per memory.
- 1-64 launches (mostly up to 8) of in-place and out-of-place kernels with 1-4 array
  arguments, fan-out (`split`) and fan-in (`avg3`, `add`), some with a scalar, each on
  views of the pool (contiguous, strided, reversed, reversed strided; disjoint,
  overlapping or equal) of one length, 4-16 threads in blocks of 4 or 8.
- the results: the temporaries, with or without the inputs before them (a returned
  input must come back as the caller's own object).

`eager(prog, calls)` runs the same Python code eagerly with Numba on device copies of the
bases (what tracegraph promises to match, also for NumPy inputs that share memory), once
per call. `Compiled(prog, backend)` compiles a program (with its own captured arrays):
`.call()` runs it on fresh caller arrays, `.in_order(seed)` runs its plan on the
simulator in a random valid order of its graph; `assert_same` compares bit for bit.
`check_dag` checks the graph against the program itself (not the IR): every two launches
that touch a common element where one writes are ordered by a path in `program.graph`,
and every direct edge between launches stands for a real byte conflict (so two launches
are ordered only by a chain of conflicts).

Every kernel keeps values bounded and exact: copies, averages, halving, negation and
small constants never grow a value; `add`, `iadd` and scaling by 2 or 3 may (at most
3x), and a program makes at most `GROWTH_BUDGET` such launches, so |value| <= 8 * 3**8
and int32 never overflows. No multiply feeds an add, so there is nothing to contract into
an FMA: the GPU, the simulator and eager Numba agree bit for bit.

Keep kernels tiny: the simulator runs one Python thread per CUDA thread.
"""
from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import networkx as nx
import numpy as np
from hypothesis import strategies as st
from numba import cuda
from small_kernels import add, copy, fill, iadd, iscale

import tracegraph as tg
from tracegraph.backends import sim
from tracegraph.signature import arguments

DTYPES = ("float32", "float64", "int32")
BASE_SIZES = (16, 24, 32)
INPUT_STEPS = (1, 1, 1, 2, -1)      # how a caller's array sits in its base
VIEW_STEPS = (1, 1, 2, -1, -2)      # how a launch's view sits in its buffer
LENGTHS = (4, 8)                    # elements per view (= threads doing work)
MAX_LAUNCHES = 64
SHORT_LAUNCHES = 8
GROWTH_BUDGET = 8


# ---------------------------------------------------------------------------
# kernels: one thread per element; all views of a launch have one length


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


class Kernel(NamedTuple):
    fn: Any
    modes: tuple[str, ...]          # the access mode of each array argument
    scalars: tuple[float, ...]      # the trailing scalar it takes (none when empty)
    grows: bool = False             # may make a value larger (counts against the budget)


KERNELS = {
    "copy": Kernel(copy, ("r", "w"), ()),
    "fill": Kernel(fill, ("w",), (-3.0, 1.0, 7.0)),
    "iscale": Kernel(iscale, ("rw",), (-1.0, 0.5)),
    "iscale_up": Kernel(iscale, ("rw",), (2.0, 3.0), grows=True),
    "avg": Kernel(avg, ("r", "r", "w"), ()),
    "avg3": Kernel(avg3, ("r", "r", "r", "w"), ()),
    "iavg": Kernel(iavg, ("rw", "r"), ()),
    "split": Kernel(split, ("r", "w", "w"), ()),
    "add": Kernel(add, ("r", "r", "w"), (), grows=True),
    "iadd": Kernel(iadd, ("rw", "r"), (), grows=True),
}
BOUNDED = tuple(sorted(k for k, v in KERNELS.items() if not v.grows))


# ---------------------------------------------------------------------------
# programs


def _index(start: int, length: int, step: int) -> slice:
    stop = start + step * length
    return slice(start, None if stop < 0 else stop, step)


@dataclass(frozen=True)
class Base:
    """An array that inputs (and captured views) are views of."""
    dtype: str
    size: int
    placement: str  # "host" (NumPy) | "device"
    captured: bool = False  # a device array the function body captures: one per compiled
    #                         function, kept from call to call (not made fresh per call)


@dataclass(frozen=True)
class Input:
    """A caller's argument: base[start::step] of `size` elements, or (same_as) the very
    object of an earlier argument."""
    base: int
    start: int
    size: int
    step: int = 1
    same_as: int | None = None

    def index(self) -> slice:
        return _index(self.start, self.size, self.step)


@dataclass(frozen=True)
class Temp:
    dtype: str
    size: int


@dataclass(frozen=True)
class View:
    """buffers[buf][start::step], `length` elements."""
    buf: int
    start: int
    length: int
    step: int

    def index(self) -> slice:
        return _index(self.start, self.length, self.step)


@dataclass(frozen=True)
class Launch:
    kernel: str
    views: tuple[View, ...]
    scalar: float | None = None
    tpb: int = 8
    blocks: int = 1


@dataclass(frozen=True)
class Program:
    bases: tuple[Base, ...]
    inputs: tuple[Input, ...]
    temps: tuple[Temp, ...] = ()
    launches: tuple[Launch, ...] = ()
    returns_inputs: bool = True
    captured: tuple[Input, ...] = ()  # views of captured bases the body passes to kernels

    # buffers are the inputs, then the captured views, then the temps
    @property
    def n_inputs(self) -> int:
        return len(self.inputs)

    @property
    def n_views(self) -> int:
        """Buffers that are views of a base: the inputs and the captured views."""
        return len(self.inputs) + len(self.captured)

    @property
    def n_buffers(self) -> int:
        return self.n_views + len(self.temps)

    def view_of(self, buf: int) -> Input:
        return self.inputs[buf] if buf < self.n_inputs else self.captured[buf - self.n_inputs]

    def size(self, buf: int) -> int:
        return self.view_of(buf).size if buf < self.n_views else \
            self.temps[buf - self.n_views].size

    def dtype(self, buf: int) -> str:
        return self.bases[self.view_of(buf).base].dtype if buf < self.n_views else \
            self.temps[buf - self.n_views].dtype

    @property
    def device_mode(self) -> bool:
        """Results are device arrays: some input is a device array."""
        return any(self.bases[i.base].placement == "device" for i in self.inputs)

    def elements(self, v: View) -> list[tuple[tuple[str, int], int]]:
        """What thread k of a launch touches through view v: (memory, element)."""
        own = [v.start + v.step * k for k in range(v.length)]
        if v.buf >= self.n_views:
            return [(("temp", v.buf), e) for e in own]
        inp = self.view_of(v.buf)
        return [(("base", inp.base), inp.start + inp.step * e) for e in own]

    def span(self, inp: Input) -> tuple[int, int]:
        return _span(inp)

    def whole_inputs(self) -> set[int]:
        """Inputs tracegraph conservatively orders against every captured view they share a
        base with (ir.memory_regions: `whole`): inputs in one alias group (overlapping
        inputs) with an input that overlaps a captured view."""
        touching = set()
        for k, inp in enumerate(self.inputs):
            lo, hi = self.span(inp)
            for c in self.captured:
                clo, chi = self.span(c)
                if c.base == inp.base and lo < chi and clo < hi:
                    touching.add(k)
        group = set(touching)
        grew = True
        while grew:
            grew = False
            for k, inp in enumerate(self.inputs):
                if k in group:
                    continue
                lo, hi = self.span(inp)
                for g in list(group):
                    glo, ghi = self.span(self.inputs[g])
                    if self.inputs[g].base == inp.base and lo < ghi and glo < hi:
                        group.add(k)
                        grew = True
                        break
        return group

    def extent(self, v: View) -> tuple[tuple[str, int], int, int]:
        """(memory, first element, last element + 1) of the view: the byte range it may
        touch, in elements of its memory."""
        elems = self.elements(v)
        return elems[0][0], min(e for _, e in elems), max(e for _, e in elems) + 1

    def racy(self, launch: Launch) -> bool:
        """A launch whose written elements another of its views touches through another
        thread races with itself (eagerly too): not a program anyone can compare."""
        elems = [self.elements(v) for v in launch.views]
        for a, mode in enumerate(KERNELS[launch.kernel].modes):
            if "w" not in mode:
                continue
            for b, other in enumerate(elems):
                if a != b and elems[a] != other and set(elems[a]) & set(other):
                    return True
        return False


def _fit(draw, room: int, count: int, steps: tuple[int, ...]) -> tuple[int, int]:
    """(start, step) of `count` elements in `room`."""
    step = draw(st.sampled_from(steps))
    span = abs(step) * (count - 1) + 1
    if span > room:
        step, span = 1, count
    first = draw(st.integers(0, room - span))
    return (first if step > 0 else first + span - 1), step


def _span(inp: Input) -> tuple[int, int]:
    """The elements of its base a view of a base may touch: [first, last + 1)."""
    ends = (inp.start, inp.start + inp.step * (inp.size - 1))
    return min(ends), max(ends) + 1


def _room_after(bases: list[Base], inputs: list[Input], j: int) -> bool:
    return bases[inputs[j].base].size - _span(inputs[j])[1] >= 8


@st.composite
def _input(draw, bases: list[Base], b: int) -> Input:
    room = bases[b].size
    size = draw(st.sampled_from([8, 8, 12, 16]))
    start, step = _fit(draw, room, size, INPUT_STEPS)
    return Input(b, start, size, step)


@st.composite
def _launch(draw, prog: Program, names: tuple[str, ...]) -> Launch:
    name = draw(st.sampled_from(names))
    kernel = KERNELS[name]
    length = draw(st.sampled_from(LENGTHS))
    views = []
    for _ in kernel.modes:
        buf = draw(st.integers(0, prog.n_buffers - 1))
        start, step = _fit(draw, prog.size(buf), length, VIEW_STEPS)
        views.append(View(buf, start, length, step))
    scalar = draw(st.sampled_from(kernel.scalars)) if kernel.scalars else None
    tpb = draw(st.sampled_from([4, 8]))
    blocks = -(-length // tpb) + draw(st.sampled_from([0, 0, 1]))  # idle threads too
    return Launch(name, tuple(views), scalar, tpb, blocks)


@st.composite
def programs(draw, max_launches: int = MAX_LAUNCHES) -> Program:
    placement = draw(st.sampled_from(["host", "device", "mixed"]))
    bases: list[Base] = []

    def new_base() -> int:
        where = placement if placement != "mixed" else draw(st.sampled_from(["host", "device"]))
        bases.append(Base(draw(st.sampled_from(DTYPES)), draw(st.sampled_from(BASE_SIZES)),
                          where))
        return len(bases) - 1

    captured: list[Input] = []
    if draw(st.sampled_from([False, False, True])):  # a device array the body captures
        bases.append(Base(draw(st.sampled_from(DTYPES)), draw(st.sampled_from(BASE_SIZES)),
                          "device", captured=True))
        captured = [draw(_input(bases, 0)) for _ in range(draw(st.integers(1, 2)))]
    inputs: list[Input] = []
    for k in range(draw(st.integers(1, 4))):
        if k == 0:  # the first: a new base, or a view of the captured one
            how = draw(st.sampled_from(["new", "view"])) if bases else "new"
        else:
            how = draw(st.sampled_from(["new", "view", "view", "next", "same", "equal"]))
        if how in ("same", "equal"):
            j = draw(st.integers(0, k - 1))
            if how == "same":   # the very same object again
                root = inputs[j].same_as if inputs[j].same_as is not None else j
                inputs.append(replace(inputs[root], same_as=root))
            else:               # another object over the same elements
                inputs.append(replace(inputs[j], same_as=None))
        elif how == "next" and _room_after(bases, inputs, j := draw(st.integers(0, k - 1))):
            b, first = inputs[j].base, _span(inputs[j])[1]   # just after another: disjoint
            size = draw(st.sampled_from([n for n in (8, 12, 16)
                                         if first + n <= bases[b].size]))
            inputs.append(Input(b, first, size))
        else:                   # a view of a new base, or another view of an existing one
            b = new_base() if how == "new" else draw(st.integers(0, len(bases) - 1))
            inputs.append(draw(_input(bases, b)))
    temps = tuple(Temp(draw(st.sampled_from(DTYPES)), draw(st.integers(8, 16)))
                  for _ in range(draw(st.integers(0, 3))))
    prog = Program(tuple(bases), tuple(inputs), temps, (), draw(st.booleans()),
                   tuple(captured))

    # mostly short programs; some of 9-32 launches, some of 33-64
    lo, hi = draw(st.sampled_from([(1, SHORT_LAUNCHES)] * 4 + [(SHORT_LAUNCHES + 1, 32),
                                                                (33, MAX_LAUNCHES)]))
    n = draw(st.integers(min(lo, max_launches), min(hi, max_launches)))
    launches: list[Launch] = []
    grown = 0
    for _ in range(n):
        names = tuple(sorted(KERNELS)) if grown < GROWTH_BUDGET else BOUNDED
        for _attempt in range(3):
            launch = draw(_launch(prog, names))
            if not prog.racy(launch):
                launches.append(launch)
                grown += KERNELS[launch.kernel].grows
                break
    if not launches:  # never empty
        launches.append(Launch("fill", (View(0, 0, 4, 1),), 1.0, 4, 1))
    return replace(prog, launches=tuple(launches))


# ---------------------------------------------------------------------------
# running a program: eagerly, or traced (the same Python code)


def _compose(outer: slice, size: int, inner: slice) -> slice:
    """base[outer][inner] as one slice of base (a base of `size` elements)."""
    r = range(*outer.indices(size))[inner]
    return slice(r.start, r.stop if r.stop >= 0 else None, r.step)


def run_launches(prog: Program, bufs: tuple | list, roots: tuple | list = ()) -> None:
    """`roots[k]`, where given, is (base array, slice) with bufs[k] = base[slice]: views of
    it are taken from the base in one step, since numba-cuda 0.30 slices a device array
    with negative strides wrongly (an empty array at a wrong address; its dummyarray's
    Dim.__getitem__ steps by abs(stride))."""
    def view(v: View) -> Any:
        root = roots[v.buf] if v.buf < len(roots) else None
        if root is None:
            return bufs[v.buf][v.index()]
        base, outer = root
        return base[_compose(outer, base.shape[0], v.index())]

    for launch in prog.launches:
        args: list[Any] = [view(v) for v in launch.views]
        if launch.scalar is not None:
            args.append(launch.scalar)
        KERNELS[launch.kernel].fn[launch.blocks, launch.tpb](*args)


def _captured_views(prog: Program, bases: list) -> tuple:
    return tuple(bases[c.base][c.index()] for c in prog.captured)


def _captured_roots(prog: Program, bases: list) -> tuple:
    return tuple((bases[c.base], c.index()) for c in prog.captured)


def traced(prog: Program, captured: tuple = (), captured_roots: tuple = ()):
    """The program as the Python function tracegraph compiles; it closes over the
    captured views (device arrays made outside it, with their roots for run_launches)."""
    def program(*inputs):
        temps = tuple(tg.zeros(t.size, np.dtype(t.dtype)) for t in prog.temps)
        roots = (None,) * len(inputs) + captured_roots
        run_launches(prog, inputs + captured + temps, roots)
        return (inputs if prog.returns_inputs else ()) + temps
    return program


def initial(prog: Program, variant: int = 0) -> list[np.ndarray]:
    """The bases' starting values: small integers in [-8, 8] (another set per variant)."""
    return [((np.arange(b.size) * 7 + 5 * k + 3 * variant) % 17 - 8).astype(b.dtype)
            for k, b in enumerate(prog.bases)]


def caller_arguments(prog: Program, bases: list) -> tuple:
    args: list[Any] = []
    for inp in prog.inputs:
        args.append(args[inp.same_as] if inp.same_as is not None else bases[inp.base][inp.index()])
    return tuple(args)


def host(a: Any) -> np.ndarray:
    return a.copy_to_host() if hasattr(a, "copy_to_host") else np.array(a)


def _state(bases: list, temps: tuple | list) -> list[np.ndarray]:
    """What a run leaves behind: every base array (captured ones too) and every temp."""
    return [host(b) for b in bases] + [host(t) for t in temps]


def _captured_bases(prog: Program) -> dict[int, Any]:
    init = initial(prog)
    return {k: cuda.to_device(init[k]) for k, b in enumerate(prog.bases) if b.captured}


@functools.lru_cache(maxsize=256)
def eager(prog: Program, calls: tuple[int, ...] = (0,)) -> tuple[list[np.ndarray], ...]:
    """The state after each of a sequence of calls (one variant of the caller's arrays
    each), the launches run eagerly by Numba on device copies of the bases; captured
    bases keep their values from call to call. Memoized (a program is a value): the
    derandomized profile draws the same programs for each backend. Callers must not
    modify what it returns."""
    captured = _captured_bases(prog)
    states = []
    for variant in calls:
        bases = [captured[k] if k in captured else cuda.to_device(a)
                 for k, a in enumerate(initial(prog, variant))]
        temps = [cuda.to_device(np.zeros(t.size, t.dtype)) for t in prog.temps]
        roots = tuple((bases[i.base], i.index()) for i in prog.inputs) \
            + _captured_roots(prog, bases)
        run_launches(prog, caller_arguments(prog, bases) + _captured_views(prog, bases)
                     + tuple(temps), roots)
        states.append(_state(bases, temps))
    return tuple(states)


def _temps_of(prog: Program, args: tuple, results: Any) -> tuple:
    """The temps among the results, after checking what the caller gets back."""
    assert isinstance(results, tuple), type(results)
    k = prog.n_inputs if prog.returns_inputs else 0
    assert len(results) == k + len(prog.temps)
    for a, r in zip(args, results[:k]):
        assert r is a, "an input handed back must be the caller's own object"
    temps = results[k:]
    for t in temps:
        assert isinstance(t, np.ndarray) != prog.device_mode, \
            f"a result is {type(t).__name__} with {'device' if prog.device_mode else 'host'} inputs"
    return temps


class Compiled:
    """A program compiled for a backend, with the captured device arrays its function
    closes over (made once: like eager's, they keep their values from call to call)."""

    def __init__(self, prog: Program, backend: str):
        self.prog = prog
        self.captured = _captured_bases(prog)
        bases = [self.captured.get(k) for k in range(len(prog.bases))]
        self.f = tg.compile(traced(prog, _captured_views(prog, bases),
                                   _captured_roots(prog, bases)), backend=backend)

    def _arguments(self, variant: int) -> tuple[list, tuple]:
        bases = [self.captured[k] if k in self.captured
                 else a if b.placement == "host" else cuda.to_device(a)
                 for k, (a, b) in enumerate(zip(initial(self.prog, variant), self.prog.bases))]
        return bases, caller_arguments(self.prog, bases)

    def call(self, variant: int = 0, replay: bool = False) -> tuple[list[np.ndarray], tuple]:
        """(state, results) of one call (or replay) on fresh caller arrays."""
        bases, args = self._arguments(variant)
        results = (self.f.replay if replay else self.f)(*args)
        temps = _temps_of(self.prog, args, results)
        return _state(bases, temps), temps

    def trace(self) -> tg.Program:
        return self.f.trace(*self._arguments(0)[1])

    def in_order(self, seed: int, edit: Any = None) -> list[np.ndarray]:
        """A first call with the plan run on the simulator in the random valid order of its
        graph that `seed` picks (`edit`: a function changing the plan first)."""
        bases, args = self._arguments(0)
        plan = self.f.lower(*args)
        if edit is not None:
            plan = edit(plan)
        results = sim.build(plan, seed).run(list(args), [arguments.describe(a) for a in args])
        return _state(bases, _temps_of(self.prog, args, results))


@contextlib.contextmanager
def sim_order(seed: int | None) -> Iterator[None]:
    """TRACEGRAPH_SIM_ORDER set to `seed` (unset for None) while compiling."""
    old = os.environ.pop("TRACEGRAPH_SIM_ORDER", None)
    if seed is not None:
        os.environ["TRACEGRAPH_SIM_ORDER"] = str(seed)
    try:
        yield
    finally:
        os.environ.pop("TRACEGRAPH_SIM_ORDER", None)
        if old is not None:
            os.environ["TRACEGRAPH_SIM_ORDER"] = old


def assert_same(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    """Bit-identical arrays (so -0.0 vs 0.0 and NaN payloads count)."""
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, (what, k, g.dtype, w.dtype)
        if g.tobytes() != w.tobytes():
            np.testing.assert_array_equal(g, w, err_msg=f"{what}: array {k}")
            raise AssertionError(f"{what}: array {k} differs in its bits: {g!r} vs {w!r}")


# ---------------------------------------------------------------------------
# the DAG, against the program itself


def conflicts(prog: Program) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
    """(launch pairs i < j that touch a common element where one writes, pairs whose byte
    ranges overlap where one writes). An input that shares memory with a captured view
    conflicts with every view of its base (tracegraph cannot order it more finely)."""
    whole = prog.whole_inputs()
    touched = []
    for launch in prog.launches:
        touched.append([(set(prog.elements(v)), prog.extent(v), "w" in m, v.buf in whole)
                        for v, m in zip(launch.views, KERNELS[launch.kernel].modes)])
    exact: set[tuple[int, int]] = set()
    overlap: set[tuple[int, int]] = set()
    for j in range(len(touched)):
        for i in range(j):
            for ei, (mi, lo_i, hi_i), wi, whole_i in touched[i]:
                for ej, (mj, lo_j, hi_j), wj, whole_j in touched[j]:
                    if not (wi or wj) or mi != mj:
                        continue
                    if ei & ej:
                        exact.add((i, j))
                    if whole_i or whole_j or (lo_i < hi_j and lo_j < hi_i):
                        overlap.add((i, j))
    return exact, overlap


def launch_nodes(prog: Program, program: tg.Program) -> list[int]:
    """The graph node of each launch, in order."""
    nodes = [i for i, op in enumerate(program.ops) if op.kind == "kernel"]
    assert [program.ops[i].name for i in nodes] == \
        [KERNELS[la.kernel].fn.py_func.__name__ for la in prog.launches]
    return nodes


def check_dag(prog: Program, program: tg.Program) -> None:
    """Launches that touch a common element with a write are ordered; each direct edge
    between launches is a byte conflict (so only chains of conflicts order launches)."""
    nodes = launch_nodes(prog, program)
    launch_of = {n: k for k, n in enumerate(nodes)}
    exact, overlap = conflicts(prog)
    g = program.graph
    for i, j in sorted(exact):
        assert nx.has_path(g, nodes[i], nodes[j]), \
            f"launches {i} and {j} conflict but are not ordered"
    for u, v in g.edges:
        if u in launch_of and v in launch_of:
            assert (launch_of[u], launch_of[v]) in overlap, \
                f"edge {launch_of[u]}->{launch_of[v]} without a byte conflict"
    tg.verify(program, check_order=True)


# ---------------------------------------------------------------------------
# what a program exercises (hypothesis events, coverage)


def features(prog: Program) -> set[str]:
    """Named properties of a program, for coverage checks and hypothesis events."""
    found = {f"kernel {la.kernel}" for la in prog.launches}
    found |= {f"dtype {prog.dtype(b)}" for b in range(prog.n_buffers)}
    found |= {f"placement {b.placement}" for b in prog.bases}
    found.add("returns inputs" if prog.returns_inputs else "returns temps only")
    if prog.temps:
        found.add("temps")
    if any(i.same_as is not None for i in prog.inputs):
        found.add("same object twice")
    if any(i.step != 1 for i in prog.inputs):
        found.add("strided or reversed input")
    spans = []
    for k, inp in enumerate(prog.inputs):
        if inp.same_as is None:
            elems = [inp.start + inp.step * e for e in range(inp.size)]
            spans.append((inp.base, min(elems), max(elems) + 1, k))
    for a in spans:
        for b in spans:
            if a[3] < b[3] and a[0] == b[0]:
                if a[:3] == b[:3]:
                    found.add("equal inputs")
                elif a[1] < b[2] and b[1] < a[2]:
                    found.add("overlapping inputs")
                else:
                    found.add("disjoint inputs of one base")
    if prog.captured:
        found.add("captured view")
        spans_c = [(c.base, *prog.span(c)) for c in prog.captured]
        if any(a[1] < b[2] and b[1] < a[2] for k, a in enumerate(spans_c)
               for b in spans_c[k + 1:]):
            found.add("overlapping captured views")
        if prog.whole_inputs():
            found.add("input overlapping a captured view")
        if any(prog.bases[i.base].captured for i in prog.inputs):
            found.add("input on a captured base")
    steps = {v.step for la in prog.launches for v in la.views}
    found |= {"strided view" for s in steps if abs(s) > 1} | \
        {"reversed view" for s in steps if s < 0}
    if any(la.blocks * la.tpb > la.views[0].length for la in prog.launches):
        found.add("idle threads")
    if any(la.blocks > 1 for la in prog.launches):
        found.add("several blocks")
    exact, overlap = conflicts(prog)
    if overlap - exact:
        found.add("byte overlap without a common element")
    views = [(prog.extent(v), la_k) for la_k, la in enumerate(prog.launches) for v in la.views]
    for (ma, la_, ha), ka in views:
        for (mb, lb, hb), kb in views:
            if ka < kb and ma == mb and la_ < hb and lb < ha:
                found.add("equal ranges" if (la_, ha) == (lb, hb) else "unequal overlapping ranges")
    n = len(prog.launches)
    found.add(f"launches {'1-8' if n <= 8 else '9-32' if n <= 32 else '33-64'}")
    return found
