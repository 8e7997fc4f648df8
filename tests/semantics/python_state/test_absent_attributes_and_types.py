"""Attributes that appear, disappear or change type between calls: read by hasattr,
getattr with a default, try/except (AttributeError, Exception, a tuple, bare), contextlib
.suppress, vars()/__dict__, names held in constants or globals; on objects, modules,
classes and slots; an optional submodule set to None, a sentinel by identity, isinstance
(through a weakref proxy too). Each compared with eager Numba; a replay refuses."""
from __future__ import annotations

import contextlib
import types
import weakref

import numpy as np
import pytest
from eager import against_eager
from numba import cuda
from small_kernels import add_to, mul_by

N = 8


class _LayerNorm:
    pass


class _RMSNorm:
    pass


def test_a_branch_on_isinstance_of_an_attribute_follows_the_object(
        backend, fixed_device_arrays):
    class Model:
        def __init__(self):
            self.norm = _LayerNorm()

        def run(self, x):
            if isinstance(self.norm, _LayerNorm):
                add_to[1, 32](x, 2.0)
            else:
                mul_by[1, 32](x, 5.0)
    m = Model()
    against_eager(lambda x: m.run(x), backend,
                  [("swapped", lambda: setattr(m, "norm", _RMSNorm()))])


def test_an_optional_submodule_set_to_none_is_seen(backend, fixed_device_arrays):
    class Model:
        def __init__(self):
            self.norm = _LayerNorm()

        def run(self, x):
            add_to[1, 32](x, 2.0)
            if self.norm is not None:
                mul_by[1, 32](x, 3.0)
    m = Model()
    against_eager(lambda x: m.run(x), backend, [
        ("removed", lambda: setattr(m, "norm", None)),
        ("back", lambda: setattr(m, "norm", _LayerNorm()))])


def test_an_attribute_that_appears_later_is_seen_by_hasattr(backend, fixed_device_arrays):
    class Model:
        def run(self, x):
            add_to[1, 32](x, 2.0)
            if hasattr(self, "bias"):
                add_to[1, 32](x, self.bias)
    m = Model()
    against_eager(lambda x: m.run(x), backend, [
        ("added", lambda: setattr(m, "bias", 5.0)),
        ("deleted", lambda: delattr(m, "bias"))])


def test_an_attribute_that_appears_later_is_seen_by_getattr_with_a_default(
        backend, fixed_device_arrays):
    class Opt:
        pass
    opt = Opt()

    def step(x):
        add_to[1, 32](x, 2.0)
        extra = getattr(opt, "extra", None)
        if extra is not None:
            add_to[1, 32](x, extra)
    against_eager(step, backend, [("set", lambda: setattr(opt, "extra", 4.0))])


def _hook():
    pass


HOOKS = {"post": _hook}


def test_a_function_tested_only_for_none_is_seen_going_to_none(backend, fixed_device_arrays):
    def step(x):
        add_to[1, 32](x, 2.0)
        if HOOKS["post"] is not None:
            add_to[1, 32](x, 1.0)

    def unset():
        HOOKS["post"] = None
    try:
        against_eager(step, backend, [("unset", unset)])
    finally:
        HOOKS["post"] = _hook


@pytest.mark.parametrize("direct", [False, True])
def test_replay_refuses_a_graph_traced_with_another_optional_module(backend, direct, request):
    # f.replay must raise SignatureError, not replay the stale graph
    import tracegraph as tg
    if direct:
        request.getfixturevalue("fixed_device_arrays")

    class Model:
        def __init__(self):
            self.norm = _LayerNorm()

        def run(self, x):
            add_to[1, 32](x, 2.0)
            if self.norm is not None:
                mul_by[1, 32](x, 3.0)
    m = Model()
    f = tg.compile(m.run, backend=backend)
    x = cuda.to_device(np.ones(N))
    f(x)
    m.norm = None
    with pytest.raises(tg.SignatureError):
        f.replay(x)


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


def _absence_step(body):
    class M:
        pass
    m = M()
    ns = {"m": m, "add_to": add_to, "ERRORS": (KeyError, AttributeError)}
    exec("def step(x):\n    add_to[1, 32](x, 2.0)\n" + body, ns)
    return m, ns["step"]


@pytest.mark.parametrize("body", [
    "    try:\n        b = m.bias\n    except Exception:\n        b = None\n",
    "    try:\n        b = m.bias\n    except:\n        b = None\n",
    "    b = vars(m).get('bias')\n",
    "    b = m.__dict__.get('bias')\n",
    "    b = m.bias if 'bias' in vars(m) else None\n",
    "    b = [getattr(m, a, None) for a in ('bias', 'gain')][0]\n",
    "    try:\n        b = m.bias\n    except (KeyError, AttributeError):\n        b = None\n",
    "    try:\n        b = m.bias\n    except ERRORS:\n        b = None\n",
], ids=["except-Exception", "bare-except", "vars-get", "dict-get", "in-vars", "comprehension",
        "except-tuple", "except-global-tuple"])
def test_an_absent_attribute_read_otherwise_that_appears_is_seen(backend, body):
    m, step = _absence_step(body + "    if b is not None:\n        add_to[1, 32](x, b)\n")
    against_eager(step, backend, [("set", lambda: setattr(m, "bias", 4.0))])
