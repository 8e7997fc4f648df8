"""Random programs (tests/programs.py) compiled by tracegraph against eager Numba.

Two profiles:

- CI (always): a derandomized profile of `TRACEGRAPH_FUZZ_EXAMPLES` programs (default
  100) on each backend of the `backend` fixture ("sim", and "cuda": the GPU, or its CPU
  stand-in without one). Each program must give bit-identical results and leave every
  caller array bit-identical to eager Numba: on the first call, and on a replay with
  fresh caller arrays holding other values (the results held from the first call must
  not change). On sim it must also do so in a random valid order of its graph, through
  `tracegraph.backends.sim.build(plan, seed)` (even seeds) or `TRACEGRAPH_SIM_ORDER`
  (odd seeds). Its graph must order every two launches that touch a common element
  where one writes, and each direct edge between launches must stand for a real byte
  conflict.
- GPU (`TRACEGRAPH_FUZZ=gpu`, marked slow, skipped unless a GPU is usable): a larger,
  randomized profile (`TRACEGRAPH_FUZZ_GPU_EXAMPLES`, default 1000) comparing the `cuda`
  backend with eager Numba on the GPU and with `sim` (program order and a random order).
  The CI profile runs too.

Hand-written programs for each kind of hazard (RAW, WAR, WAW; equal and overlapping
unequal ranges; inputs and captured arrays sharing memory; covering writes) run on both
backends as well, so a dependency edge the pass drops fails here whatever hypothesis
draws; and the checks themselves are shown to fail on a graph with an edge missing or
one too many.
"""
from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, currently_in_test_context, given, settings
from hypothesis import event as _hypothesis_event
from hypothesis import strategies as st
from programs import (
    KERNELS,
    Base,
    Compiled,
    Input,
    Launch,
    Program,
    Temp,
    View,
    assert_same,
    check_dag,
    conflicts,
    eager,
    features,
    host,
    programs,
    sim_order,
)

from tracegraph.backends import gpu_usable

FUZZ = os.environ.get("TRACEGRAPH_FUZZ", "").strip().lower()
COUNTS: dict[str, int] = {}


def event(value: str) -> None:
    """A hypothesis event, when inside a hypothesis test (the hazard tests are not)."""
    if currently_in_test_context():
        _hypothesis_event(value)


def _settings(examples: int, derandomize: bool) -> settings:
    return settings(max_examples=examples, derandomize=derandomize, deadline=None,
                    database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much,
                                           HealthCheck.function_scoped_fixture])


CI = _settings(int(os.environ.get("TRACEGRAPH_FUZZ_EXAMPLES", 100)), derandomize=True)
GPU = _settings(int(os.environ.get("TRACEGRAPH_FUZZ_GPU_EXAMPLES", 1000)), derandomize=False)


def _note(prog: Program, profile: str) -> None:
    for f in sorted(features(prog)):
        if f.startswith(("launches", "placement")):
            event(f)
    COUNTS[f"{profile} programs"] = COUNTS.get(f"{profile} programs", 0) + 1
    COUNTS["launches"] = COUNTS.get("launches", 0) + len(prog.launches)


def check_compiled(prog: Program, backend: str) -> list:
    """The first call and a replay of `prog` compiled for `backend` against eager Numba.
    Returns eager's state after the first call."""
    want, want_next = eager(prog, (0, 1))
    c = Compiled(prog, backend)
    got, results = c.call()
    assert_same(got, want, f"{backend}, first call")
    check_dag(prog, c.f.latest.program)
    held = [host(r) for r in results]
    got, _ = c.call(variant=1, replay=True)
    assert_same(got, want_next, f"{backend}, replay on other arrays")
    assert_same([host(r) for r in results], held, f"{backend}: held results after a replay")
    return want


