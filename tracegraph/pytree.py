"""Nested arguments and results as leaves and a hashable structure, through optree.

Containers are tuples, lists, dicts (keys sorted), namedtuples, OrderedDict, defaultdict,
deque, dataclasses (registered on first sight, by their init fields) and whatever is
registered with `tg.register_pytree_node`; None is structure, not a leaf. Everything
else (arrays, scalars, other objects) is a leaf. The structure (an optree PyTreeSpec)
is hashable, so it is part of a signature.
"""
from __future__ import annotations

import array
import dataclasses
import threading
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from typing import Any

import optree

NAMESPACE = "tracegraph"
_register_lock = threading.Lock()
_leaf_types: dict[type, bool] = {}  # type -> does optree take its instances as leaves?


def register_pytree_node(cls: type, flatten: Callable[[Any], tuple[Any, Any]],
                         unflatten: Callable[[Any, Any], Any]) -> type:
    """Make instances of `cls` containers for tracegraph: `flatten(obj)` returns
    (children, aux data) and `unflatten(aux, children)` rebuilds the object."""
    with _register_lock:
        optree.register_pytree_node(cls, flatten, unflatten, namespace=NAMESPACE)
        _leaf_types.clear()
    return cls


def _register_dataclass(cls: type) -> None:
    # by its init fields only: a value it holds beyond them (set in __post_init__, an
    # init=False field) is made again when it is rebuilt (docs/sharp-edges.md); as leaves
    # they would make a lock, a logger or a timestamp part of every call's signature
    names = tuple(f.name for f in dataclasses.fields(cls) if f.init)
    with _register_lock:
        if cls in _dataclasses_seen:
            return
        optree.register_pytree_node(
            cls, lambda obj: ([getattr(obj, n) for n in names], None, names),
            lambda _, children: cls(**dict(zip(names, children))), namespace=NAMESPACE,
            path_entry_type=optree.GetAttrEntry)
        _dataclasses_seen.add(cls)
        _leaf_types.clear()


_dataclasses_seen: set[type] = set()


def _unregistered_dataclasses(leaves: list[Any]) -> set[type]:
    return {type(x) for x in leaves if dataclasses.is_dataclass(x) and not isinstance(x, type)
            and type(x) not in _dataclasses_seen}


def attribute_fields(value: Any) -> tuple[str, ...] | None:
    """The attribute names a container's children are flattened from: a namedtuple's
    fields, a registered dataclass's init fields; None for anything else (a leaf, or a
    container of items)."""
    t = type(value)
    if t in _dataclasses_seen:
        return tuple(f.name for f in dataclasses.fields(t) if f.init)
    return t._fields if optree.is_namedtuple_class(t) else None


def is_leaf(value: Any) -> bool:
    """Is `value` a single leaf (so a call made of such values needs no flattening)? Decided
    once per type: containers are containers by type."""
    t = type(value)
    known = _leaf_types.get(t)
    if known is None:
        known = _leaf_types[t] = not dataclasses.is_dataclass(t) and optree.tree_structure(
            value, none_is_leaf=False, namespace=NAMESPACE).is_leaf()
    return known


def structure(obj: Any) -> Any:
    """The structure of `obj` (what `flatten` returns third), without the leaves."""
    return flatten(obj)[2]


def flatten(obj: Any, names: Callable[[Any], str] | str = "") -> tuple[list, list[str], Any]:
    """(leaves, their paths, structure). `names` is the root's name, or a function from a
    leaf's optree accessor to its path."""
    while True:
        accessors, leaves, spec = optree.tree_flatten_with_accessor(
            obj, none_is_leaf=False, namespace=NAMESPACE)
        new = _unregistered_dataclasses(leaves)
        if not new:
            break
        for cls in new:
            _register_dataclass(cls)
    if callable(names):
        paths = [names(a) for a in accessors]
    else:
        paths = [a.codify(names) for a in accessors]
    return leaves, paths, spec


def flatten_ordered(obj: Any, names: Callable[[Any], str] | str = "") -> tuple[list, list[str],
                                                                              Any, tuple]:
    """flatten, and the key order of every dict in `obj` whose keys are not in sorted
    order: optree's structure sorts a dict's keys (two orders compare equal) but rebuilds
    the order it was given, and code may depend on it (`for k, v in d.items()`)."""
    leaves, paths, spec = flatten(obj, names)
    orders = []
    for acc in dicts_in(spec):
        keys = tuple(acc(obj).keys())
        # keys equal but not alike (0.0 and -0.0, 1 and True) are told apart too
        if list(keys) != sorted(keys, key=repr) or not all(type(k) is str for k in keys):
            orders.append((tuple(e.entry for e in acc), tuple((type(k), repr(k)) for k in keys)))
    return leaves, paths, spec, tuple(orders)


