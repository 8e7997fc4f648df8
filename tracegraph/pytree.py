"""Flatten nested tuples/lists/dicts of arguments or results into leaves, and back."""
from __future__ import annotations

from typing import Any, Callable

# A treedef is ("leaf",) | ("tuple", children) | ("list", children) | ("dict", keys, children)
# | ("none",) | ("call", positional, keyword pairs). Hashable, so it can be part of a signature.
LEAF = ("leaf",)


def flatten(obj: Any, path: str = "") -> tuple[list[Any], list[str], Any]:
    """(leaves, their paths, treedef). None is structure, not a leaf."""
    leaves: list[Any] = []
    paths: list[str] = []

    def walk(x: Any, p: str) -> Any:
        if x is None:
            return ("none",)
        if type(x) is tuple or type(x) is list:
            kind = "tuple" if type(x) is tuple else "list"
            return (kind, tuple(walk(v, f"{p}[{i}]") for i, v in enumerate(x)))
        if type(x) is dict:
            keys = tuple(x.keys())
            return ("dict", keys, tuple(walk(x[k], f"{p}[{k!r}]") for k in keys))
        leaves.append(x)
        paths.append(p)
        return LEAF

    tree = walk(obj, path)
    return leaves, paths, tree


def unflatten(tree: Any, leaves: list[Any]) -> Any:
    it = iter(leaves)

    def build(t: Any) -> Any:
        tag = t[0]
        if tag == "leaf":
            return next(it)
        if tag == "none":
            return None
        if tag == "tuple":
            return tuple(build(c) for c in t[1])
        if tag == "list":
            return [build(c) for c in t[1]]
        if tag == "call":  # a function call: (positional trees, ((keyword, tree), ...))
            return tuple(build(c) for c in t[1]), {k: build(c) for k, c in t[2]}
        return {k: build(c) for k, c in zip(t[1], t[2])}

    return build(tree)


def map_leaves(fn: Callable[[Any], Any], obj: Any) -> Any:
    leaves, _, tree = flatten(obj)
    return unflatten(tree, [fn(x) for x in leaves])