def check_order(prog: Program, want: list, seed: int) -> None:
    """A first call in the random valid order `seed` picks: the plan run by sim.build (even
    seeds), or compiled under TRACEGRAPH_SIM_ORDER (odd seeds)."""
    if seed % 2 == 0:
        assert_same(Compiled(prog, "sim").in_order(seed), want, f"sim, order seed {seed}")
        return
    with sim_order(seed):
        c = Compiled(prog, "sim")
        got, _ = c.call()
    assert c.f.latest.executable.seed == seed
    assert_same(got, want, f"sim, TRACEGRAPH_SIM_ORDER={seed}")
    order = list(c.f.latest.executable.order)
    event("shuffled" if order != sorted(order) else "program order")


# ---------------------------------------------------------------------------
# the profiles


@CI
@given(prog=programs(), seed=st.integers(0, 2**16))
def test_random_programs_match_eager(backend, prog, seed):
    _note(prog, f"ci {backend}")
    want = check_compiled(prog, backend)
    if backend == "sim":
        check_order(prog, want, seed)


@pytest.mark.slow
@pytest.mark.skipif(FUZZ != "gpu", reason="the GPU profile runs with TRACEGRAPH_FUZZ=gpu")
@pytest.mark.skipif(not gpu_usable(), reason="no CUDA GPU usable here")
@GPU
@given(prog=programs(), seed=st.integers(0, 2**16))
def test_random_programs_cuda_matches_sim_and_eager(prog, seed):
    _note(prog, "gpu")
    want = check_compiled(prog, "cuda")
    got, _ = Compiled(prog, "sim").call()
    assert_same(got, want, "sim vs eager")
    check_order(prog, want, seed)


# ---------------------------------------------------------------------------
# hand-written hazards: each fails if the dependency pass drops its edge

F64 = (Base("float64", 16, "host"),)
X = (Input(0, 0, 16),)
T = (Temp("float64", 16),)


def _copy(src: View, dst: View) -> Launch:
    return Launch("copy", (src, dst))


def _fill(v: View, value: float = 7.0) -> Launch:
    return Launch("fill", (v,), value)


def v(buf: int, start: int, length: int = 8, step: int = 1) -> View:
    return View(buf, start, length, step)