# mappings whose key order optree's structure does not tell apart
_UNORDERED = (dict, defaultdict)


def flatten_leaves(obj: Any) -> tuple[list, Any]:
    """(leaves, structure) without paths: optree's flatten in C, for a call whose
    structure was flattened with its paths before (signature.call's memo)."""
    return optree.tree_flatten(obj, none_is_leaf=False, namespace=NAMESPACE)


def dicts_in(spec: Any) -> tuple:
    """Accessors of the dicts holding leaves in a structure: where flatten_ordered reads
    key orders."""
    found: dict[tuple, Any] = {}
    for acc in spec.accessors():
        for i, entry in enumerate(acc):
            if isinstance(entry, optree.MappingEntry) and entry.type in _UNORDERED:
                found.setdefault(tuple(e.entry for e in acc[:i]), acc[:i])
    return tuple(found.values())


def key_order(mapping: Any) -> tuple:
    """A mapping's keys in order, as flatten_ordered tells orders apart: strings as they
    are, other keys by type and repr (0.0 and -0.0, 1 and True differ)."""
    keys = tuple(mapping)
    if all(type(k) is str for k in keys):
        return keys
    return tuple((type(k), repr(k)) for k in keys)


def unflatten(spec: Any, leaves: list[Any]) -> Any:
    return optree.tree_unflatten(spec, leaves)


def leaf_count(spec: Any) -> int:
    return spec.num_leaves


def describe(spec: Any) -> str:
    """What a (sub)structure is, for messages: "None", "a tuple of 2", "a dict with keys
    ['a']", "a Point"."""
    kind = spec.kind
    if kind == optree.PyTreeKind.NONE:
        return "None"
    if kind in (optree.PyTreeKind.DICT, optree.PyTreeKind.ORDEREDDICT,
                optree.PyTreeKind.DEFAULTDICT):
        return f"a {spec.type.__name__} with keys {list(spec.entries())}"
    if kind in (optree.PyTreeKind.TUPLE, optree.PyTreeKind.LIST, optree.PyTreeKind.DEQUE):
        return f"a {spec.type.__name__} of {spec.num_children}"
    return f"a {spec.type.__name__}"


def child_path(path: str, spec: Any, entry: Any) -> str:
    """The path of one child of a container at `path`."""
    if spec.kind == optree.PyTreeKind.NAMEDTUPLE:
        return f"{path}.{spec.type._fields[entry]}"
    if spec.kind == optree.PyTreeKind.CUSTOM and spec.type in _dataclasses_seen:
        return f"{path}.{entry}"
    return f"{path}[{entry!r}]"


def accessor(entries: Any) -> Any:
    """An optree accessor from some of another's entries (to name a subtree's leaves)."""
    return optree.PyTreeAccessor(tuple(entries))


def container_shape(value: Any) -> Any:
    """What a loop or a membership test over a container depends on: a dict's keys in
    order (its length past 256 keys; a view of its keys or items too), the length of a
    list, tuple, set, deque or view of a dict's values; None for anything else."""
    if isinstance(value, (list, tuple, set, frozenset, deque, _VALUES, array.array)):
        return len(value)
    # a dict, another mapping (ChainMap, a proxy), a kept view of a dict's keys or items
    if isinstance(value, _KEYED):
        if len(value) > 256:
            return len(value)
        return tuple(k for k, _ in value) if isinstance(value, _ITEMS) else tuple(value)
    return None


_ITEMS: Any = type({}.items())
_VALUES: Any = type({}.values())
_KEYED: Any = (dict, Mapping, type({}.keys()), _ITEMS)


def same_shape(value: Any, shape: Any) -> bool:
    """The direct replay's check of a container_shape: the same length, or the very key
    objects in order (the slow path compares keys by value); False where that raises."""
    try:
        now = container_shape(value)
        return same_items(now, shape) if isinstance(shape, tuple) else now == shape
    except Exception:
        return False


def same_items(value: Any, items: tuple) -> bool:
    """`value` (a sequence, set or tuple of keys) holds the very objects `items`, in order;
    False where reading it raises."""
    try:
        now = tuple(value)
        return len(now) == len(items) and all(a is b for a, b in zip(now, items))
    except Exception:
        return False


def layout(array: Any) -> tuple:
    """An array and its shape, strides and dtype: what a check of an array read only for
    its layout compares (same_layout), since a NumPy array can be reshaped in place."""
    return (array, array.shape, array.strides, array.dtype)


def same_layout(value: Any, expected: tuple) -> bool:
    """`value` is the very array of `expected` (layout's), of the same layout still."""
    try:
        return value is expected[0] and (value.shape, value.strides, value.dtype) == \
            expected[1:]
    except Exception:
        return False
