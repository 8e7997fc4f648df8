"""Chains of elementwise ops as one kernel, for passes/fusion.py.

An elementwise launch (an op's kernel of _elementwise_kernels.py, or a kernel made here)
is described as a `Chain`: stages in order, each an op's expression over operands that are
array parameters, scalar parameters or an earlier stage's value, its value converted to the
dtype the op stored it in (so the fused kernel rounds exactly where the ops did). Every
array is a 4-D view of the output's shape, as the ops launch them. `join` puts a producer's
chain in front of its consumer's; `kernel` makes (once per chain) the kernel computing it:
one grid-stride loop, each element's operands loaded once, the last stage stored into out.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from ..ir import Launch, View
from ..trace import access
from . import _base as B
from ._elementwise_kernels import _ENV, BINARY, EXPRESSIONS, UNARY


@dataclass(frozen=True)
class Stage:
    expr: str                           # the op's expression over v, or x, y, z
    operands: tuple[tuple[str, int], ...]  # ("a", array), ("s", scalar) or ("t", stage)
    dtype: str                          # what the op stored its value as


@dataclass(frozen=True)
class Chain:
    stages: tuple[Stage, ...]
    arrays: int
    scalars: int


@dataclass(frozen=True)
class Elementwise:
    """A launch as a chain: its arrays (4-D views), scalar values and out view."""
    chain: Chain
    arrays: tuple[View, ...]
    scalars: tuple[Any, ...]
    out: View


_FUSED: dict[Chain, Any] = {}      # chain -> its kernel
_CHAINS: dict[Any, Chain] = {}     # kernel -> its chain


def describe(launch: Launch) -> Elementwise | None:
    """The chain an elementwise launch computes (None: another kernel)."""
    kernel = launch.kernel
    chain = _CHAINS.get(kernel)
    args = launch.args
    if chain is not None:
        n = chain.arrays
        return Elementwise(chain, args[:n], args[n:n + chain.scalars], args[-1])
    found = EXPRESSIONS.get(kernel)
    if found is None:
        return None
    expr, n = found
    out = args[-1]
    if n == 1:
        return Elementwise(Chain((Stage(expr, (("a", 0),), out.dtype.name),), 1, 0),
                           (args[0],), (), out)
    flags = args[2 * n]
    arrays: list[View] = []
    scalars: list[Any] = []
    operands = []
    for k in range(n):
        if flags & (1 << k):
            # the kernel's operand is the scalar unified with the array in its slot (a
            # placeholder): the value it computes with
            computed = np.promote_types(args[2 * k + 1].dtype, args[2 * k].dtype)
            operands.append(("s", len(scalars)))
            scalars.append(computed.type(args[2 * k + 1]))
        else:
            operands.append(("a", len(arrays)))
            arrays.append(args[2 * k])
    return Elementwise(Chain((Stage(expr, tuple(operands), out.dtype.name),), len(arrays),
                             len(scalars)), tuple(arrays), tuple(scalars), out)


def reshaped(e: Elementwise, shape: tuple[int, ...]) -> Elementwise | None:
    """The same launch over another 4-D shape of as many elements (each array visited in
    the same order, as numpy's reshape without a copy), or None where an array's layout
    does not allow it."""
    if tuple(e.out.shape) == tuple(shape):
        return e
    views = []
    for v in (*e.arrays, e.out):
        r = _reshape(v, shape)
        if r is None:
            return None
        views.append(r)
    return Elementwise(e.chain, tuple(views[:-1]), e.scalars, views[-1])


def _reshape(v: View, shape: tuple[int, ...]) -> View | None:
    from numpy.lib.stride_tricks import as_strided
    probe = as_strided(np.empty(1, np.uint8), v.shape, v.strides)  # metadata only
    try:
        strides = np.reshape(probe, shape, copy=False).strides
    except ValueError:
        return None
    strides = tuple(0 if n == 1 else s for n, s in zip(shape, strides))  # as ops pad
    return View(v.buffer, v.offset, tuple(shape), strides, v.dtype, v.readonly)


def join(producer: Elementwise, consumer: Elementwise, via: View) -> Elementwise:
    """The consumer's chain with its operands equal to `via` (the producer's out) taken
    from the producer's last stage; arrays equal to one another become one parameter."""
    arrays = list(producer.arrays)
    index = {v: k for k, v in enumerate(arrays)}
    remap: dict[int, tuple[str, int]] = {}
    for k, v in enumerate(consumer.arrays):
        if v == via:
            remap[k] = ("t", len(producer.chain.stages) - 1)
        else:
            if v not in index:
                index[v] = len(arrays)
                arrays.append(v)
            remap[k] = ("a", index[v])
    first = len(producer.chain.stages)
    shift = producer.chain.scalars

    def moved(ref: tuple[str, int]) -> tuple[str, int]:
        kind, k = ref
        if kind == "a":
            return remap[k]
        return ("s", k + shift) if kind == "s" else ("t", k + first)
    stages = producer.chain.stages + tuple(
        Stage(s.expr, tuple(moved(r) for r in s.operands), s.dtype)
        for s in consumer.chain.stages)
    chain = Chain(stages, len(arrays), shift + consumer.chain.scalars)
    return Elementwise(chain, tuple(arrays), producer.scalars + consumer.scalars,
                       consumer.out)


def ends_in_product(e: Elementwise) -> bool:
    """Whether the launch's value is a floating-point product (multiply, gelu): a consumer
    adding it in the same kernel may be compiled to one fma, which rounds once where the
    separate kernels rounded twice (NVVM contracts by default), so it is not fused."""
    last = e.chain.stages[-1]
    return last.expr in _PRODUCTS and np.dtype(last.dtype).kind == "f"


_PRODUCTS = {BINARY["multiply"][0], UNARY["gelu"][0]}


def launch_args(e: Elementwise) -> tuple:
    return (*e.arrays, *e.scalars, e.out)


_TEMPLATE = '''
def {name}({params}out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        i0, i1, i2, i3 = _unravel(i, out.shape)
{body}
'''


def kernel(chain: Chain) -> Any:
    """The kernel computing `chain` (made once per chain: equal chains share it)."""
    found = _FUSED.get(chain)
    if found is not None:
        return found
    arrays = [f"a{k}" for k in range(chain.arrays)]
    params = "".join(f"{p}, " for p in arrays + [f"s{k}" for k in range(chain.scalars)])
    lines = [f"        l{k} = a{k}[i0, i1, i2, i3]" for k in range(chain.arrays)]
    last = len(chain.stages) - 1
    for j, stage in enumerate(chain.stages):
        names = dict(zip("xyz" if len(stage.operands) > 1 else "v",
                         (_ref(r) for r in stage.operands)))
        expr = re.sub(r"\b[vxyz]\b", functools.partial(_name, names), stage.expr)
        lines.append(f"        out[i0, i1, i2, i3] = {expr}" if j == last else
                     f"        t{j} = _as_{stage.dtype}({expr})")
    name = f"fused_{len(_FUSED)}"
    env = dict(_ENV, **{f"_as_{d}": getattr(numba, "boolean" if d == "bool" else d)
                        for d in {s.dtype for s in chain.stages}})
    made = B.make_kernel(name, _TEMPLATE, env, params=params, body="\n".join(lines))
    access(made, reads=arrays, writes=["out"])
    _FUSED[chain] = made
    _CHAINS[made] = chain
    return made


def _name(names: dict[str, str], m: re.Match) -> str:
    return names[m.group(0)]


def _ref(ref: tuple[str, int]) -> str:
    kind, k = ref
    return {"a": "l", "s": "s", "t": "t"}[kind] + str(k)

