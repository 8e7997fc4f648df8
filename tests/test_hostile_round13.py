"""A thirteenth hostile round (each case gave a silent wrong answer before its fix): a
dynamic argument padded into a copy while the function captures the array it views; a
host array copied to the device after a kernel wrote a NumPy argument sharing its memory;
a host array copied in through a name rebound between calls; dicts and **kwargs in
another key order."""
from __future__ import annotations

import numpy as np
import pytest
from numba import cuda
from small_kernels import mul

import tracegraph as tg
from tracegraph.errors import SignatureError, TraceError


@cuda.jit
def double(x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] = 2 * x[i]


@cuda.jit
def affine(x, a, b):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a + b


@cuda.jit
def total(buf, out):
    if cuda.grid(1) == 0:
        s = 0.0
        for i in range(buf.shape[0]):
            s += buf[i]
        out[0] = s


BUF = None


def test_a_padded_dynamic_argument_viewing_a_captured_array_is_refused(backend):
    global BUF
    BUF = cuda.to_device(np.arange(16.0))

    def step(x):
        double[1, 64](x)
        out = cuda.device_array(1)
        total[1, 1](BUF, out)
        return out

    f = tg.compile(step, backend=backend, dynamic={"x": 0}, buckets=(8, 16))
    with pytest.raises(SignatureError, match="captures") as e:
        f(BUF[:5])
    assert "test_hostile_round13.py" in str(e.value)
    # at a bucket's length nothing is padded: eager's answer
    got = f(BUF[:8]).copy_to_host()
    assert got[0] == np.arange(16.0).sum() + np.arange(8.0).sum()
    # an array of its own is padded as before
    y = cuda.to_device(np.ones(5))
    f(y)
    np.testing.assert_array_equal(y.copy_to_host(), 2 * np.ones(5))


H = np.arange(16.0)


def test_a_host_copy_after_a_write_to_a_numpy_argument_sharing_it_is_refused(backend):
    def step(x):
        double[1, 64](x)
        d = cuda.to_device(H)
        out = cuda.device_array(1)
        total[1, 1](d, out)
        return out

    with pytest.raises(TraceError, match="copied to the device after a kernel wrote x"):
        tg.compile(step, backend=backend)(H)
    with pytest.raises(TraceError, match="after a kernel wrote x"):
        tg.compile(step, backend=backend)(H[:8])

    def before(x):  # copied before the write: what eager copies too
        d = cuda.to_device(H)
        double[1, 64](x)
        out = cuda.device_array(1)
        total[1, 1](d, out)
        return out
    H[:] = np.arange(16.0)
    got = np.asarray(tg.compile(before, backend=backend)(H))
    assert got[0] == np.arange(16.0).sum()
    np.testing.assert_array_equal(H, 2 * np.arange(16.0))
    H[:] = np.arange(16.0)


TABLE = np.full(4, 2.0)


class Layer:
    def __init__(self, name, w):
        self.name, self.w = name, w

    def __eq__(self, other):
        return isinstance(other, Layer) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def forward(self, x):
        out = cuda.device_array_like(x)
        mul[1, 8](x, cuda.to_device(self.w), out)
        return out


def test_a_host_array_copied_in_through_a_rebound_name_is_the_new_one(backend):
    global TABLE
    TABLE = np.full(4, 2.0)

    def step(x):
        out = cuda.device_array_like(x)
        mul[1, 8](x, cuda.to_device(TABLE), out)
        return out

    f = tg.compile(step, backend=backend)
    x = cuda.to_device(np.arange(4.0))
    np.testing.assert_array_equal(f(x).copy_to_host(), 2 * np.arange(4.0))
    TABLE = np.full(4, 5.0)
    np.testing.assert_array_equal(f(x).copy_to_host(), 5 * np.arange(4.0))
    TABLE[:] = 7.0  # in place: followed as before
    np.testing.assert_array_equal(f(x).copy_to_host(), 7 * np.arange(4.0))

    fwd = tg.compile(Layer.forward, backend=backend)
    a, c = Layer("dense", np.full(4, 2.0)), Layer("dense", np.full(4, 3.0))
    np.testing.assert_array_equal(fwd(a, x).copy_to_host(), 2 * np.arange(4.0))
    np.testing.assert_array_equal(fwd(c, x).copy_to_host(), 3 * np.arange(4.0))


def test_a_host_array_the_function_makes_is_no_guard(backend):
    def step(x):
        out = cuda.device_array_like(x)
        mul[1, 8](x, cuda.to_device(np.full(4, 3.0)), out)
        return out

    f = tg.compile(step, backend=backend)
    x = cuda.to_device(np.arange(4.0))
    for _ in range(3):
        np.testing.assert_array_equal(f(x).copy_to_host(), 3 * np.arange(4.0))
    assert len(f.compiled) == 1


