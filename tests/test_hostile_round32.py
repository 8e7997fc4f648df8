"""Hostile round 32 (a helper, against b7eb3ba + e75689a + d7ea938 + 1b73068: TypeGuard /
AbsentGuard, "?names" from hasattr/getattr, `vars(m)`/`__dict__`, exception tables,
sentinels a global names checked by identity).

REGRESSIONS (each passes on 70cae7c):
  1. a `with` block around the body (a lock, np.errstate, a timer) makes every attribute
     loaded in it an absence-checked name on every object reached: 200 layers ->
     1,411 AbsentGuards, checks 7x slower; with more layers the 20,000-value search
     bound is hit and a late layer's value is no longer checked (silent wrong answer);
  2. `vars(...)` / `__dict__` anywhere in a code object makes every string constant of
     it (dict keys `HP["lr"]`...) absence-checked on every object: 200 layers -> 1,206
     AbsentGuards, checks ~9x slower;
  3. one getattr with a computed name (`getattr(KERNELS, self.act)`) makes every keyword
     argument name of every call (3.11+/3.12 KW_NAMES const tuples) absence-checked on
     every object: 100 layers -> 318 AbsentGuards, checks ~3x slower;
  4. an object a module global happens to name (`cfg`, found because the code uses the
     attribute name `.cfg`) is checked by identity everywhere: rebuilding a frozen
     config each step (`cfg = replace(cfg, step=i); env.cfg = cfg`) retraces EVERY call
     (70cae7c: one trace).
REMAINING SILENT WRONG ANSWERS of the absence family:
  5. `except (KeyError, AttributeError)` / `except ERRORS` (the handler's first load is
     not AttributeError);
  7. a class pattern's keyword attribute (`match m: case Cfg(scale=s)`): the attribute
     name is a const tuple, never a "name", so its value is not checked.
All fixed. Not fixed, documented (docs/sharp-edges.md): 6. the name passed as a constant
to a helper that calls getattr/hasattr (`option(m, "bias")`), or held by a local variable
(`key = "bias"`).
"""
from __future__ import annotations

import dataclasses
import threading
import warnings

import numpy as np
import pytest
from eager import against_eager
from numba import cuda
from small_kernels import add_to
from trace_counts import guards_of, misses

import tracegraph as tg


@cuda.jit
def relu_to(x, v):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = max(x[i], v)




N = 8


# ============================================================================ regressions
# (1) a `with` block around the body


class _Norm:
    def __init__(self):
        self.eps = 1e-5
        self.gain = 1.0


class _Layer:
    def __init__(self):
        self.scale = 1.0
        self.shift = 0.0
        self.norm = _Norm()


class _Locked:
    """A step that holds a lock (or np.errstate, a profiler range) around its body."""

    def __init__(self, stages, n):
        self.stages = [[_Layer() for _ in range(n)] for _ in range(stages)]
        self.lock = threading.Lock()

    def run_with(self, x):
        with self.lock:
            s = 0.0
            for st in self.stages:
                for l in st:
                    s += l.scale * l.norm.gain + l.norm.eps + l.shift
            add_to[1, 8](x, s)

    def run_errstate(self, x):
        with np.errstate(over="ignore"):
            s = 0.0
            for st in self.stages:
                for l in st:
                    s += l.scale * l.norm.gain + l.norm.eps + l.shift
            add_to[1, 8](x, s)

    def run_plain(self, x):
        s = 0.0
        for st in self.stages:
            for l in st:
                s += l.scale * l.norm.gain + l.norm.eps + l.shift
        add_to[1, 8](x, s)


