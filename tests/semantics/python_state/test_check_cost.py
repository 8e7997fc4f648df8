"""The checks stay few and the search bounded: mocks, null objects, weakref proxies, string
constants, getattr by held names, `with` blocks, vars() in the code, keyword argument
names, configs rebuilt every step, stats dicts and big vocabularies do not multiply the
guards or trace on every call; a large dataset is searched within bounds; a late value
past many layers is still checked; an array found through no name is named in a warning."""
from __future__ import annotations

import dataclasses
import threading
import warnings
import weakref
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest
from eager import against_eager
from numba import cuda
from small_kernels import add_to, axpb, mul
from trace_counts import guards_of, misses

import tracegraph as tg

N = 8


def _host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a)


_DEEP: list = []


def test_an_array_found_through_no_name_is_named_in_a_warning(backend):
    # seven steps from a name: past the search's bound
    if not _DEEP:
        w = SimpleNamespace(w=cuda.to_device(np.full(N, 4.0)))
        _DEEP.append(SimpleNamespace(a=SimpleNamespace(b=SimpleNamespace(c=SimpleNamespace(
            d=SimpleNamespace(e=w))))))

    def body(x):
        out = cuda.device_array_like(x)
        mul[1, N](x, _DEEP[0].a.b.c.d.e.w, out)
        return out

    with pytest.warns(UserWarning, match="neither its arguments nor found"):
        out = tg.compile(body, backend=backend)(cuda.to_device(np.ones(N)))
    np.testing.assert_array_equal(_host(out), np.full(N, 4.0))


def _dev(v):
    return cuda.to_device(np.full(N, float(v)))


def _x():
    return cuda.to_device(np.arange(float(N)))


DATA = [{f"field{k}": list(range(64)) for k in range(40)} for _ in range(2000)]


_HIDDEN: dict = {}


def test_a_large_dataset_reachable_from_globals_is_searched_within_bounds(backend):
    from tracegraph.trace import paths as guards  # the search lives there

    def body(x):
        out = cuda.device_array_like(x)
        mul[1, N](x, _HIDDEN["w"], out)
        if DATA is None:
            raise AssertionError
        return out

    _HIDDEN["w"] = _dev(3)
    looked = []
    real = guards.children

    def counting(value, names):
        for item in real(value, names):
            looked.append(1)
            yield item
    guards.children = counting
    try:
        out = tg.compile(body, backend=backend)(_x())
    finally:
        guards.children = real
    np.testing.assert_array_equal(_host(out), np.arange(N) * 3.0)
    # each object looked into may give one entry past the bound (then dropped)
    assert len(looked) <= guards._LOOKS + guards._VISITS


class Deep:
    pass


def test_an_alias_the_code_never_names_does_not_silence_the_warning(backend):
    m = Deep()
    m.enc = Deep()
    m.enc.layers = [Deep()]
    m.enc.layers[0].a = Deep()
    m.enc.layers[0].a.b = Deep()
    m.enc.layers[0].a.b.c = Deep()
    # tied; the code reads a 7-step path (past the search's bound)
    m.enc.layers[0].a.b.c.w = m.head = _dev(2)

    def body(m, x):
        out = cuda.device_array_like(x)
        mul[1, N](x, m.enc.layers[0].a.b.c.w, out)
        return out

    with pytest.warns(UserWarning, match="neither its arguments nor found"):
        tg.compile(body, backend=backend)(m, cuda.to_device(np.arange(float(N))))


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
    # Needless retrace: each Mock instance has a class of its own; the logger is only
    # called, never tested, so a type check on it (and on the child mocks every name of
    # the code makes) would fail on each call: 5 calls, 5 traces instead of 1
    m = _Model(mock.MagicMock())
    f = tg.compile(m.run, backend=backend)
    x = cuda.to_device(np.ones(N))
    for _ in range(5):
        m.log = mock.MagicMock()
        f(x)
    assert sum(f.cache_info().misses.values()) == 1, f.cache_info()


