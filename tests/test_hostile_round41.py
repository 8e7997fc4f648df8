"""Hostile round 41 (against 6ee37d1: escaped roots in loaded_paths, host-array snapshots
shared by id, slices compiled in, argument_types keyed as Numba specializes).

FALSE NEGATIVES (a value Numba compiles in, changed after the launch, not refused; the
graph's kernel is compiled with the new value, eager Numba on a GPU with the old one):
  1. An attribute chain stored to a local (`c = cfg.sub; c.X`): only a root of length one
     counts as escaped, so ("cfg", "sub") stored to `c` is not, and ("cfg", "sub", "X")
     is never counted as read.
  2. A root escaping inside code nested in the kernel (an inner function: `c = cfg;
     return c.S`): loaded_paths collects the nested code's escapes, but compiled_in_values
     requires the attributes to be in the outer code's co_names only, so `S` (named only
     in the inner function) is skipped.
  3. A config module passed to a device function (`dev(cfg)`, `def dev(m): return m.S`;
     Numba types a module argument as types.Module and resolves m.S as a constant): the
     root escapes in the kernel, but the attributes are named in the device function,
     not in the kernel's co_names, so cfg.S is not counted as read.

Probed and right (Python 3.11 and 3.12, sim and cuda): specializations told apart for
float32 vs float64 / C vs F arrays, np.float32 vs float, bool vs int, int vs a uint64-sized
int, tuple vs namedtuple, (1, 2) vs (1, 2.0) (a global overridden between two
specializations' first launches and restored: refused); one specialization with two
float scalars (override and restore: not refused); a host array modified between two
specializations' first launches and changed back (refused); the id(array) memo cannot be
fooled by id reuse (each snapshot holds its array). Conservative by design, noted only:
`c = cfg` plus `out.size` in the kernel makes a change of an unrelated `cfg.size` refused.

All three fixed: a path of any length stored, passed or indexed counts as used below it,
with the names of the kernel, its nested functions and its device functions.
"""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg
from tracegraph.errors import TraceError

_cfg = types.ModuleType("round41_cfg")
_cfg.S = 2.0
_cfg.sub = types.ModuleType("round41_cfg.sub")
_cfg.sub.X = 2.0
sys.modules["round41_cfg"] = _cfg
sys.modules["round41_cfg.sub"] = _cfg.sub


# -- 1. an attribute chain aliased to a local ----------------------------------------------

@cuda.jit
def _add_chain_alias(out):
    c = _cfg.sub
    i = cuda.grid(1)
    if i < out.size:
        out[i] += c.X


def _chain_alias_then_rebound(out):
    _add_chain_alias[1, 8](out)
    _cfg.sub.X = 3.0
    _add_chain_alias[1, 8](out)
    return out


@pytest.mark.filterwarnings("ignore:the traced function")
def test_an_attribute_chain_aliased_to_a_local_is_checked(backend):
    """Eager (GPU): compiled with cfg.sub.X == 2.0, out == 4. The graph: 6. Now: no
    TraceError."""
    _cfg.sub.X = 2.0
    try:
        with pytest.raises(TraceError, match="X"):
            tg.compile(_chain_alias_then_rebound, backend=backend)(np.zeros(8))
    finally:
        _cfg.sub.X = 2.0


# -- 2. a root aliased inside a function nested in the kernel ---------------------------------

@cuda.jit
def _add_nested_alias(out):
    def get():
        c = _cfg
        return c.S
    i = cuda.grid(1)
    if i < out.size:
        out[i] += get()


def _nested_alias_then_rebound(out):
    _add_nested_alias[1, 8](out)
    _cfg.S = 3.0
    _add_nested_alias[1, 8](out)
    return out


@pytest.mark.filterwarnings("ignore:the traced function")
def test_a_root_aliased_in_an_inner_function_is_checked(backend):
    """Eager (GPU): compiled with cfg.S == 2.0, out == 4. The graph: 6. Now: no TraceError
    (`S` is named only in the inner function's code, not the kernel's co_names)."""
    _cfg.S = 2.0
    try:
        with pytest.raises(TraceError, match="S"):
            tg.compile(_nested_alias_then_rebound, backend=backend)(np.zeros(8))
    finally:
        _cfg.S = 2.0


# -- 3. a module passed to a device function --------------------------------------------------

@cuda.jit(device=True)
def _scale_of(m):
    return m.S


@cuda.jit
def _add_passed_module(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] += _scale_of(_cfg)


def _passed_module_then_rebound(out):
    _add_passed_module[1, 8](out)
    _cfg.S = 3.0
    _add_passed_module[1, 8](out)
    return out


@pytest.mark.filterwarnings("ignore:the traced function")
def test_a_module_passed_to_a_device_function_is_checked(backend):
    """Eager (GPU): compiled with cfg.S == 2.0 (Numba passes the module as types.Module,
    m.S a constant), out == 4. The graph: 6. Now: no TraceError."""
    _cfg.S = 2.0
    try:
        with pytest.raises(TraceError, match="S"):
            tg.compile(_passed_module_then_rebound, backend=backend)(np.zeros(8))
    finally:
        _cfg.S = 2.0
