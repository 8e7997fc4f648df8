"""Python values of every kind the function reads (a value kept on self from a config, an
attribute dict, complex numbers, tuples, getattr by a constant name, per-layer values, a
value behind functools.wraps or functools.partial, an enum whose == raises), changed
between calls: the next call runs what eager runs."""
from __future__ import annotations

import enum
import functools
from types import SimpleNamespace

import numpy as np
from numba import cuda
from small_kernels import iscale

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


def _ones():
    return cuda.to_device(np.ones(4))


class Odd(enum.Enum):
    A = 1
    B = 2

    def __eq__(self, other):
        raise RuntimeError("no comparing")

    __hash__ = enum.Enum.__hash__


SEL = Odd.A


def test_a_value_whose_eq_raises_traces_again(backend):
    global SEL

    def step(x):
        iscale[1, 32](x, 2.0 if SEL is Odd.A else 3.0)

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    SEL = Odd.B
    try:
        f(x)
    finally:
        SEL = Odd.A
    np.testing.assert_allclose(x.copy_to_host(), 6.0)


def _scale_by(x, s):
    iscale[1, 32](x, s)


SCALE = functools.partial(_scale_by, s=2.0)


def test_a_value_held_by_a_partial(backend):
    global SCALE

    def step(x):
        SCALE(x)

    f, x = tg.compile(step, backend=backend), _ones()
    saved = SCALE
    try:
        f(x)
        SCALE = functools.partial(_scale_by, s=5.0)
        f(x)
    finally:
        SCALE = saved
    np.testing.assert_allclose(x.copy_to_host(), 10.0)
