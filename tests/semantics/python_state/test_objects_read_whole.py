"""Objects the code reads whole (vars(), __dict__, dataclasses.astuple/asdict/fields,
nested dataclasses) and attributes read by names held in tuples, sets, dict keys or enum
values: a change of any value read is followed (a replay refuses); what the code does not
read whole (the traced object's own counter, through vars(self) in a callee, a nested
helper or a lambda reading its own parameter) is no guard."""
from __future__ import annotations

import dataclasses
import enum

import numpy as np
import pytest
from eager import against_eager
from numba import cuda
from small_kernels import axpb
from trace_counts import misses

import tracegraph as tg


@dataclasses.dataclass
class SolverCfg:
    omega: float = 0.8
    shift: float = 1.0


def _launch(x, *, omega, shift):
    axpb[1, 8](x, omega, shift)


# ---------------------------------------------------------------- whole-object reads
WHOLE = {
    "astuple": lambda cfg, x: axpb[1, 8](x, *dataclasses.astuple(cfg)),
    "vars_items": lambda cfg, x: axpb[1, 8](x, *[v for _, v in vars(cfg).items()]),
    "dict_values": lambda cfg, x: axpb[1, 8](x, *cfg.__dict__.values()),
    "asdict_kwargs": lambda cfg, x: _launch(x, **dataclasses.asdict(cfg)),
    "vars_kwargs": lambda cfg, x: _launch(x, **vars(cfg)),
    "fields_getattr": lambda cfg, x: axpb[1, 8](
        x, *[getattr(cfg, f.name) for f in dataclasses.fields(cfg)]),
}


@pytest.mark.parametrize("how", list(WHOLE))
def test_values_read_through_the_whole_config_are_checked(backend, how):
    cfg = SolverCfg()
    read = WHOLE[how]

    def step(x):
        read(cfg, x)
    against_eager(step, backend, [("relaxation changed", lambda: setattr(cfg, "omega", 1.2))])


def test_a_solver_relaxation_unpacked_with_astuple_is_followed(backend, fixed_device_arrays):
    # the realistic program: the host loop anneals the relaxation between solves
    class Solver:
        def __init__(self):
            self.cfg = SolverCfg()

        def sweep(self, u):
            omega, shift = dataclasses.astuple(self.cfg)
            axpb[1, 8](u, omega, shift)
            axpb[1, 8](u, omega, 0.0)

    s = Solver()
    f = tg.compile(s.sweep, backend=backend)
    u = cuda.to_device(np.ones(8))
    f(u)
    s.cfg.omega = 0.5
    with pytest.raises(tg.SignatureError):  # the graph was traced with omega = 0.8
        f.replay(u)


# ---------------------------------------------------------- names held in a tuple
PARAMS = ("omega", "shift")          # a module-level tuple of names


PARAMS_LIST = ["omega", "shift"]     # the same names in a list: checked (baseline)


WEIGHTS = {"omega": 1.0, "shift": 1.0}


NAMESET = frozenset(["omega"])


class Name(enum.Enum):
    OMEGA = "omega"
    SHIFT = "shift"


class _Holder:
    order = ("omega", "shift")       # a class attribute tuple

    def __init__(self):
        self.cfg = SolverCfg()
        self.names = ("omega", "shift")  # an instance attribute tuple


NAMED = {
    "list (baseline)": lambda h, x: axpb[1, 8](x, *[getattr(h.cfg, n) for n in PARAMS_LIST]),
    "global tuple": lambda h, x: axpb[1, 8](x, *[getattr(h.cfg, n) for n in PARAMS]),
    "global tuple item": lambda h, x: axpb[1, 8](x, getattr(h.cfg, PARAMS[0]), 1.0),
    "instance tuple": lambda h, x: axpb[1, 8](x, *[getattr(h.cfg, n) for n in h.names]),
    "class tuple": lambda h, x: axpb[1, 8](x, *[getattr(h.cfg, n) for n in h.order]),
    "dict keys": lambda h, x: axpb[1, 8](x, *[getattr(h.cfg, n) * w for n, w in WEIGHTS.items()]),
    "frozenset": lambda h, x: axpb[1, 8](x, *[getattr(h.cfg, n) for n in NAMESET], 1.0),
    "enum values": lambda h, x: axpb[1, 8](x, *[getattr(h.cfg, m.value) for m in Name]),
}


@pytest.mark.parametrize("how", list(NAMED))
def test_getattr_by_names_held_in_a_tuple_is_checked(backend, how):
    h = _Holder()
    read = NAMED[how]

    def step(x):
        read(h, x)
    against_eager(step, backend, [("omega changed", lambda: setattr(h.cfg, "omega", 1.2))])