def test_a_mock_logger_does_not_multiply_the_per_call_checks(backend):
    # Slowdown: one MagicMock in the state could get a type check on every name the code
    # uses, 6 deep (1368 of them: self.log.add_to, self.log.log.scale, ...), 15 ms of
    # checks a call against 4 us; with a plain logger a few guards
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
    # Slowdown: 20 strings the code compares `self.kind` with, taken for attribute names,
    # would be 20 absence checks on every layer (2020 guards for 100 layers): checks
    # 2.2 ms a call instead of 0.14 ms (6.9 ms vs 0.3 ms for 200 layers and 30 strings)
    x = cuda.to_device(np.ones(N))
    plain = _layered(100, [])
    fp = tg.compile(plain.run, backend=backend)
    fp(x)
    kinds = _layered(100, [f"kind{i}" for i in range(20)])
    fk = tg.compile(kinds.run, backend=backend)
    fk(x)
    absent = [g for g in fk.compiled[0].program.guards if type(g).__name__ == "AbsentGuard"]
    assert len(absent) < 100, f"{len(absent)} AbsentGuards, e.g. {absent[0].ref.describe()}"


class _Block:
    def __init__(self):
        self.scale = 1.0


class _Named:
    """Blocks registered under names, run in order by name (nn.Module.add_module style)."""

    def __init__(self, n):
        self.order = []
        for i in range(n):
            setattr(self, f"block{i}", _Block())
            self.order.append(f"block{i}")

    def run(self, x):
        s = 0.0
        for name in self.order:
            s += getattr(self, name).scale
        add_to[1, 8](x, s)


class _Listed:
    """The same blocks in a list (the baseline)."""

    def __init__(self, n):
        self.blocks = [_Block() for _ in range(n)]

    def run(self, x):
        s = 0.0
        for b in self.blocks:
            s += b.scale
        add_to[1, 8](x, s)


def test_getattr_by_held_names_does_not_check_every_name_absent_on_every_block(backend):
    # Slowdown: every string found ("block0".."block49") taken for a name the code may
    # test, each of the 50 blocks lacking 50 of them, would be 2,500 absence checks
    # (self.block0.block1, ...): 2.9 ms of checks a call against 27 us (100 blocks:
    # 10,000 guards, 9 ms)
    x = cuda.to_device(np.ones(N))
    named, listed = _Named(50), _Listed(50)
    fn, fl = tg.compile(named.run, backend=backend), tg.compile(listed.run, backend=backend)
    fn(x)
    fl(x)
    absent = guards_of(fn, "AbsentGuard")
    assert len(absent) < 100, f"{len(absent)} AbsentGuards, e.g. " \
        f"{[g.ref.describe() for g in absent[:3]]}"


def test_getattr_by_held_names_of_150_blocks_still_checks_the_last_block(backend):
    # A silent wrong answer past the bound: 22,500 absence checks would exhaust the
    # search's 20,000 values (a UserWarning says so), and block149's scale would go
    # unchecked; checking only the names read takes 150 guards, no warning
    m = _Named(150)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the search must not stop at its bound
        against_eager(lambda x: m.run(x), backend,
                      [("last block changed", lambda: setattr(m.block149, "scale", 3.0))])


class _Norm:
    def __init__(self):
        self.eps = 1e-5


class _Cfg:
    def __init__(self):
        self.alpha, self.beta = 1.0, 0.0


def _layer_class(eafp: bool):
    class Layer:
        def __init__(self):
            self.scale = 1.0
            self.norm = _Norm()

        if eafp:
            def coef(self, cfg):
                try:  # computed once, kept on the layer
                    return self._cached
                except AttributeError:
                    self._cached = self.scale + self.norm.eps * cfg.alpha + cfg.beta
                    return self._cached
        else:
            def coef(self, cfg):
                return self.scale + self.norm.eps * cfg.alpha + cfg.beta
    return Layer


class _Stack:
    def __init__(self, n, eafp):
        layer = _layer_class(eafp)
        self.cfg = _Cfg()
        self.layers = [layer() for _ in range(n)]

    def run(self, x):
        s = 0.0
        for layer in self.layers:
            s += layer.coef(self.cfg)
        add_to[1, 8](x, s)


