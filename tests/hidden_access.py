"""Kernels that reach the captured array `H` (or a parameter) only through a construct the
access analysis must see through or give up on: functions held in tuples, loops, aliases,
defaults, keywords, `*args`, dotted paths and class attributes; array methods and views of a
captured array; module attributes and namedtuple fields named like array attributes;
register_jitable helpers; kernel-local closures. Each writes 7.0 (or reads into `out`)
at the thread's index; tests/test_access_hidden.py checks the mode the trace records."""
from __future__ import annotations

import collections
import sys

import numba
import numpy as np
from numba import cuda
from numba.cuda.extending import register_jitable as cuda_register_jitable

N = 8
H = cuda.to_device(np.zeros(N))
T = cuda.to_device(np.zeros(N))     # a module attribute named like an array attribute
size = cuda.to_device(np.zeros(N))

_self = sys.modules[__name__]


def tg_simulator() -> bool:
    from numba.cuda import config
    return bool(config.ENABLE_CUDASIM)


@cuda.jit(device=True)
def write_h(i):
    H[i] = 7.0


@cuda.jit(device=True)
def noop(i):
    pass


@cuda.jit(device=True)
def read_h(i):
    return H[i]


@cuda.jit(device=True)
def apply(f, i):
    return f(i)


@cuda.jit(device=True)
def apply_through_an_alias(f, i):
    g = f
    return g(i)


WRITERS = (write_h,)
Fns = collections.namedtuple("Fns", "put get")
FNS = Fns(write_h, read_h)
Arrays = collections.namedtuple("Arrays", "data other")
ARRAYS = Arrays(H, T)
Fields = collections.namedtuple("Fields", "size shape")


class Ops:
    put = write_h
    get = read_h


class Holder:
    """An object that exposes the CUDA Array Interface as an instance attribute."""

    def __init__(self, a):
        self.__cuda_array_interface__ = a.__cuda_array_interface__
        self._keep = a


# Numba's simulator has no CUDA Array Interface: a GPU-only case
HELD = Holder(H) if not tg_simulator() else H


@numba.extending.register_jitable
def jitable_write_h(i):
    H[i] = 7.0


@cuda_register_jitable
def cuda_jitable_read_h(i):
    return H[i]


@cuda.jit(device=True)
def write_by_default(i, f=write_h):
    f(i)


# -- kernels writing H ----------------------------------------------------------------

@cuda.jit
def loop_over_writers(out):
    i = cuda.grid(1)
    if i < out.size:
        for f in WRITERS:
            f(i)


@cuda.jit
def call_an_alias_of_a_parameter(out):
    i = cuda.grid(1)
    if i < out.size:
        apply_through_an_alias(write_h, i)


@cuda.jit
def store_through_reshape(out):
    i = cuda.grid(1)
    if i < out.size:
        H.reshape((2, N // 2))[i // (N // 2), i % (N // 2)] = 7.0


@cuda.jit
def store_through_view(out):
    i = cuda.grid(1)
    if i < out.size:
        H.view(np.int64)[i] = 7


@cuda.jit
def store_through_transpose(out):
    i = cuda.grid(1)
    if i < out.size:
        H.transpose()[i] = 7.0


@cuda.jit
def store_through_flat(out):
    i = cuda.grid(1)
    if i < out.size:
        H.flat[i] = 7.0


@cuda.jit
def store_module_attribute_T(out):
    i = cuda.grid(1)
    if i < out.size:
        _self.T[i] = 7.0


@cuda.jit
def store_module_attribute_size(out):
    i = cuda.grid(1)
    if i < out.size:
        _self.size[i] = 7.0


@cuda.jit
def store_global_namedtuple_field(out):
    i = cuda.grid(1)
    if i < out.size:
        ARRAYS.data[i] = 7.0


@cuda.jit
def call_global_namedtuple_function(out):
    i = cuda.grid(1)
    if i < out.size:
        FNS.put(i)


@cuda.jit
def call_register_jitable(out):
    i = cuda.grid(1)
    if i < out.size:
        jitable_write_h(i)


@cuda.jit
def call_with_a_default(out):
    i = cuda.grid(1)
    if i < out.size:
        write_by_default(i)


@cuda.jit
def call_with_star_args(out):
    i = cuda.grid(1)
    if i < out.size:
        t = (write_h, i)
        apply(*t)


@cuda.jit
def call_with_keywords(out):
    i = cuda.grid(1)
    if i < out.size:
        apply(write_h, i=i)


@cuda.jit
def call_through_a_dotted_path(out):
    import hidden_pkg
    i = cuda.grid(1)
    if i < out.size:
        hidden_pkg.sub.mod.WRITERS[0](i)


@cuda.jit
def store_through_an_instance_interface(out):
    i = cuda.grid(1)
    if i < out.size:
        HELD[i] = 7.0


@cuda.jit
def call_chosen_by_a_branch(out):
    i = cuda.grid(1)
    if i < out.size:
        if out[i] > -1.0:
            g = write_h
        else:
            g = noop
        g(i)


@cuda.jit
def call_a_class_attribute(out):
    i = cuda.grid(1)
    if i < out.size:
        apply(Ops.put, i)


# -- kernels reading H ----------------------------------------------------------------

@cuda.jit
def read_through_sum(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = H.sum()


@cuda.jit
def read_through_cuda_register_jitable(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = cuda_jitable_read_h(i) * 2


# -- kernels touching a parameter -----------------------------------------------------

@cuda.jit
def store_through_a_local_closure(x):
    i = cuda.grid(1)

    def put(j, v):
        x[j] = v
    if i < x.size:
        put(i, 7.0)


@cuda.jit
def store_namedtuple_field_size(t):
    i = cuda.grid(1)
    if i < t.shape.size:
        t.size[i] = 7.0


@cuda.jit
def read_namedtuple_field_shape(t, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = t.shape[i] * 2


@cuda.jit(device=True)
def store_to_data(p, i):
    p.data[i] = 7.0


@cuda.jit
def pass_a_global_namedtuple(out):
    i = cuda.grid(1)
    if i < out.size:
        store_to_data(ARRAYS, i)


@cuda.jit
def call_a_deep_member_through_apply(out):
    import hidden_pkg
    i = cuda.grid(1)
    if i < out.size:
        apply(hidden_pkg.sub.mod.WRITERS[0], i)