# ------------------------------------------------ vars(self) in a callee's method
class _Opt:
    def __init__(self):
        self.lr = 0.1

    def hp(self):
        return vars(self)   # the optimizer's hyper-parameters, read whole


class _Model:
    def __init__(self):
        self.omega = 0.8
        self.opt = _Opt()
        self.it = 0          # the host loop's step counter: never read by step()

    def step(self, x):
        hp = self.opt.hp()
        axpb[1, 8](x, self.omega, hp["lr"])


def test_vars_self_in_a_callee_does_not_check_the_traced_objects_counter(backend):
    m = _Model()
    f = tg.compile(m.step, backend=backend)
    x = cuda.to_device(np.ones(8))
    for _ in range(5):
        f(x)
        m.it += 1            # host bookkeeping between steps
    assert misses(f) == 1   # reading self.opt whole must not read m whole: 1, not 5


def test_vars_self_in_a_callee_still_follows_the_optimizer(backend):
    # (what must keep working: the optimizer's own attributes are read whole)
    m = _Model()

    def step(x):
        m.step(x)
    against_eager(step, backend, [("lr changed", lambda: setattr(m.opt, "lr", 0.5))])
    m2 = _Model()
    f = tg.compile(m2.step, backend=backend)
    x = cuda.to_device(np.ones(8))
    for _ in range(3):
        f(x)
        m2.it += 1
    assert misses(f) == 1


# ------------------------------------------- astuple / asdict recurse
@dataclasses.dataclass
class Relax:
    omega: float = 0.8
    shift: float = 1.0


@dataclasses.dataclass
class NestedSolverCfg:
    relax: Relax = dataclasses.field(default_factory=Relax)
    sweeps: int = 1


def test_nested_dataclass_read_by_astuple_is_checked(backend):
    cfg = NestedSolverCfg()

    def step(x):
        (omega, shift), sweeps = dataclasses.astuple(cfg)
        for _ in range(sweeps):
            axpb[1, 8](x, omega, shift)
    against_eager(step, backend, [("relax.omega annealed",
                                   lambda: setattr(cfg.relax, "omega", 1.2))])


class _LrOpt:
    def __init__(self, lr):
        self.lr = lr


# ------------------------------ nested helper of the traced method reads its param
class _ModelNested:
    def __init__(self):
        self.opt = _LrOpt(0.1)
        self.it = 0          # host-side step counter, never read by step()

    def step(self, x):
        def show(c):
            return vars(c)
        axpb[1, 8](x, 1.0, show(self.opt)["lr"])


def test_nested_helper_reading_its_param_whole_does_not_read_the_model_whole(backend):
    m = _ModelNested()
    f = tg.compile(m.step, backend=backend)
    x = cuda.to_device(np.ones(8))
    for _ in range(5):
        f(x)
        m.it += 1
    assert misses(f) == 1   # the nested code's parameter is not m: 1 trace, not 5


def test_nested_helper_still_follows_the_param(backend):
    m = _ModelNested()
    f = tg.compile(m.step, backend=backend)
    x = cuda.to_device(np.ones(8))
    f(x)
    m.opt.lr = 0.7
    y = cuda.to_device(np.ones(8))
    f(y)
    np.testing.assert_allclose(y.copy_to_host(), np.full(8, 1.7))


class _NetCallable:
    def __init__(self):
        self.opt = _LrOpt(0.1)
        self.it = 0

    def __call__(self, x):
        unpack = lambda o: vars(o)  # noqa: E731
        axpb[1, 8](x, 1.0, unpack(self.opt)["lr"])


def test_callable_object_with_a_lambda_reading_its_param_whole(backend):
    n = _NetCallable()
    f = tg.compile(n, backend=backend)
    x = cuda.to_device(np.ones(8))
    for _ in range(5):
        f(x)
        n.it += 1
    assert misses(f) == 1   # the nested code's parameter is not m: 1 trace, not 5


# ------------------------------ vars(self) with self captured by a closure
class _OptClosure:
    def __init__(self, lr):
        self.lr = lr

    def hp(self):
        get = lambda k: getattr(self, k)  # noqa: E731,F841  (self becomes a cell)
        return vars(self)


class _ModelClosure:
    def __init__(self):
        self.opt = _OptClosure(0.1)
        self.it = 0

    def step(self, x):
        axpb[1, 8](x, 1.0, self.opt.hp()["lr"])


def test_vars_self_with_self_in_a_closure_does_not_read_the_model_whole(backend):
    m = _ModelClosure()
    f = tg.compile(m.step, backend=backend)
    x = cuda.to_device(np.ones(8))
    for _ in range(5):
        f(x)
        m.it += 1
    assert misses(f) == 1   # self in a cell is still the callee's own: 1 trace, not 5