def test_a_lazily_cached_attribute_does_not_check_every_loaded_name_on_every_object(backend):
    # Slowdown: the method loads _cached, scale, norm, eps, alpha, beta under a function
    # that names AttributeError; taking each for a name it may test would check every
    # layer, norm and the cfg to lack every one it lacks (self.layers[3].alpha,
    # self.cfg.eps, ...): 1,610 absence checks for 200 layers, 2.1 ms of checks a call
    # against 0.28 ms
    x = cuda.to_device(np.ones(N))
    lazy, plain = _Stack(200, True), _Stack(200, False)
    fz, fp = tg.compile(lazy.run, backend=backend), tg.compile(plain.run, backend=backend)
    fz(x)
    fp(x)
    absent = guards_of(fz, "AbsentGuard")
    assert len(absent) < 200, f"{len(absent)} AbsentGuards, e.g. " \
        f"{[g.ref.describe() for g in absent[:4]]}"


class _NullWriter:
    """Logs nothing (a tensorboard writer turned off): any attribute is another null."""

    def __getattr__(self, name):
        return _NullWriter()

    def __call__(self, *a, **k):
        return None


class _Trainer:
    def __init__(self, writer):
        self.writer = writer
        self.scale = 2.0

    def run(self, x):
        self.writer.add_scalar("loss", 1.0)
        self.writer.flush()
        add_to[1, 32](x, self.scale)


