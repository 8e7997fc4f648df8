"""A sixteenth hostile round, on round 15's checks (each case failed before its fix): a
value kept on `self` from a nested config; an EasyDict-style config; complex and tuple
values; per-layer values in a list; `getattr(CFG, "lr")`; partial and functools.wraps
wrappers; no warning for a large container the code never names; an equal value
reassigned keeps the direct path."""
from __future__ import annotations

import functools
import warnings
from types import SimpleNamespace

import numpy as np
from numba import cuda

import tracegraph as tg


@cuda.jit
def _scale_real(x, a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a.real * x[i]


@cuda.jit
def _affine(x, ab, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = ab[0] * x[i] + ab[1]


def _run(backend, fn, args, change, want_before, want_after):
    x, out = cuda.to_device(np.arange(3.0)), cuda.device_array(3)
    f = tg.compile(fn, backend=backend)
    f(*args, x, out)
    f(*args, x, out)
    np.testing.assert_allclose(out.copy_to_host(), want_before)
    change()
    f(*args, x, out)
    np.testing.assert_allclose(out.copy_to_host(), want_after)
    return f


class Block:
    def __init__(self):
        self.cfg = SimpleNamespace(gain=2.0)

    def forward(self, x, out):
        self.gain = self.cfg.gain  # kept on self; the config it comes from is checked
        _scale_real[1, 8](x, self.gain, out)


class AttrDict(dict):
    __getattr__ = dict.__getitem__


CFG = AttrDict(lr=2.0)
ALPHA = 2 + 0j
PAIR = (2.0, 1.0)
HP = SimpleNamespace(lr=2.0)
R = np.arange(3.0)


def test_values_round_15_missed_are_checked(backend):
    global ALPHA, PAIR
    b = Block()
    _run(backend, b.forward, (), lambda: setattr(b.cfg, "gain", 3.0), 2 * R, 3 * R)

    def attrdict(x, out):
        _scale_real[1, 8](x, CFG.lr, out)
    _run(backend, attrdict, (), lambda: CFG.__setitem__("lr", 4.0), 2 * R, 4 * R)
    CFG["lr"] = 2.0

    def complex_value(x, out):
        _scale_real[1, 8](x, ALPHA, out)
    try:
        _run(backend, complex_value, (), lambda: globals().__setitem__("ALPHA", 5 + 0j),
             2 * R, 5 * R)

        def tuple_value(x, out):
            _affine[1, 8](x, PAIR, out)
        _run(backend, tuple_value, (), lambda: globals().__setitem__("PAIR", (3.0, 0.0)),
             2 * R + 1, 3 * R)
    finally:
        ALPHA, PAIR = 2 + 0j, (2.0, 1.0)

    def by_getattr(x, out):
        _scale_real[1, 8](x, getattr(HP, "lr"), out)  # noqa: B009 - the case itself
    _run(backend, by_getattr, (), lambda: setattr(HP, "lr", 3.0), 2 * R, 3 * R)
    HP.lr = 2.0


class Net:
    def __init__(self):
        self.layers = [SimpleNamespace(gain=2.0), SimpleNamespace(gain=1.0)]

    def fwd(self, x, out):
        for layer in self.layers:
            _scale_real[1, 8](x, layer.gain, out)
            x = out


LR = 2.0


def _timed(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@_timed
def _wrapped(x, out):
    _scale_real[1, 8](x, LR, out)


def _with_k(x, out, k):
    _scale_real[1, 8](x, LR * k, out)


def test_per_layer_values_and_wrapped_functions_are_checked(backend):
    global LR
    n = Net()
    _run(backend, n.fwd, (), lambda: setattr(n.layers[0], "gain", 3.0), 2 * R, 3 * R)
    try:
        _run(backend, _wrapped, (), lambda: globals().__setitem__("LR", 5.0), 2 * R, 5 * R)
        LR = 2.0
        _run(backend, functools.partial(_with_k, k=1.0), (),
             lambda: globals().__setitem__("LR", 5.0), 2 * R, 5 * R)
    finally:
        LR = 2.0


class Trainer:
    def __init__(self):
        self.losses = [0.0] * 1000  # never read by the step
        self.lr = 2.0

    def step(self, x, out):
        _scale_real[1, 8](x, self.lr, out)


def test_no_warning_for_a_large_container_the_code_never_names(backend):
    t = Trainer()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = tg.compile(t.step, backend=backend)
        f(cuda.to_device(np.arange(3.0)), cuda.device_array(3))


def test_an_equal_value_reassigned_keeps_the_direct_path(backend, monkeypatch):
    from tracegraph.signature import arguments
    x, out = cuda.to_device(np.arange(3.0)), cuda.device_array(3)
    monkeypatch.setattr(arguments, "_FIXED", arguments._FIXED | {type(x)})
    t = Trainer()
    f = tg.compile(t.step, backend=backend)
    f(x, out)
    f(x, out)
    t.lr = 2.0 + 0.0 * len(str(t))  # equal, another object
    f(x, out)
    if backend == "cuda":
        hot = f._hot
        assert hot is not None and any(c[4] is t.lr for c in hot._checks)  # re-armed
    np.testing.assert_array_equal(out.copy_to_host(), 2 * R)
    assert len(f.compiled) == 1


# round 17: a dict the code walks with .items()/.values()
OPT = {"lr": 2.0}


def test_values_read_by_walking_a_dict_are_checked(backend):
    def walk(x, out):
        s = 0.0
        for _, v in OPT.items():
            s += v
        _scale_real[1, 8](x, s, out)
    try:
        _run(backend, walk, (), lambda: OPT.__setitem__("lr", 9.0), 2 * R, 9 * R)
    finally:
        OPT["lr"] = 2.0


@cuda.jit
def _addto(b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] += b[i]


def test_a_dict_of_buffers_walked_by_values_is_no_warning(backend):
    bufs = {"k": cuda.to_device(np.arange(3.0)), "v": cuda.to_device(10 * np.arange(3.0))}

    def step(out):
        for b in bufs.values():
            _addto[1, 8](b, out)
    out = cuda.to_device(np.zeros(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # (not Numba's occupancy hints on a GPU)
        f = tg.compile(step, backend=backend)
        f(out)
    np.testing.assert_array_equal(out.copy_to_host(), 11 * np.arange(3.0))
    bufs["v"] = cuda.to_device(20 * np.arange(3.0))
    out.copy_to_device(np.zeros(3))
    f(out)
    np.testing.assert_array_equal(out.copy_to_host(), 21 * np.arange(3.0))


# round 17: a list's length and a dict's keys decide the launches a trace records
LAYERS = [2.0]
OPTS = {"lr": 1.0}


def test_the_length_of_a_list_and_the_keys_of_a_dict_are_checked(backend, monkeypatch):
    from tracegraph.signature import arguments
    monkeypatch.setattr(arguments, "_FIXED", arguments._FIXED | {type(cuda.device_array(1))})

    def by_layers(x, out):
        _scale_real[1, 8](x, 1.0, out)
        for g in LAYERS:
            _scale_real[1, 8](out, g, out)

    def by_keys(x, out):
        _scale_real[1, 8](x, OPTS["lr"], out)
        if "wd" in OPTS:
            _scale_real[1, 8](out, OPTS["wd"], out)
    try:
        _run(backend, by_layers, (), lambda: LAYERS.append(10.0), 2 * R, 20 * R)
        _run(backend, by_keys, (), lambda: OPTS.__setitem__("wd", 0.5), R, 0.5 * R)
    finally:
        del LAYERS[1:]
        OPTS.pop("wd", None)


LOG: list = []


def test_a_container_the_function_changes_itself_is_no_guard(backend):
    def step(x, out):
        LOG.append(1)
        _scale_real[1, 8](x, 2.0, out)
    f = tg.compile(step, backend=backend)
    x, out = cuda.to_device(np.arange(3.0)), cuda.device_array(3)
    for _ in range(3):
        f(x, out)
    assert len(f.compiled) == 1


# round 18: container checks
STAGES = (1.0,)
POOL: dict = {"w": 2.0}


class Layers:
    def __init__(self):
        self.layers = [1.0]

    def fwd(self, x, out):
        layers = list(self.layers)
        layers.reverse()  # a local copy changed: the container is still checked
        _scale_real[1, 8](x, 1.0, out)
        for g in layers:
            _scale_real[1, 8](out, g, out)


class Keyed:
    def __init__(self, v):
        self.v = v

    def __hash__(self):
        return hash(self.v)

    def __eq__(self, other):
        return np.array([self.v]) == np.array([other.v, other.v])  # a tensor-like key


TABLE = {Keyed(1): 1.0}


def test_round_18_container_cases(backend):
    global STAGES

    def by_len(x, out):
        _scale_real[1, 8](x, float(len(STAGES)), out)
    try:
        _run(backend, by_len, (), lambda: globals().__setitem__("STAGES", (1.0, 2.0)), R, 2 * R)
    finally:
        STAGES = (1.0,)
    n = Layers()
    _run(backend, n.fwd, (), lambda: n.layers.append(5.0), R, 5 * R)

    def fixed_key(x, out):  # only read by key: growing it traces again (sound, slower)
        _scale_real[1, 8](x, POOL["w"], out)
    f = tg.compile(fixed_key, backend=backend)
    x, out = cuda.to_device(np.arange(3.0)), cuda.device_array(3)
    for i in range(5):
        POOL[f"tmp{i}"] = 0.0
        f(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), 2 * R)
    f(x, out)
    assert f.cache_info().hits[0] >= 1  # unchanged since the last call: replayed

    def walk_keys(x, out):
        _scale_real[1, 8](x, 0.0, out)
        for _ in TABLE:
            _scale_real[1, 8](x, 1.0, out)
    g = tg.compile(walk_keys, backend=backend)
    g(x, out)
    TABLE.clear()
    TABLE[Keyed(2)] = 1.0  # comparing the keys raises: another shape, no error
    g(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), R)


# round 19
P2 = [1.0, 2.0]
IM = {0: 1.0, 1: 2.0}


def test_round_19_walks_and_int_keys(backend):
    def unpack(x, out):
        a, b = P2
        _scale_real[1, 8](x, a + b, out)
    try:
        _run(backend, unpack, (), lambda: P2.__setitem__(0, 5.0), 3 * R, 7 * R)
    finally:
        P2[0] = 1.0

    def int_keys(x, out):
        s = 0.0
        for _, v in IM.items():
            s += v
        _scale_real[1, 8](x, s, out)
    try:
        _run(backend, int_keys, (), lambda: IM.__setitem__(0, 5.0), 3 * R, 7 * R)
    finally:
        IM[0] = 1.0


# round 20: walks through zip, slices and keyword calls; items and tuples keyed by type
# and sign
ZA, ZB = [1.0, 2.0], [10.0, 20.0]
SIGN = (0.0,)


@cuda.jit
def _copysign(x, s, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = abs(x[i]) if s >= 0 and 1.0 / s > 0 else -abs(x[i])


def test_round_20_walks_and_signs(backend):
    global SIGN

    def via_zip(x, out):
        s = 0.0
        for a, b in zip(ZA, ZB):
            s += a * b
        _scale_real[1, 8](x, s, out)

    def via_slice(x, out):
        s = 0.0
        for a in ZA[1:]:
            s += a
        _scale_real[1, 8](x, s, out)

    def via_keyword(x, out):
        _scale_real[1, 8](x, sorted(ZA, reverse=True)[0], out)
    try:
        _run(backend, via_zip, (), lambda: ZA.__setitem__(0, 5.0), 50 * R, 90 * R)
        ZA[0] = 1.0
        _run(backend, via_slice, (), lambda: ZA.__setitem__(1, 7.0), 2 * R, 7 * R)
        ZA[1] = 2.0
        _run(backend, via_keyword, (), lambda: ZA.__setitem__(0, 9.0), 2 * R, 9 * R)
    finally:
        ZA[:] = [1.0, 2.0]

    def signed(x, out):
        for s in SIGN:
            _copysign[1, 8](x, s, out)
    try:
        _run(backend, signed, (), lambda: globals().__setitem__("SIGN", (-0.0,)), R, -R)
    finally:
        SIGN = (0.0,)