HAZARDS = {
    "RAW-equal-ranges": Program(F64, X, T, (_fill(v(0, 0)), _copy(v(0, 0), v(1, 0)))),
    "RAW-unequal-overlap": Program(F64, X, T, (_fill(v(0, 4)), _copy(v(0, 0), v(1, 0)))),
    "WAR-equal-ranges": Program(F64, X, T, (_copy(v(0, 0), v(1, 0)), _fill(v(0, 0)))),
    "WAR-unequal-overlap": Program(F64, X, T, (_copy(v(0, 0), v(1, 0)), _fill(v(0, 4)))),
    "WAW-unequal-overlap": Program(F64, X, (), (_fill(v(0, 0), 1.0), _fill(v(0, 4)))),
    "WAR-one-element": Program(F64, X, T, (_copy(v(0, 0), v(1, 0)), _fill(v(0, 7, 4)))),
    "in-place-then-a-read-of-part": Program(F64, X, T, (
        Launch("iscale", (v(0, 2),), -1.0), _copy(v(0, 6, 4), v(1, 0, 4)))),
    "a-partial-write-does-not-retire-a-read": Program(F64, X, T, (
        _copy(v(0, 0), v(1, 0)), _fill(v(0, 4), 1.0), _fill(v(0, 0, 4)))),
    "a-covering-write-retires-a-read": Program(F64, X, T, (
        _copy(v(0, 2, 4), v(1, 0, 4)), _fill(v(0, 0), 1.0), _fill(v(0, 3, 4)))),
    "RAW-strided-then-reversed": Program(F64, X, T, (
        _fill(v(0, 0, 8, 2)), _copy(v(0, 14, 8, -2), v(1, 0)))),
    "WAR-reversed-then-unequal": Program(F64, X, T, (
        _copy(v(0, 7, 8, -1), v(1, 0)), _fill(v(0, 5, 4)))),
    "interleaved-writes-no-common-element": Program(F64, X, T, (
        _fill(v(0, 0, 8, 2), 1.0), _fill(v(0, 1, 8, 2)), _copy(v(0, 0), v(1, 0)))),
    "overlapping-inputs-RAW": Program(
        (Base("float64", 24, "host"),), (Input(0, 0, 16), Input(0, 8, 16)), T,
        (_fill(v(0, 8)), _copy(v(1, 0), v(2, 0)))),
    "overlapping-device-inputs-WAR": Program(
        (Base("float32", 24, "device"),), (Input(0, 0, 16), Input(0, 4, 16)), T,
        (_copy(v(1, 4), v(2, 0)), _fill(v(0, 10, 4)))),
    "overlapping-reversed-inputs-WAW": Program(
        (Base("int32", 24, "host"),), (Input(0, 15, 16, -1), Input(0, 8, 16)), (),
        (_fill(v(0, 0), 1.0), _fill(v(1, 0)))),
    "the-same-object-twice": Program(
        (Base("float64", 16, "device"),), (Input(0, 0, 16), Input(0, 0, 16, same_as=0)), T,
        (_fill(v(0, 0)), _copy(v(1, 4), v(2, 0))), returns_inputs=False),
    "equal-views-two-objects": Program(
        (Base("int32", 16, "host"),), (Input(0, 0, 16), Input(0, 0, 16)), T,
        (_copy(v(1, 0), v(2, 0)), _fill(v(0, 4))), returns_inputs=False),
    "fan-out-fan-in-in-place": Program(F64, X, (Temp("float64", 8), Temp("float64", 8)), (
        Launch("split", (v(0, 0), v(1, 0), v(2, 0))),
        Launch("avg3", (v(1, 0), v(2, 0), v(0, 8), v(0, 0))),
        Launch("iadd", (v(1, 0), v(0, 4))))),
    # captured device arrays (the body closes over views of C): bound by address
    "captured-overlapping-views-RAW": Program(
        (*F64, Base("float64", 24, "device", captured=True)), X, T,
        (_fill(v(1, 8)), _copy(v(2, 0), v(3, 0))),
        captured=(Input(1, 0, 16), Input(1, 8, 16))),
    "captured-reversed-views-WAR": Program(
        (*F64, Base("float32", 24, "device", captured=True)), X, T,
        (_copy(v(1, 0), v(3, 0)), _fill(v(2, 2, 4))),
        captured=(Input(1, 15, 16, -1), Input(1, 4, 16))),
    "input-overlapping-a-captured-view-WAR": Program(
        (Base("float64", 24, "device", captured=True),), (Input(0, 8, 16),), T,
        (_copy(v(1, 0), v(2, 0)), _fill(v(0, 0, 4))),
        captured=(Input(0, 4, 12),)),
    "input-overlapping-a-captured-view-RAW": Program(
        (Base("int32", 24, "device", captured=True),), (Input(0, 0, 16),), T,
        (_fill(v(1, 0, 4)), _copy(v(0, 8), v(2, 0))),
        captured=(Input(0, 8, 16),), returns_inputs=False),
}


@pytest.mark.parametrize("name", sorted(HAZARDS))
def test_hazards(backend, name):
    prog = HAZARDS[name]
    exact, _ = conflicts(prog)
    assert exact or name.startswith("interleaved"), "a hazard program needs a conflict"
    assert not any(prog.racy(la) for la in prog.launches)
    want = check_compiled(prog, backend)
    if backend == "sim":
        for seed in range(6):
            check_order(prog, want, seed)


# ---------------------------------------------------------------------------
# the generator and the checks themselves