def test_a_null_object_writer_does_not_fill_the_search_with_type_checks(backend):
    # Slowdown: every name the code uses, 6 deep, makes a fresh _NullWriter; a type check
    # on each fills the search to its bound (19,997 guards, 64 ms of checks a call)
    x = cuda.to_device(np.ones(N))
    t = _Trainer(_NullWriter())
    f = tg.compile(t.run, backend=backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f(x)
    assert not [w for w in caught if "values looked at" in str(w.message)]
    assert len(guards_of(f)) < 5000, len(guards_of(f))


class _A:
    pass


class _B:
    pass


class _C:
    pass


def test_weakref_proxies_alternating_between_two_classes_do_not_retrace_every_call(backend):
    # Needless retrace: keyed by type(proxy), the same for every proxy, B and C (the
    # first trace was for A) would fight over one variant slot, 9 traces in 9 calls
    # (plain objects: 3)
    objs = [_A(), _B(), _C()]

    class M:
        def __init__(self):
            self.norm = weakref.proxy(objs[0])

        def run(self, x):
            add_to[1, 32](x, 1.0 if isinstance(self.norm, _A) else
                          2.0 if isinstance(self.norm, _B) else 3.0)
    m = M()
    f = tg.compile(m.run, backend=backend)
    got = []
    for i in [0, 1, 2, 1, 2, 1, 2, 1, 2]:
        m.norm = weakref.proxy(objs[i])
        x = cuda.to_device(np.zeros(N))
        f(x)
        got.append(float(x.copy_to_host()[0]))
    assert got == [1.0, 2.0, 3.0, 2.0, 3.0, 2.0, 3.0, 2.0, 3.0]
    assert misses(f) == 3, f.cache_info()


@cuda.jit
def relu_to(x, v):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = max(x[i], v)


class _GainNorm:
    def __init__(self):
        self.eps = 1e-5
        self.gain = 1.0


class _Layer:
    def __init__(self):
        self.scale = 1.0
        self.shift = 0.0
        self.norm = _GainNorm()


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
    # Slowdown: read as "may swallow AttributeError", the `with` would make scale, shift,
    # norm, eps, gain, stages and lock names the code may test, every layer / norm / the
    # model checked to lack each one it lacks (self.eps, self.stages[0][3].eps, ...):
    # 1,411 absence checks for 200 layers, ~2.0 ms of checks a call against ~0.42 ms for
    # the same code without the `with`
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
    # A silent wrong answer past the bound: without the `with`, 10 stages x 200 layers
    # are checked (8,013 guards, no warning); absence checks for the `with` would exhaust
    # the 20,000-value search and leave the last layer's gain unchecked: the replay would
    # give 2000.02 where eager gives 2999.02
    m = _Locked(10, 200)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the search must not stop at its bound
        against_eager(lambda x: m.run_with(x), backend,
                      [("last layer changed",
                        lambda: setattr(m.stages[-1][-1].norm, "gain", 1000.0))])


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
    # Slowdown: the dict keys "lr", "momentum", ... are string constants of a code object
    # that calls vars(); taken for names it may test, every layer would be checked to
    # lack each (self.layers[7].lr): 1,206 absence checks for 200 layers, ~1.4 ms of
    # checks a call against 0.15 ms
    x = cuda.to_device(np.ones(N))
    a, b = _Hyper(200), _Hyper(200)
    fa = tg.compile(a.run_vars, backend=backend)
    fb = tg.compile(b.run_plain, backend=backend)
    fa(x)
    fb(x)
    absent = guards_of(fa, "AbsentGuard")
    assert len(absent) < 50, f"{len(absent)} AbsentGuards, e.g. " \
        f"{[g.ref.describe() for g in absent[:6]]}"


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
    # Slowdown: with `getattr(_Kernels, self.act)` (a name not a constant), taking every
    # string of every const tuple of the code for an attribute name it may test would
    # take the KW_NAMES tuple ('weight', 'offset', 'clip') of a keyword call too, checked
    # absent on every layer (self.layers[3].weight, ...): 318 absence checks for 100
    # layers, checks ~3x as long (0.48 ms against 0.16 ms)
    x = cuda.to_device(np.ones(N))
    m = _ActModel(100)
    f = tg.compile(m.run, backend=backend)
    f(x)
    kw = [g.ref.describe() for g in guards_of(f, "AbsentGuard")
          if g.ref.describe().rsplit(".", 1)[-1] in ("weight", "offset", "clip")]
    assert not kw, f"{len(kw)} absence checks of keyword argument names, e.g. {kw[:4]}"


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
    # Needless retrace: the traced code uses the attribute name `.cfg` and the module has
    # a global `cfg` (the same object as env.cfg); taken for a sentinel, env.cfg would be
    # checked by identity, and a frozen config rebuilt each step with only a field the
    # code never reads changed (`dataclasses.replace(cfg, step=i)`) would trace on every
    # call: 10 traces in 10 calls instead of 1
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


# ------------------------------------- the keys of the dicts the code reaches are no names
class _Stats:
    KEYS = ("omega",)

    def __init__(self):
        self.omega = 0.8
        self.stats = {"steps": 0, "seconds": 0.0}   # host-side bookkeeping
        self.steps = 0

    def step(self, x):
        vals = [getattr(self, k) for k in self.KEYS]
        axpb[1, 8](x, vals[0], float(len(self.stats)))


@pytest.mark.parametrize("bump", ["entry", "attribute"])
def test_a_stats_dict_read_only_by_len_does_not_retrace(backend, bump):
    m = _Stats()
    f = tg.compile(m.step, backend=backend)
    x = cuda.to_device(np.ones(8))
    for _ in range(5):
        f(x)
        if bump == "entry":
            m.stats["steps"] += 1
        else:
            m.steps += 1
    assert misses(f) == 1   # the keys of a dict read only by len() are no names: not 5


VOCAB = {f"tok{i}": i for i in range(2000)}


PARAM = "a"


class _Obj:
    def __init__(self):
        self.a = 0.5


_O = _Obj()


def test_a_big_string_keyed_dict_does_not_get_a_guard_per_key(backend):
    def step(x):
        axpb[1, 8](x, getattr(_O, PARAM), float(VOCAB["tok1"]))
    f = tg.compile(step, backend=backend)
    f(cuda.to_device(np.ones(8)))
    # 6 guards, not 261 (256 vocabulary entries checked every call)
    assert len(f.compiled[0].program.guards) < 20
