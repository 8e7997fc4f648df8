"""Hostile round 33 (a helper writing whole programs, against 2195532): two silent wrong
answers, both fixed (an object read whole is "{name}" in the code's names; a getattr over
names a tuple, set, dict or enum holds takes those names).

SILENT WRONG ANSWERS
  1. Python values a function reads through the whole of a config object -- by walking
     `vars(cfg)` / `cfg.__dict__` (`.items()`, `.values()`), by `dataclasses.astuple(cfg)`,
     by `**dataclasses.asdict(cfg)` / `**vars(cfg)` into a helper of its own, or by
     `getattr(cfg, f.name) for f in dataclasses.fields(cfg)` -- are not checked: a
     schedule that changes `cfg.omega` between calls keeps replaying the old graph
     (no retrace, `f.replay` does not refuse). sharp-edges.md says every entry of a dict
     the code walks (`.items()`, `.values()`) is checked.
  2. Attribute names held in a *tuple* (a global `PARAMS = ("a", "b")`, an attribute
     `self.fields = (...)`), in a dict's keys or a set, or in an Enum's values, read with
     `getattr(cfg, name)`: the value is not checked, while the same names held in a list
     are (and a tuple constant in the code is).
"""
from __future__ import annotations

import dataclasses
import enum

import numpy as np
import pytest
from eager import against_eager
from numba import cuda
from small_kernels import axpb

import tracegraph as tg


@dataclasses.dataclass
class SolverCfg:
    omega: float = 0.8
    shift: float = 1.0


def _launch(x, *, omega, shift):
    axpb[1, 8](x, omega, shift)


# ---------------------------------------------------------------- (1) whole-object reads
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


# ---------------------------------------------------------- (2) names held in a tuple
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
