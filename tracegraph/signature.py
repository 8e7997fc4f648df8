"""Signatures of calls: how a non-array argument enters the key, and why a replay's
arguments match no compiled signature (one message per argument that differs, naming it
and saying expected vs actual)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import arrays, pytree
from .ir import Program

# -0.0 == 0.0 and nan != nan: floats are keyed by their exact repr
FLOATS = frozenset({float, complex, np.float16, np.float32, np.float64, np.longdouble,
                    np.complex64, np.complex128, np.clongdouble})


def static_key(x: Any) -> tuple:
    """How a non-array argument enters the signature (inlined in api's _prepare)."""
    t = type(x)
    return (t, repr(x) if t in FLOATS else x)


def describe_mismatch(program: Program, call: Any,
                   positional_names: Callable[[int], list[str]]) -> list[str]:
    expected = program.inputs
    if program.input_tree != call.tree:
        diffs: list[str] = []
        _tree_diffs(program.input_tree, call.tree, "", (0, 0), diffs,
                    _Describer(program, call, positional_names))
        return diffs or [f"expected arguments {[i.path for i in expected]}, got {call.paths} "
                         "(a different number or nesting of arguments)"]
    diffs = []
    for inp, leaf, info, path in zip(expected, call.leaves, call.infos, call.paths):
        if inp.kind == "static":
            if info is not None:
                diffs.append(f"argument {path}: expected the value {inp.value!r}, got an array")
            elif static_key(leaf) != static_key(inp.value):
                diffs.append(f"argument {path}: expected the value {inp.value!r} "
                             f"({type(inp.value).__name__}), got {leaf!r} "
                             f"({type(leaf).__name__}); Python scalars are baked into the graph")
            continue
        if info is None:
            diffs.append(f"argument {path}: expected {_fmt(inp.dtype, inp.shape, inp.placement)} "
                         f"array, got {type(leaf).__name__} {leaf!r:.40}")
            continue
        got = _fmt(info.dtype, info.shape, info.placement)
        want = _fmt(inp.dtype, inp.shape, inp.placement)
        if got != want:
            diffs.append(f"argument {path}: expected {want}, got {got}")
        elif info.strides != inp.strides:
            diffs.append(f"argument {path}: expected strides {inp.strides}, got {info.strides}")
    if not diffs:
        diffs = _sharing_diffs(expected, call)
    return diffs


def _sharing_diffs(expected: tuple, call: Any) -> list[str]:
    """Which arguments share memory now but did not in the compiled call, or the reverse."""
    groups = arrays.alias_groups(call.infos)
    at = [i for i, inp in enumerate(expected) if inp.kind == "array"]
    diffs = []
    for n, i in enumerate(at):
        for j in at[n + 1:]:
            was = expected[i].buffer == expected[j].buffer
            now = groups[i][0] == groups[j][0]
            if was != now:
                a, b = call.paths[i], call.paths[j]
                diffs.append(f"arguments {a} and {b} " + (
                    "were separate arrays in the compiled call but share memory here" if now
                    else "shared memory in the compiled call but are separate arrays here"))
    return diffs or ["the arguments share memory at other offsets than in the compiled call"]


class _Describer:
    """Says what a subtree of the compiled (`want`) or the new (`got`) arguments is."""

    def __init__(self, program: Program, call: Any, positional_names: Callable):
        self.inputs, self.call, self.positional_names = program.inputs, call, positional_names

    def want(self, tree: Any, leaf: int) -> str:
        if tree != pytree.LEAF:
            return _container(tree)
        inp = self.inputs[leaf]
        if inp.kind == "static":
            return f"the value {inp.value!r}"
        return f"a {_fmt(inp.dtype, inp.shape, inp.placement)} array"

    def got(self, tree: Any, leaf: int) -> str:
        if tree != pytree.LEAF:
            return _container(tree)
        info, value = self.call.infos[leaf], self.call.leaves[leaf]
        if info is not None:
            return f"a {_fmt(info.dtype, info.shape, info.placement)} array"
        return f"{type(value).__name__} {value!r:.40}"


def _container(tree: Any) -> str:
    tag = tree[0]
    if tag == "none":
        return "None"
    if tag == "dict":
        return f"a dict with keys {list(tree[1])}"
    return f"a {tag} of {len(tree[1])}"


def _leaf_count(tree: Any) -> int:
    if tree == pytree.LEAF:
        return 1
    children = {"tuple": 1, "list": 1, "dict": 2}.get(tree[0])
    if children is None:
        return 0
    return sum(_leaf_count(c) for c in tree[children])


def _tree_diffs(want: Any, got: Any, path: str, at: tuple[int, int], diffs: list[str],
                d: _Describer) -> tuple[int, int]:
    """Walk the compiled and the new argument trees side by side and describe each place
    where their structure differs. `at` counts the leaves before this subtree in each."""
    w, g = at
    if want == got:
        n = _leaf_count(want)
        return (w + n, g + n)
    if want[0] == got[0] == "call":
        wpos, gpos = want[1], got[1]
        names = d.positional_names(max(len(wpos), len(gpos)))
        for k, name in enumerate(names):
            a = wpos[k] if k < len(wpos) else None
            b = gpos[k] if k < len(gpos) else None
            w, g = _child_diffs(a, b, name, (w, g), diffs, d)
        wkw, gkw = dict(want[2]), dict(got[2])
        for name in list(wkw) + [k for k in gkw if k not in wkw]:
            w, g = _child_diffs(wkw.get(name), gkw.get(name), name, (w, g), diffs, d)
        return (w, g)
    same_kind = want[0] == got[0] and len(want[1]) == len(got[1])
    if same_kind and want[0] in ("tuple", "list"):
        for k, (a, b) in enumerate(zip(want[1], got[1])):
            w, g = _tree_diffs(a, b, f"{path}[{k}]", (w, g), diffs, d)
        return (w, g)
    if same_kind and want[0] == "dict" and want[1] == got[1]:
        for key, a, b in zip(want[1], want[2], got[2]):
            w, g = _tree_diffs(a, b, f"{path}[{key!r}]", (w, g), diffs, d)
        return (w, g)
    nesting = "" if "none" in (want[0], got[0]) else " (a different nesting of arguments)"
    diffs.append(f"argument {path}: expected {d.want(want, w)}, got {d.got(got, g)}{nesting}")
    return (w + _leaf_count(want), g + _leaf_count(got))


def _child_diffs(want: Any, got: Any, path: str, at: tuple[int, int], diffs: list[str],
                 d: _Describer) -> tuple[int, int]:
    """One top-level argument: present in both calls, or missing from one of them."""
    w, g = at
    if want is None:
        diffs.append(f"argument {path}: not in the compiled call, got {d.got(got, g)}")
        return (w, g + _leaf_count(got))
    if got is None:
        diffs.append(f"argument {path}: expected {d.want(want, w)}, got nothing")
        return (w + _leaf_count(want), g)
    return _tree_diffs(want, got, path, at, diffs, d)


def _fmt(dtype: Any, shape: tuple, placement: str) -> str:
    return f"{dtype}{list(shape)} on {placement}"


