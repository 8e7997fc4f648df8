"""Hostile round 30 (a helper, against b7eb3ba: TypeGuard / AbsentGuard / class attributes
through the MRO). Two groups:

* REGRESSIONS of b7eb3ba: a mock (or any object that makes attributes on demand) in the
  state the code reaches gets a TypeGuard on every attribute the code names, to depth 6
  (1368 guards for one MagicMock logger: 15 ms of checks per call instead of 4 us), and a
  fresh mock per call (each Mock instance has a class of its own) retraces every call; a
  string constant the code only compares against (`self.kind == "mlp"`) makes an
  AbsentGuard on every object the code names (100 layers x 20 strings: 2020 guards,
  2.2 ms per call instead of 0.14 ms).
* SILENT WRONG ANSWERS of the same family still there: absence read without a string
  constant (try/except AttributeError, contextlib.suppress, a tuple or a global holding
  the names), absence on a module, a class or a slotted object, identity (`is SENTINEL`),
  isinstance through a weakref.proxy, objects that are really values (slice, range,
  bytes, Fraction, timedelta, an operator/builtin/ufunc).

Each test compares a compiled function with eager Numba (tests/eager.py) and fails on the
current code."""
from __future__ import annotations

import contextlib
import datetime
import fractions
import operator
import types
import weakref
from unittest import mock

import numpy as np
import pytest
from eager import against_eager
from numba import cuda
from small_kernels import add_to, mul_by

import tracegraph as tg

N = 8

# ======================================================================= regressions


class _Model:
    """A model with a logger; tests swap in a MagicMock for it (as unit tests do)."""

    def __init__(self, log):
        self.log = log
        self.scale = 2.0

    def run(self, x):
        self.log.debug("step %d", 1)
        add_to[1, 32](x, self.scale)


class _NullLog:
    def debug(self, *a):
        pass


def test_a_fresh_mock_logger_per_call_does_not_retrace_every_call(backend):
    # NEEDLESS RETRACE. Each Mock instance has a class of its own; the logger is only
    # called, never tested, yet its TypeGuard (and those of the child mocks every name
    # of the code makes) fails on each call: 5 calls, 5 traces (1 before b7eb3ba)
    m = _Model(mock.MagicMock())
    f = tg.compile(m.run, backend=backend)
    x = cuda.to_device(np.ones(N))
    for _ in range(5):
        m.log = mock.MagicMock()
        f(x)
    assert sum(f.cache_info().misses.values()) == 1, f.cache_info()


def test_a_mock_logger_does_not_multiply_the_per_call_checks(backend):
    # SLOWDOWN. One MagicMock in the state: 1368 TypeGuards (self.log.add_to,
    # self.log.log.scale, ... every name the code uses, 6 deep), 15 ms of checks a call
    # against 4 us before b7eb3ba; with a plain logger a few guards
    x = cuda.to_device(np.ones(N))
    plain = _Model(_NullLog())
    fp = tg.compile(plain.run, backend=backend)
    fp(x)
    mocked = _Model(mock.MagicMock())
    fm = tg.compile(mocked.run, backend=backend)
    fm(x)
    assert len(fm.compiled[0].program.guards) <= 4 * len(fp.compiled[0].program.guards) + 8, \
        len(fm.compiled[0].program.guards)


def _layered(n_layers: int, kinds: list[str]):
    """A model of n layers whose forward compares self.kind against `kinds` (strings only
    compared, never attribute names)."""
    src = "def forward(self, x):\n"
    for k in kinds:
        src += f"    if self.kind == {k!r}:\n        add_to[1, 8](x, 0.5)\n"
    src += "    add_to[1, 8](x, self.scale)\n"
    ns = {"add_to": add_to}
    exec(src, ns)

    class Layer:
        forward = ns["forward"]

        def __init__(self):
            self.scale = 1.0
            self.kind = "plain"

    class Model:
        def __init__(self):
            self.layers = [Layer() for _ in range(n_layers)]

        def run(self, x):
            for layer in self.layers:
                layer.forward(x)
    return Model()