def test_generated_programs_cover_the_space():
    """The strategy makes what this module claims to test."""
    seen: dict[str, int] = {}

    @settings(max_examples=120, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(prog=programs())
    def collect(prog):
        for f in features(prog):
            seen[f] = seen.get(f, 0) + 1

    collect()
    want = {f"kernel {k}" for k in KERNELS} | {f"dtype {d}" for d in ("float32", "float64",
                                                                       "int32")}
    want |= {"placement host", "placement device", "returns inputs", "returns temps only",
             "temps", "same object twice", "strided or reversed input", "equal inputs",
             "overlapping inputs", "disjoint inputs of one base", "strided view",
             "reversed view", "idle threads", "several blocks",
             "byte overlap without a common element", "equal ranges",
             "unequal overlapping ranges", "launches 1-8", "launches 9-32", "launches 33-64",
             "captured view", "overlapping captured views", "input overlapping a captured view",
             "input on a captured base"}
    assert want <= set(seen), sorted(want - set(seen))
    assert min(seen[f] for f in want) >= 2, {f: seen[f] for f in want if seen[f] < 2}


def _two_independent_launches() -> Program:
    return Program(F64, X, T, (
        Launch("iscale", (v(0, 0),), 0.5),
        _copy(v(0, 0), v(0, 8)),          # RAW on x[0:8]
        _fill(v(1, 0), 1.0)))             # independent of both


def test_checks_catch_a_missing_or_extra_edge():
    """check_dag is not vacuous: a graph missing its edge, or with an edge that stands for
    no conflict, fails it."""
    prog = _two_independent_launches()
    program = Compiled(prog, "sim").trace()
    check_dag(prog, program)
    nodes = [i for i, op in enumerate(program.ops) if op.kind == "kernel"]
    bare = program.graph.copy()
    bare.remove_edges_from([(u, w) for u, w in program.graph.edges
                            if u in nodes and w in nodes])
    with pytest.raises(AssertionError, match="conflict but are not ordered"):
        check_dag(prog, program.replace(graph=bare))
    extra = program.graph.copy()
    extra.add_edge(nodes[0], nodes[2])
    with pytest.raises(AssertionError, match="without a byte conflict"):
        check_dag(prog, program.replace(graph=extra))


def _without_launch_edges(plan):
    kernels = {n.index for n in plan.nodes if n.kind == "kernel"}
    broken = replace(plan, nodes=tuple(
        replace(n, deps=tuple(d for d in n.deps if not (n.index in kernels and d in kernels)))
        for n in plan.nodes))
    assert broken.nodes != plan.nodes
    return broken


def test_random_orders_catch_a_missing_edge():
    """Running a plan whose launches lost their dependencies in random orders gives a
    result other than eager's for some seed (so the order runs can see a dropped edge)."""
    prog = HAZARDS["WAR-unequal-overlap"]
    (want,) = eager(prog)
    outcomes = set()
    for seed in range(16):
        try:
            assert_same(Compiled(prog, "sim").in_order(seed, _without_launch_edges), want,
                        "broken")
            outcomes.add("same")
        except AssertionError:
            outcomes.add("differs")
    assert outcomes == {"same", "differs"}


def test_bit_identity():
    """assert_same compares bits: -0.0 is not 0.0."""
    assert_same([np.array([0.0, 1.0])], [np.array([0.0, 1.0])], "equal")
    with pytest.raises(AssertionError):
        assert_same([np.array([-0.0])], [np.array([0.0])], "signed zero")
    with pytest.raises(AssertionError):
        assert_same([np.array([1.0], np.float32)], [np.array([1.0])], "dtype")


def test_zz_counts():
    """The profiles ran all their programs (the counts show with -s or -rA)."""
    if not COUNTS:
        pytest.skip("the random-program tests did not run in this pytest run")
    print(f"\nrandom program counts: {COUNTS}")
    for profile, n in COUNTS.items():
        if profile.startswith("ci "):
            assert n == CI.max_examples, (profile, n)
        elif profile == "gpu programs":
            assert n == GPU.max_examples, (profile, n)