def _stages(x, **stages):
    for _, (a, b) in stages.items():
        affine[1, 32](x, a, b)
    return x


def _stages_dict(x, stages):
    for _, (a, b) in stages.items():
        affine[1, 32](x, a, b)
    return x


def test_kwargs_and_dicts_in_another_order_are_another_signature(backend):
    f = tg.compile(_stages, backend=backend)
    one = f(cuda.to_device(np.ones(4)), zoom=(10.0, 0.0), add=(1.0, 5.0)).copy_to_host()
    other = f(cuda.to_device(np.ones(4)), add=(1.0, 5.0), zoom=(10.0, 0.0)).copy_to_host()
    np.testing.assert_array_equal(one, 15.0)
    np.testing.assert_array_equal(other, 60.0)
    np.testing.assert_array_equal(
        f(cuda.to_device(np.ones(4)), zoom=(10.0, 0.0), add=(1.0, 5.0)).copy_to_host(), 15.0)
    assert len(f.compiled) == 2

    g = tg.compile(_stages_dict, backend=backend)
    one = g(cuda.to_device(np.ones(4)), {"zoom": (10.0, 0.0), "add": (1.0, 5.0)})
    other = g(cuda.to_device(np.ones(4)), {"add": (1.0, 5.0), "zoom": (10.0, 0.0)})
    np.testing.assert_array_equal(one.copy_to_host(), 15.0)
    np.testing.assert_array_equal(other.copy_to_host(), 60.0)

    @tg.compile(backend=backend)
    def named(x, *, a=1.0, b=0.0):  # named keywords: one signature in any order
        affine[1, 32](x, a, b)
        return x
    named(cuda.to_device(np.ones(4)), a=2.0, b=1.0)
    named(cuda.to_device(np.ones(4)), b=1.0, a=2.0)
    assert len(named.compiled) == 1


@cuda.jit
def _times_two(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2 * x[i]


@cuda.jit
def _plus_100(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + 100


@cuda.jit
def _negate(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = -x[i]


ACT = _times_two


def test_a_launched_kernel_rebound_between_calls_is_the_new_one(backend, monkeypatch):
    global ACT
    from tracegraph.signature import arguments
    # device arrays of fixed metadata take the direct replay path, as Numba's do on a GPU
    monkeypatch.setattr(arguments, "_FIXED", arguments._FIXED | {type(cuda.to_device(np.ones(1)))})
    ACT = _times_two
    x, out = cuda.to_device(np.arange(4.0)), cuda.device_array(4)

    def step(x, out):
        ACT[1, 32](x, out)

    f = tg.compile(step, backend=backend)
    for _ in range(3):  # the first call arms the direct replay, the next ones take it
        f(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), 2 * np.arange(4.0))
    ACT = _plus_100  # a notebook cell run again
    f(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(4.0) + 100)
    f.replay(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(4.0) + 100)
    ACT = _times_two
    f(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), 2 * np.arange(4.0))

    def make(kernel):
        def closed(x, out):
            kernel[1, 32](x, out)
        return closed, lambda k: closed.__closure__[0].__setattr__("cell_contents", k)
    closed, rebind = make(_times_two)
    g = tg.compile(closed, backend=backend)
    g(x, out)
    g(x, out)
    rebind(_negate)
    g(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), -np.arange(4.0))


class Model:
    def __init__(self, kernel):
        self.kernel = kernel

    def __eq__(self, other):
        return isinstance(other, Model)

    def __hash__(self):
        return 0

    def step(self, x, out):
        self.kernel[1, 32](x, out)


def test_a_kernel_held_by_an_attribute_rebound_is_the_new_one(backend):
    x, out = cuda.to_device(np.arange(4.0)), cuda.device_array(4)
    m = Model(_times_two)
    f = tg.compile(Model.step, backend=backend)
    f(m, x, out)
    m.kernel = _negate
    f(m, x, out)
    np.testing.assert_array_equal(out.copy_to_host(), -np.arange(4.0))
    with pytest.raises(SignatureError, match="another kernel"):
        m.kernel = _plus_100
        f.replay(m, x, out)


# round 14, on the fixes above: values that pick a kernel or a held host array in a
# function that captures no device array; dict keys equal but not alike
KS = [_times_two, _negate]
IDX = 0
REG = {"a": _times_two, "b": _negate}
CFG = {"act": "a"}
TABLES = [np.full(4, 2.0), np.full(4, 3.0)]