def test_string_constants_compared_as_values_do_not_guard_every_layer(backend):
    # SLOWDOWN. 20 strings the code compares `self.kind` with become 20 AbsentGuards on
    # every layer (2020 guards for 100 layers): checks 2.2 ms a call instead of 0.14 ms
    # (6.9 ms vs 0.3 ms for 200 layers and 30 strings; the direct path's checks 6834 vs 603)
    x = cuda.to_device(np.ones(N))
    plain = _layered(100, [])
    fp = tg.compile(plain.run, backend=backend)
    fp(x)
    kinds = _layered(100, [f"kind{i}" for i in range(20)])
    fk = tg.compile(kinds.run, backend=backend)
    fk(x)
    absent = [g for g in fk.compiled[0].program.guards if type(g).__name__ == "AbsentGuard"]
    assert len(absent) < 100, f"{len(absent)} AbsentGuards, e.g. {absent[0].ref.describe()}"


# =========================================================== remaining silent wrong answers
# (absence)


def test_an_attribute_read_in_try_except_attributeerror_that_appears_is_seen(
        backend, fixed_device_arrays):
    # EAFP: the attribute is named by LOAD_ATTR, not a string, so no AbsentGuard
    class Model:
        def run(self, x):
            add_to[1, 32](x, 2.0)
            try:
                b = self.bias
            except AttributeError:
                b = None
            if b is not None:
                add_to[1, 32](x, b)
    m = Model()
    against_eager(lambda x: m.run(x), backend,
                  [("added", lambda: setattr(m, "bias", 4.0))])


def test_an_attribute_read_under_contextlib_suppress_that_appears_is_seen(backend):
    class Opt:
        pass
    opt = Opt()

    def step(x):
        add_to[1, 32](x, 2.0)
        with contextlib.suppress(AttributeError):
            add_to[1, 32](x, opt.extra)
    against_eager(step, backend, [("added", lambda: setattr(opt, "extra", 4.0))])


def test_attribute_names_held_in_a_tuple_constant_are_seen(backend):
    # `for a in ("bias", "gain")` is one tuple constant: no string in names
    class Layer:
        pass
    layer = Layer()

    def step(x):
        add_to[1, 32](x, 2.0)
        for a in ("bias", "gain"):
            v = getattr(layer, a, None)
            if v is not None:
                add_to[1, 32](x, v)
    against_eager(step, backend, [("added", lambda: setattr(layer, "bias", 4.0))])


ATTR = "gain"


def test_an_attribute_named_by_a_global_string_is_seen(backend):
    class Layer:
        pass
    absent, present = Layer(), Layer()
    present.gain = 2.0

    def step(x):
        g = getattr(absent, ATTR, None)
        if g is not None:
            add_to[1, 32](x, g)
        add_to[1, 32](x, getattr(present, ATTR))
    against_eager(step, backend, [("absent one set", lambda: setattr(absent, "gain", 4.0)),
                                  ("present one set", lambda: setattr(present, "gain", 5.0))])


SETTINGS = types.ModuleType("settings")  # a settings module (Django style)


def test_an_attribute_a_module_lacked_that_appears_is_seen(backend):
    def step(x):
        add_to[1, 32](x, 2.0)
        extra = getattr(SETTINGS, "EXTRA_SCALE", None)
        if extra is not None:
            add_to[1, 32](x, extra)

    def unset():
        if hasattr(SETTINGS, "EXTRA_SCALE"):
            del SETTINGS.EXTRA_SCALE
    try:
        against_eager(step, backend, [("set", lambda: setattr(SETTINGS, "EXTRA_SCALE", 4.0))])
    finally:
        unset()


def test_an_attribute_a_class_lacked_that_appears_is_seen(backend):
    class Defaults:
        pass

    def step(x):
        add_to[1, 32](x, 2.0)
        extra = getattr(Defaults, "extra", None)
        if extra is not None:
            add_to[1, 32](x, extra)
    against_eager(step, backend, [("set", lambda: setattr(Defaults, "extra", 4.0))])


def test_an_unset_slot_that_is_set_later_is_seen_by_hasattr(backend, fixed_device_arrays):
    class Cfg:
        __slots__ = ("bias",)
    cfg = Cfg()

    def step(x):
        add_to[1, 32](x, 2.0)
        if hasattr(cfg, "bias"):
            add_to[1, 32](x, cfg.bias)
    against_eager(step, backend, [("set", lambda: setattr(cfg, "bias", 5.0))])


# (identity and type)


class _Activation:
    pass


IDENTITY = _Activation()


