"""Why a replay's arguments match no compiled signature: one message per argument that
differs, naming it and saying expected vs actual."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import pytree
from ..ir import Program
from . import arguments
from .call import static_key


def describe_mismatch(program: Program, call: Any,
                   positional_names: Callable[[int], list[str]]) -> list[str]:
    expected = program.inputs
    if program.input_tree != call.tree:
        diffs: list[str] = []
        _call_diffs(program.input_tree, call.tree, diffs,
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
        if inp.kind == "scalar":  # a dynamic scalar: its type is the signature
            if type(leaf) is not type(inp.value):
                diffs.append(f"argument {path}: expected a {type(inp.value).__name__} (a "
                             f"dynamic scalar: its type is part of the signature), got "
                             f"{type(leaf).__name__} {leaf!r:.40}")
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
        elif info.readonly != inp.view.readonly:
            diffs.append(f"argument {path}: " + (
                "read-only here but writable in the compiled call" if info.readonly else
                "writable here but read-only in the compiled call") +
                " (whether an array may be written is part of the signature)")
    if not diffs:
        diffs = _sharing_diffs(expected, call)
    return diffs


def _sharing_diffs(expected: tuple, call: Any) -> list[str]:
    """Which arguments share memory now but did not in the compiled call, or the reverse."""
    groups = arguments.alias_groups(call.infos)
    at = [i for i, inp in enumerate(expected) if inp.kind == "array"]
    diffs = []
    for n, i in enumerate(at):
        for j in at[n + 1:]:
            was = expected[i].buffer == expected[j].buffer
            gi, gj = groups[i], groups[j]
            now = gi is not None and gj is not None and gi[0] == gj[0]
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
        if not tree.is_leaf():
            return pytree.describe(tree)
        inp = self.inputs[leaf]
        if inp.kind == "static":
            return f"the value {inp.value!r}"
        return f"a {_fmt(inp.dtype, inp.shape, inp.placement)} array"

    def got(self, tree: Any, leaf: int) -> str:
        if not tree.is_leaf():
            return pytree.describe(tree)
        info, value = self.call.infos[leaf], self.call.leaves[leaf]
        if info is not None:
            return f"a {_fmt(info.dtype, info.shape, info.placement)} array"
        return f"{type(value).__name__} {value!r:.40}"


def _same_node(a: Any, b: Any) -> bool:
    return (not a.is_leaf() and not b.is_leaf() and a.kind == b.kind and a.type == b.type
            and list(a.entries()) == list(b.entries()))


def _call_diffs(want: Any, got: Any, diffs: list[str], d: _Describer) -> None:
    """The whole call, (positional arguments, keyword arguments): argument by argument."""
    (wpos, wkw), (gpos, gkw) = want.children(), got.children()
    w = g = 0
    names = d.positional_names(max(wpos.num_children, gpos.num_children))
    wp, gp = wpos.children(), gpos.children()
    for k, name in enumerate(names):
        w, g = _child_diffs(wp[k] if k < len(wp) else None, gp[k] if k < len(gp) else None,
                            name, (w, g), diffs, d)
    wk, gk = dict(zip(wkw.entries(), wkw.children())), dict(zip(gkw.entries(), gkw.children()))
    for name in sorted(set(wk) | set(gk)):
        w, g = _child_diffs(wk.get(name), gk.get(name), str(name), (w, g), diffs, d)


def _tree_diffs(want: Any, got: Any, path: str, at: tuple[int, int], diffs: list[str],
                d: _Describer) -> tuple[int, int]:
    """Walk the compiled and the new argument structures side by side and describe each
    place where they differ. `at` counts the leaves before this subtree in each."""
    w, g = at
    if want == got:
        return (w + want.num_leaves, g + got.num_leaves)
    if _same_node(want, got):
        for entry, a, b in zip(want.entries(), want.children(), got.children()):
            w, g = _tree_diffs(a, b, pytree.child_path(path, want, entry), (w, g), diffs, d)
        return (w, g)
    none = "None" in (pytree.describe(want) if not want.is_leaf() else "",
                      pytree.describe(got) if not got.is_leaf() else "")
    nesting = "" if none else " (a different nesting of arguments)"
    diffs.append(f"argument {path}: expected {d.want(want, w)}, got {d.got(got, g)}{nesting}")
    return (w + want.num_leaves, g + got.num_leaves)


def _child_diffs(want: Any, got: Any, path: str, at: tuple[int, int], diffs: list[str],
                 d: _Describer) -> tuple[int, int]:
    """One top-level argument: present in both calls, or missing from one of them."""
    w, g = at
    if want is None:
        diffs.append(f"argument {path}: not in the compiled call, got {d.got(got, g)}")
        return (w, g + got.num_leaves)
    if got is None:
        diffs.append(f"argument {path}: expected {d.want(want, w)}, got nothing")
        return (w + want.num_leaves, g)
    return _tree_diffs(want, got, path, at, diffs, d)


def _fmt(dtype: Any, shape: tuple, placement: str) -> str:
    return f"{dtype}{list(shape)} on {placement}"


def device_diffs(key: tuple, call: Any) -> list[str]:
    """Arguments on another GPU than in the compiled call (an array's key ends with its
    device, signature/call.py array_key)."""
    said: list[str] = []
    if len(key) != len(call.key):
        return said
    for old, info, path in zip(key[1:], call.infos, call.paths):
        if info is not None and isinstance(old, tuple) and len(old) == 7 and \
                old[0] == info.placement and old[6] != info.device:
            said.append(f"argument {path}: on GPU {info.device} here, on GPU {old[6]} in the "
                        "compiled call (a graph runs on the GPU of its arrays)")
    return said


def order_diffs(key: tuple, call: Any, positional_names: Callable[[int], list[str]]) -> list[str]:
    """Dicts (or **kwargs the function iterates) whose keys come in another order than in
    the compiled call, where that is all that differs (the key's last entry holds the
    orders, call.py from_leaves)."""
    def orders(k: tuple) -> dict:
        last = k[-1] if k else None
        return dict(last[1]) if type(last) is tuple and last[:1] == ("dict order",) else {}
    was, now = orders(key), orders(call.key)
    if was == now or key[:len(key) - bool(was)] != call.key[:len(call.key) - bool(now)]:
        return []
    names = positional_names(64)
    said = []
    for where in sorted(set(was) | set(now), key=repr):
        if was.get(where) == now.get(where):
            continue
        path = ("**kwargs" if where == (1,) else
                (names[where[1]] if where[0] == 0 else str(where[1])) +
                "".join(f"[{k!r}]" for k in where[2:]))
        # (absent: the keys were in sorted order, which the signature does not record)
        got, want = now.get(where), was.get(where)
        got = got or tuple(sorted(want or (), key=lambda k: k[1]))
        want = want or tuple(sorted(got, key=lambda k: k[1]))
        said.append(f"argument {path}: its keys come in the order {_keys(got)}, "
                    f"and in {_keys(want)} in the compiled call (the order of a "
                    "dict's keys, or of **kwargs the function iterates or passes on, is part "
                    "of the signature: the function may depend on it)")
    return said


def _keys(keys: tuple) -> str:
    return "(" + ", ".join(r for _, r in keys) + ")"


def distance(a: tuple, b: tuple) -> int:
    return sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b)) * 10