def test_values_that_pick_a_kernel_or_a_host_array_are_checked(backend):
    global IDX
    x, out = cuda.to_device(np.arange(4.0)), cuda.device_array(4)

    def by_index(x, out):
        KS[IDX][1, 32](x, out)

    def by_config(x, out):
        REG[CFG["act"]][1, 32](x, out)

    def host_by_index(x, out):
        mul[1, 8](x, cuda.to_device(TABLES[IDX]), out)

    for fn, first, second in ((by_index, 2.0, -1.0), (by_config, 2.0, -1.0),
                              (host_by_index, 2.0, 3.0)):
        IDX, CFG["act"] = 0, "a"
        f = tg.compile(fn, backend=backend)
        f(x, out)
        f(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), first * np.arange(4.0))
        IDX, CFG["act"] = 1, "b"
        f(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), second * np.arange(4.0))
    IDX, CFG["act"] = 0, "a"


@cuda.jit
def _divide(x, k):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] / k


def test_dict_keys_equal_but_not_alike_are_another_signature(backend):
    def body(x, d):
        for k in d:
            _divide[1, 32](x, k)
        return x

    f = tg.compile(body, backend=backend)
    assert (f(cuda.to_device(np.ones(4)), {0.0: 1}).copy_to_host() == np.inf).all()
    assert (f(cuda.to_device(np.ones(4)), {-0.0: 1}).copy_to_host() == -np.inf).all()
    f(cuda.to_device(np.ones(4)), {0.0: 1})
    assert len(f.compiled) == 2


class KernelHolder:
    act = _times_two
    W = np.full(4, 2.0)


class Block:
    act = _times_two

    def __eq__(self, other):
        return isinstance(other, Block)

    def __hash__(self):
        return 1

    def step(self, x, out):
        type(self).act[1, 32](x, out)  # (through the class: a Numba kernel binds to an instance)


class Callable:
    def __init__(self):
        self.k = _times_two

    def __call__(self, x, out):
        self.k[1, 32](x, out)


T2 = np.full(8, 2.0)


def test_kernels_and_host_arrays_held_by_classes_slices_and_callable_objects(backend):
    global T2
    T2 = np.full(8, 2.0)
    x, out = cuda.to_device(np.arange(4.0)), cuda.device_array(4)
    ar = np.arange(4.0)

    def by_class(x, out):
        KernelHolder.act[1, 32](x, out)

    def host_by_class(x, out):
        mul[1, 8](x, cuda.to_device(KernelHolder.W), out)

    def host_slice(x, out):
        mul[1, 8](x, cuda.to_device(T2[:4]), out)

    f, g, h = (tg.compile(fn, backend=backend) for fn in (by_class, host_by_class, host_slice))
    b = tg.compile(Block.step, backend=backend)
    c = Callable()
    cc = tg.compile(c, backend=backend)
    for fn, args in ((f, (x, out)), (g, (x, out)), (h, (x, out)), (b, (Block(), x, out)),
                     (cc, (x, out))):
        fn(*args)
        fn(*args)
        np.testing.assert_array_equal(out.copy_to_host(), 2 * ar)
    KernelHolder.act, KernelHolder.W, Block.act, T2, c.k = \
        _negate, np.full(4, 5.0), _negate, np.full(8, 7.0), _plus_100
    try:
        for fn, args, want in ((f, (x, out), -ar), (g, (x, out), 5 * ar), (h, (x, out), 7 * ar),
                               (b, (Block(), x, out), -ar), (cc, (x, out), ar + 100)):
            fn(*args)
            np.testing.assert_array_equal(out.copy_to_host(), want)
    finally:
        KernelHolder.act, KernelHolder.W, Block.act = _times_two, np.full(4, 2.0), _times_two


def test_a_padded_host_argument_copied_in_after_a_write_is_refused(backend):
    def step(x):
        double[1, 64](x)
        d = cuda.to_device(H)
        out = cuda.device_array(1)
        total[1, 1](d, out)
        return out

    f = tg.compile(step, backend=backend, dynamic={"x": 0}, buckets=(8, 16))
    H[:] = np.arange(16.0)
    with pytest.raises(TraceError, match="after a kernel wrote x"):
        f(H[:5])
    np.testing.assert_array_equal(H, np.arange(16.0))  # nothing ran


STEPS = 0


class Counter:
    def __init__(self):
        self.calls = 0

    def __eq__(self, other):
        return isinstance(other, Counter)

    def __hash__(self):
        return 2

    def step(self, x, out):
        self.calls += 1
        _times_two[1, 32](x, out)


def test_state_the_function_keeps_is_no_guard(backend):
    """Values the function assigns (a counter) pick nothing: no trace on every call."""
    def counted(x, out):
        global STEPS
        STEPS += 1
        _times_two[1, 32](x, out)

    x, out = cuda.to_device(np.arange(4.0)), cuda.device_array(4)
    f = tg.compile(counted, backend=backend)
    m = tg.compile(Counter.step, backend=backend)
    c = Counter()
    for _ in range(4):
        f(x, out)
        m(c, x, out)
    assert len(f.compiled) == 1 and len(m.compiled) == 1