def test_a_sentinel_tested_by_identity_is_seen_replaced(backend, fixed_device_arrays):
    # the same type, another object: the TypeGuard holds
    class Model:
        def __init__(self):
            self.act = IDENTITY

        def run(self, x):
            if self.act is IDENTITY:
                add_to[1, 32](x, 2.0)
            else:
                mul_by[1, 32](x, 5.0)
    m = Model()
    against_eager(lambda x: m.run(x), backend,
                  [("replaced", lambda: setattr(m, "act", _Activation()))])


class _LN:
    pass


class _RMS:
    pass


_NORMS = [_LN(), _RMS()]


def test_isinstance_through_a_weakref_proxy_is_seen(backend, fixed_device_arrays):
    # type(proxy) is always weakproxy; isinstance reads __class__ through it
    class Model:
        def __init__(self):
            self.norm = weakref.proxy(_NORMS[0])

        def run(self, x):
            if isinstance(self.norm, _LN):
                add_to[1, 32](x, 2.0)
            else:
                mul_by[1, 32](x, 5.0)
    m = Model()
    against_eager(lambda x: m.run(x), backend,
                  [("swapped", lambda: setattr(m, "norm", weakref.proxy(_NORMS[1])))])


@pytest.mark.parametrize("first, then", [(operator.add, operator.mul), (max, min),
                                         (np.add, np.multiply)],
                         ids=["operator", "builtin", "ufunc"])
def test_a_builtin_function_held_as_an_attribute_is_seen_rebound(backend, first, then):
    # not a FunctionType that ran: guarded by type only (all builtins share one)
    class Model:
        pass
    m = Model()
    m.combine = first

    def step(x):
        add_to[1, 32](x, float(m.combine(2.0, 3.0)))
    against_eager(step, backend, [("rebound", lambda: setattr(m, "combine", then))])


# (objects that are values)


def test_a_slice_held_as_an_attribute_is_seen_changed(backend, fixed_device_arrays):
    # the graph keeps the view of the old slice
    class Model:
        def __init__(self):
            self.window = slice(0, 4)

        def run(self, x):
            add_to[1, 32](x[self.window], 2.0)
    m = Model()
    against_eager(lambda x: m.run(x), backend,
                  [("moved", lambda: setattr(m, "window", slice(4, 8)))])


def test_a_range_held_as_an_attribute_is_seen_changed(backend, fixed_device_arrays):
    class Model:
        def __init__(self):
            self.steps = range(2)

        def run(self, x):
            for i in self.steps:
                add_to[1, 32](x, float(i))
    m = Model()
    against_eager(lambda x: m.run(x), backend,
                  [("longer", lambda: setattr(m, "steps", range(3))),
                   ("shifted", lambda: setattr(m, "steps", range(5, 8)))])


@pytest.mark.parametrize("first, then", [
    (b"fast", b"slow"),
    (fractions.Fraction(1, 2), fractions.Fraction(3, 2)),
    (datetime.timedelta(seconds=2), datetime.timedelta(seconds=5)),
], ids=["bytes", "fraction", "timedelta"])
def test_a_value_like_object_held_as_an_attribute_is_seen_changed(backend, first, then):
    class Model:
        pass
    m = Model()
    m.v = first

    def step(x):
        v = m.v
        scale = 2.0 if v == b"fast" else 5.0 if isinstance(v, bytes) else \
            v.total_seconds() if isinstance(v, datetime.timedelta) else float(v)
        add_to[1, 32](x, scale)
    against_eager(step, backend, [("changed", lambda: setattr(m, "v", then))])


# (an object whose __getattr__ raises something other than AttributeError)


class _SlotCfg:
    """A slotted config served from a dict: a miss raises KeyError (getattr(obj,
    "__dict__", None) then raises too, and the search skips the object)."""
    __slots__ = ("_d",)

    def __init__(self, **kw):
        object.__setattr__(self, "_d", dict(kw))

    def __getattr__(self, k):
        return self._d[k]

    def __setattr__(self, k, v):
        self._d[k] = v


def test_a_value_served_by_a_getattr_that_raises_keyerror_is_seen_changed(backend):
    cfg = _SlotCfg(scale=2.0)

    def step(x):
        add_to[1, 32](x, cfg.scale)
    against_eager(step, backend, [("changed", lambda: setattr(cfg, "scale", 5.0))])