@pytest.mark.parametrize("meth", ["run_with", "run_errstate"])
def test_a_with_block_does_not_check_every_loaded_name_absent_on_every_object(backend, meth):
    # SLOWDOWN. `with` is read as "may swallow AttributeError": scale, shift, norm, eps,
    # gain, stages, lock become "?names" and every layer / norm / the model is checked to
    # lack each one it lacks (self.eps, self.stages[0][3].eps, ...): 1,411 AbsentGuards
    # for 200 layers, checks ~2.0 ms a call against ~0.28 ms on 70cae7c (~0.42 ms for the
    # same code without the `with`)
    x = cuda.to_device(np.ones(N))
    w, p = _Locked(1, 200), _Locked(1, 200)
    fw = tg.compile(getattr(w, meth), backend=backend)
    fp = tg.compile(p.run_plain, backend=backend)
    fw(x)
    fp(x)
    absent = guards_of(fw, "AbsentGuard")
    assert len(absent) < 50, f"{len(absent)} AbsentGuards, e.g. " \
        f"{[g.ref.describe() for g in absent[:4]]}"


def test_a_with_block_does_not_push_a_late_layer_past_the_search_bound(backend):
    # SILENT WRONG ANSWER caused by the regression: 10 stages x 200 layers are checked
    # (8,013 guards, no warning) on 70cae7c and without the `with`; with it the absence
    # checks exhaust the 20,000-value search and the last layer's gain is not checked:
    # the replay gives 2000.02 where eager gives 2999.02
    m = _Locked(10, 200)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the search must not stop at its bound
        against_eager(lambda x: m.run_with(x), backend,
                      [("last layer changed",
                        lambda: setattr(m.stages[-1][-1].norm, "gain", 1000.0))])


# (2) vars() / __dict__ in a code object: every string constant of it


class _Hyper:
    def __init__(self, n):
        self.layers = [_Layer() for _ in range(n)]
        self.hp = {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.0, "warmup": 10,
                   "dropout": 0.0}

    def run_vars(self, x):
        extra = dict(vars(self.opts)) if hasattr(self, "opts") else {}
        s = self.hp["lr"] + self.hp["momentum"] + self.hp["weight_decay"] + \
            self.hp["warmup"] + self.hp["dropout"] + len(extra)
        for l in self.layers:
            s += l.scale + l.shift
        add_to[1, 8](x, s)

    def run_plain(self, x):
        extra = {}
        s = self.hp["lr"] + self.hp["momentum"] + self.hp["weight_decay"] + \
            self.hp["warmup"] + self.hp["dropout"] + len(extra)
        for l in self.layers:
            s += l.scale + l.shift
        add_to[1, 8](x, s)


def test_vars_in_the_code_does_not_make_every_dict_key_an_absence_check(backend):
    # SLOWDOWN. The dict keys "lr", "momentum", ... are string constants of a code object
    # that calls vars(): each becomes "?lr" and every layer is checked to lack it
    # (self.layers[7].lr): 1,206 AbsentGuards for 200 layers, checks ~1.4 ms a call
    # against 0.15 ms on 70cae7c
    x = cuda.to_device(np.ones(N))
    a, b = _Hyper(200), _Hyper(200)
    fa = tg.compile(a.run_vars, backend=backend)
    fb = tg.compile(b.run_plain, backend=backend)
    fa(x)
    fb(x)
    absent = guards_of(fa, "AbsentGuard")
    assert len(absent) < 50, f"{len(absent)} AbsentGuards, e.g. " \
        f"{[g.ref.describe() for g in absent[:6]]}"


# (3) a getattr with a computed name: every keyword argument name is "absent"


class _Kernels:
    relu = relu_to
    add = add_to


def _combine(a, b, *, weight=1.0, offset=0.0, clip=None):
    return a * weight + b + offset


class _ActLayer:
    def __init__(self, act):
        self.act = act
        self.scale = 1.0
        self.bias = 0.5

    def forward(self, x):  # activation picked by name (getattr dispatch)
        v = _combine(self.scale, self.bias, weight=2.0, offset=0.0, clip=None)
        getattr(_Kernels, self.act)[1, 8](x, v)


class _ActModel:
    def __init__(self, n):
        self.layers = [_ActLayer("add" if i % 2 else "relu") for i in range(n)]

    def run(self, x):
        for l in self.layers:
            l.forward(x)


