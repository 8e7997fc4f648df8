"""Values the function reads from lists, dicts, tuples, deques and other containers it
names, however it walks them (items(), values(), zip, slices, unpacking, sorted, a
helper, a local alias, a key held in a global, int/enum/tuple keys, ChainMap, mapping
proxies, array.array, a dict's keys view): a change between calls is followed; a list's
length and a dict's keys are checked; a large config is checked by the key the code
holds, with a warning; containers the code never names are no guard."""
from __future__ import annotations

import array
import collections
import enum
import types
import typing
import warnings
from collections import deque

import numpy as np
import pytest
from eager import against_eager
from numba import cuda
from small_kernels import add_to, iscale

import tracegraph as tg


@cuda.jit
def _relu1(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = max(x[i], 0.0) + 1


@cuda.jit
def _neg(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = -x[i]


@cuda.jit
def _scale(x, a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i]


ACTS = {"relu": _relu1, "neg": _neg}


BIG = {f"hp_{i}": float(i) for i in range(300)}


BIG["act"] = "relu"


STATE = {"lr": 0.5, "step": 0}


class Opt:
    def step(self, out):
        pass


OPT = Opt()


def _x():
    return cuda.to_device(np.arange(3.0))


def _picks(backend, fn, change, undo):
    x = _x()
    f = tg.compile(fn, backend=backend)
    np.testing.assert_array_equal(f(x).copy_to_host(), np.arange(3.0) + 1)
    change()
    try:
        np.testing.assert_array_equal(f(x).copy_to_host(), -np.arange(3.0))
    finally:
        undo()


def test_a_key_of_a_large_config_the_code_holds_is_checked(backend):
    def fwd(x):
        out = cuda.device_array(3)
        ACTS[BIG["act"]][1, 8](x, out)
        return out
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        _picks(backend, fwd, lambda: BIG.__setitem__("act", "neg"),
               lambda: BIG.__setitem__("act", "relu"))
    assert any("more than 256 entries" in str(m.message) for m in w)


def test_a_method_name_does_not_make_a_dict_key_a_guard(backend):
    def train(x):
        out = cuda.device_array(3)
        _scale[1, 8](x, STATE["lr"], out)
        OPT.step(out)
        return out
    f = tg.compile(train, backend=backend)
    x = _x()
    for _ in range(5):
        np.testing.assert_array_equal(f(x).copy_to_host(), 0.5 * np.arange(3.0))
        STATE["step"] += 1
    assert len(f.compiled) == 1
    STATE["lr"] = 2.0  # a value the code reads by a key it holds: followed
    try:
        np.testing.assert_array_equal(f(x).copy_to_host(), 2.0 * np.arange(3.0))
    finally:
        STATE["lr"] = 0.5


@cuda.jit
def _scale_real(x, a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a.real * x[i]


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


R = np.arange(3.0)


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


# a dict the code walks with .items()/.values()
HYPER = {"lr": 2.0}


def test_values_read_by_walking_a_dict_are_checked(backend):
    def walk(x, out):
        s = 0.0
        for _, v in HYPER.items():
            s += v
        _scale_real[1, 8](x, s, out)
    try:
        _run(backend, walk, (), lambda: HYPER.__setitem__("lr", 9.0), 2 * R, 9 * R)
    finally:
        HYPER["lr"] = 2.0


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


# a list's length and a dict's keys decide the launches a trace records
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


# a length, a local copy, a dict that grows, keys that cannot compare
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


def test_lengths_local_copies_growing_dicts_and_uncomparable_keys_are_checked(backend):
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


# an unpacked list, int keys
P2 = [1.0, 2.0]


IM = {0: 1.0, 1: 2.0}


def test_an_unpacked_list_and_an_int_keyed_dict_are_checked(backend):
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


# walks through zip, slices and keyword calls; items and tuples keyed by type
# and sign
ZA, ZB = [1.0, 2.0], [10.0, 20.0]


SIGN = (0.0,)


@cuda.jit
def _copysign(x, s, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = abs(x[i]) if s >= 0 and 1.0 / s > 0 else -abs(x[i])


def test_walks_through_zip_slices_and_keywords_and_signed_zeros_are_checked(backend):
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


def _ones():
    return cuda.to_device(np.ones(4))


def _run_all(seq, x):
    for s in seq:
        iscale[1, 32](x, s)


A = [2.0, 3.0]


C = [2.0, 3.0]


E = [[2.0], [3.0]]


D = {"a": [2.0], "b": [3.0]}


@pytest.mark.parametrize("case", ["helper", "np.prod", "alias", "dict of lists"])
def test_items_of_a_short_list_however_it_is_walked(backend, case):
    def helper(x):
        _run_all(A, x)

    def prod(x):
        iscale[1, 32](x, float(np.prod(C)))

    def alias(x):
        rows = E
        for row in rows:
            for s in row:
                iscale[1, 32](x, s)

    def dict_of_lists(x):
        for _, row in D.items():
            for s in row:
                iscale[1, 32](x, s)

    fn, lst = {"helper": (helper, A), "np.prod": (prod, C), "alias": (alias, E[0]),
               "dict of lists": (dict_of_lists, D["a"])}[case]
    f, x = tg.compile(fn, backend=backend), _ones()
    f(x)  # * 6
    lst[0] = 0.5
    try:
        f(x)  # * 1.5
    finally:
        lst[0] = 2.0
    np.testing.assert_allclose(x.copy_to_host(), 9.0)


class Mode(enum.Enum):
    A = 1
    B = 2


@pytest.mark.parametrize("key", [0, Mode.A, ("l", 0)], ids=["int", "enum", "tuple"])
def test_dict_entries_under_keys_that_are_not_strings(backend, key):
    table = {key: 2.0, "other": 1.0}

    def step(x):
        iscale[1, 32](x, table[key])

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    table[key] = 5.0
    f(x)
    np.testing.assert_allclose(x.copy_to_host(), 10.0)


@pytest.mark.parametrize("kind", ["ChainMap", "MappingProxyType", "array"])
def test_other_containers(backend, kind):
    base = {"s": 2.0}
    held = {"ChainMap": collections.ChainMap(base),
            "MappingProxyType": types.MappingProxyType(base),
            "array": array.array("d", [2.0])}[kind]
    key = 0 if kind == "array" else "s"

    def step(x):
        iscale[1, 32](x, held[key])

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    if kind == "array":
        held[0] = 5.0
    else:
        base["s"] = 5.0
    f(x)
    np.testing.assert_allclose(x.copy_to_host(), 10.0)


RECENT = deque([1.0] * 100, maxlen=100)


def test_the_last_item_of_a_window_of_100_numbers(backend):
    def step(x):
        iscale[1, 32](x, RECENT[-1])

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    RECENT.append(0.5)
    try:
        f(x)
    finally:
        RECENT.append(1.0)
    np.testing.assert_allclose(x.copy_to_host(), 0.5)


class _Op(typing.NamedTuple):
    kernel: typing.Any
    coef: float


def test_a_namedtuple_field_beside_a_kernel_follows_replace(backend, fixed_device_arrays):
    # `OP.coef` is an attribute the code names; the tuple holds a kernel, so it is not a
    # tuple of numbers and its items are not compared
    state = {"op": _Op(add_to, 2.0)}

    def step(x):
        op = state["op"]
        op.kernel[1, 32](x, op.coef)

    def change():
        state["op"] = state["op"]._replace(coef=3.0)
    against_eager(step, backend, [("replaced", change)])


def test_a_scalar_in_a_list_beside_a_kernel_follows_item_assignment(
        backend, fixed_device_arrays):
    spec = [add_to, 2.0]

    def step(x):
        spec[0][1, 32](x, spec[1])
    against_eager(step, backend, [("set", lambda: spec.__setitem__(1, 3.0))])


HP = {"lr": 2.0, "wd": 3.0}


KEY = "lr"


ROWS = [[2.0], [3.0]]


ENTRIES = {"a": 2.0}


NAMES = ENTRIES.keys()


def test_an_entry_looked_up_by_a_global_key(backend):
    def step(x):
        iscale[1, 32](x, HP[KEY])

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    HP["lr"] = 5.0
    try:
        f(x)
    finally:
        HP["lr"] = 2.0
    np.testing.assert_allclose(x.copy_to_host(), 10.0)


def test_items_of_rows_walked_through_a_local_name(backend):
    def step(x):
        for row in ROWS:
            for s in row:
                iscale[1, 32](x, s)

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)  # * 2 * 3
    ROWS[1][0] = 0.5
    try:
        f(x)  # * 2 * 0.5
    finally:
        ROWS[1][0] = 3.0
    np.testing.assert_allclose(x.copy_to_host(), 6.0)


def test_a_stored_view_of_a_dicts_keys(backend):
    def step(x):
        for name in NAMES:
            iscale[1, 32](x, ENTRIES[name])

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)  # * 2
    ENTRIES["b"] = 3.0
    try:
        f(x)  # * 2 * 3
    finally:
        del ENTRIES["b"]
    np.testing.assert_allclose(x.copy_to_host(), 12.0)