def test_keyword_argument_names_are_not_absence_checked(backend):
    # SLOWDOWN. `getattr(_Kernels, self.act)` sets "?*", and then every string of every
    # const tuple of the code is taken as an attribute name it may test: the KW_NAMES
    # tuple ('weight', 'offset', 'clip') of a keyword call too, checked absent on every
    # layer (self.layers[3].weight, ...): 318 AbsentGuards for 100 layers, checks ~3x
    # those of 70cae7c (0.48 ms against 0.16 ms)
    x = cuda.to_device(np.ones(N))
    m = _ActModel(100)
    f = tg.compile(m.run, backend=backend)
    f(x)
    kw = [g.ref.describe() for g in guards_of(f, "AbsentGuard")
          if g.ref.describe().rsplit(".", 1)[-1] in ("weight", "offset", "clip")]
    assert not kw, f"{len(kw)} absence checks of keyword argument names, e.g. {kw[:4]}"


# (4) a sentinel "a global names": any object a module global happens to hold


@dataclasses.dataclass(frozen=True)
class _Config:
    lr: float = 0.5
    step: int = 0


class _Env:
    def __init__(self, cfg):
        self.cfg = cfg

    def run(self, x):
        add_to[1, 8](x, self.cfg.lr)


def test_a_config_rebuilt_every_step_does_not_retrace_every_call(backend):
    # NEEDLESS RETRACE. The traced code uses the attribute name `.cfg`, the module has a
    # global `cfg` (the same object as env.cfg): it is taken for a sentinel and env.cfg
    # is checked by identity. A frozen config rebuilt each step with only a field the
    # code never reads changed (`dataclasses.replace(cfg, step=i)`) traces on every call:
    # 10 traces in 10 calls (70cae7c: 1)
    ns = {"add_to": add_to, "_Env": _Env, "_Config": _Config}
    exec("cfg = _Config()\nenv = _Env(cfg)\ndef step(x):\n    env.run(x)\n", ns)
    f = tg.compile(ns["step"], backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(10):
            ns["cfg"] = dataclasses.replace(ns["cfg"], step=i)
            ns["env"].cfg = ns["cfg"]
            x = cuda.to_device(np.zeros(N))
            f(x)
            assert x.copy_to_host()[0] == 0.5
    assert misses(f) <= 2, f.cache_info()


# ============================================================ remaining silent wrong answers


def _absence_step(body):
    class M:
        pass
    m = M()

    def option(obj, name, default=None):
        return getattr(obj, name, default)

    def has(obj, name):
        return hasattr(obj, name)
    ns = {"m": m, "add_to": add_to, "ERRORS": (KeyError, AttributeError),
          "option": option, "has": has}
    exec("def step(x):\n    add_to[1, 32](x, 2.0)\n" + body, ns)
    return m, ns["step"]


@pytest.mark.parametrize("body", [
    "    try:\n        b = m.bias\n    except (KeyError, AttributeError):\n        b = None\n",
    "    try:\n        b = m.bias\n    except ERRORS:\n        b = None\n",
], ids=["except-tuple", "except-global-tuple"])
def test_an_absent_attribute_read_otherwise_that_appears_is_seen(backend, body):
    # SILENT WRONG ANSWER: the replay gives 2.0 where eager gives 6.0
    m, step = _absence_step(body + "    if b is not None:\n        add_to[1, 32](x, b)\n")
    against_eager(step, backend, [("set", lambda: setattr(m, "bias", 4.0))])


class _MatchCfg:
    def __init__(self):
        self.scale = 2.0


def test_a_class_pattern_keyword_attribute_is_checked(backend):
    # SILENT WRONG ANSWER: `case _MatchCfg(scale=s)` reads m.scale by a name held in a
    # const tuple (MATCH_CLASS), not co_names: m.scale is never checked; the replay adds
    # 2.0 after it became 3.0. (Also on 70cae7c: not a regression.)
    m = _MatchCfg()

    def step(x):
        match m:
            case _MatchCfg(scale=s):
                v = s
            case _:
                v = 0.0
        add_to[1, 32](x, v)
    against_eager(step, backend, [("changed", lambda: setattr(m, "scale", 3.0))])
