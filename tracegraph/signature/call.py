"""One call's signature: its arguments flattened, each array described, the arrays that
share memory grouped, and the hashable key that picks a compiled graph.

The key holds the argument structure and, per array, placement, shape, dtype, strides,
read-only flag and alias group; per other value its type and value (floats by repr:
-0.0 == 0.0 and nan != nan). A memo of the last call (weak references) lets the replay
loop skip all of it when the same objects come back as the leaves themselves (with
defaults that are leaves too), and describe only the new arrays when other arrays of the
same kind do (ping-pong buffers). Containers (a model's
parameters as nested tuples, a dict of arrays) are flattened again on every call, in C
without paths; the memo applies where the structure, the key order of its dicts and
every leaf come back the same (a dynamic scalar may take any value of its type).
"""
from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .. import pytree
from ..errors import SignatureError, TraceError
from ..location import user_location
from . import arguments
from .keywords import keyword_order_matters

FLOATS = frozenset({float, complex, np.float16, np.float32, np.float64, np.longdouble,
                    np.complex64, np.complex128, np.clongdouble})


class Same:
    """An object in a key, equal only to itself (held, so its id is not reused)."""
    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return type(other) is Same and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __repr__(self) -> str:
        text = repr(self.obj)
        return f"<the object {text if len(text) <= 60 else text[:57] + '...'}>"


def static_key(x: Any) -> tuple:
    """How a non-array argument enters the signature."""
    t = type(x)
    if t is slice:  # (unhashable before Python 3.12)
        return (t, (static_key(x.start), static_key(x.stop), static_key(x.step)))
    return (t, repr(x) if t in FLOATS else x)


def array_key(info: arguments.ArrayInfo, group: tuple[int, int] | None) -> tuple:
    return (info.placement, info.shape, info.dtype, info.strides, info.readonly, group,
            info.device)


class Call:
    """One call's flattened arguments, what they are, and its signature key."""
    __slots__ = ("infos", "key", "leaves", "paths", "tree")

    def __init__(self, leaves: list, paths: list, tree: Any, infos: list, key: tuple):
        self.leaves, self.paths, self.tree, self.infos, self.key = leaves, paths, tree, infos, key

    def with_key(self, key: tuple) -> Call:
        return Call(self.leaves, self.paths, self.tree, self.infos, key)

    @property
    def orders(self) -> tuple:
        """The key order of its dicts where the signature holds it (from_leaves)."""
        last = self.key[-1] if self.key else None
        return last[1] if type(last) is tuple and last[:1] == ("dict order",) else ()


class TreeMemo(NamedTuple):
    """What the memo of a call with containers checks besides its leaves."""
    arity: int
    spec: Any     # the structure of (args, {})
    dicts: tuple  # (accessor, key order) per dict holding leaves


class Memo(NamedTuple):
    """The last call's analysis, and what a call must match to reuse it."""
    refs: tuple                 # weak references to its arguments, or its leaves (tree)
    leaves: tuple | None        # its leaves where they are not its arguments (defaults)
    parts: tuple                # (paths, tree, infos, key) of its Call
    disjoint: bool              # no two arrays share memory: others of a kind may come
    dynamic: dict[int, tuple]   # leaf -> its key, for the dynamic scalars
    tree: TreeMemo | None       # for arguments holding containers
    ids: list                   # the ids of what `refs` refers to
    alive: list                 # [True] until one of the weakly held objects dies


def _held(objects: Any) -> tuple[tuple, list, list]:
    """Weak references to these objects (strong where they have none), their ids, and a
    flag the death of any of them clears: while it is set, each id is still its object's,
    so a list of equal ids is a list of the very same objects."""
    alive = [True]

    def died(_: Any) -> None:
        alive[0] = False

    objects = list(objects)
    return tuple(weak(x, died) for x in objects), list(map(id, objects)), alive


def _fixed_leaf(value: Any) -> bool:
    """A leaf whose metadata cannot change, or None (no leaves)."""
    return value is None or (pytree.is_leaf(value) and arguments.has_fixed_metadata(value))


def _fixed(value: Any) -> bool:
    """Are `value`'s leaves the same objects, of the same metadata, whenever it is bound?
    A fixed leaf, or a tuple (a namedtuple) of such."""
    return _fixed_leaf(value) or (isinstance(value, tuple) and all(map(_fixed, value)))


def _deref(ref: Any) -> Any:
    return ref[0] if type(ref) is tuple else ref()


class CallAnalyzer:
    """Turns the arguments of calls to one function into Calls."""

    def __init__(self, fn: Callable, qualname: str, scalars: frozenset[str] = frozenset()):
        self.qualname = qualname
        self.scalars = scalars  # paths of dynamic scalars: keyed by type, not value
        self.pysig = inspect.signature(fn)
        params = list(self.pysig.parameters.values())
        self.simple_arity = (len(params) if all(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
            for p in params) else None)
        self.param_names = list(self.pysig.parameters)
        # calls of exactly these positional parameters bind to themselves: (args, {})
        self.positional_arity = len(params) if all(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params) else None
        self.flat_tree = pytree.structure(((0,) * len(params), {}))
        # keywords are matched by name: their order is part of the signature only where
        # the function's **kwargs is used beyond reading it by name (keywords.py)
        self.keyword_order = keyword_order_matters(fn)
        # every default of fixed leaves (_fixed): a call leaving them out has them among
        # its leaves as they were (a dict or dataclass default may have other leaves by
        # the next call, so it is flattened again, as an argument would be)
        self.fixed_defaults = all(_fixed(p.default) for p in params if p.default is not p.empty)
        self.memo: Memo | None = None  # the last call's analysis (weakly)

    def forget(self) -> None:
        self.memo = None

    def analyze(self, args: tuple, kwargs: dict) -> Call:
        call = self._reuse(args) if not kwargs else None
        return call if call is not None else self._prepare(args, kwargs)

    # -- the memo ---------------------------------------------------------------
    def _reuse(self, args: tuple) -> Call | None:
        """The last call's analysis, when called again with the very same objects whose
        metadata cannot change (device arrays, scalars): the common replay loop. Also
        for other arrays of the same shape, dtype, strides and placement where no two
        arrays share memory, before or now (a ping-pong loop): only those are described."""
        memo = self.memo
        if memo is None:
            return None
        if memo.tree is not None:
            return self._reuse_tree(args, memo)
        if len(args) != len(memo.refs):
            return None
        if memo.leaves is not None:  # defaults among the leaves: the very same objects only
            if all(_deref(r) is a for a, r in zip(args, memo.refs)):
                return Call([_deref(r) for r in memo.leaves], *memo.parts)
            return None
        return self._matched(list(args), memo)

    def _reuse_tree(self, args: tuple, memo: Memo) -> Call | None:
        """The same for arguments holding containers: flattened again (they may have
        changed), where the structure and the key order of its dicts are the same."""
        tree = memo.tree
        if tree is None or len(args) != tree.arity:
            return None
        root: tuple = (args, {})
        leaves, spec = pytree.flatten_leaves(root)
        if spec != tree.spec:
            return None
        for acc, keys in tree.dicts:
            if pytree.key_order(acc(root)) != keys:
                return None
        return self._matched(leaves, memo)

    def _matched(self, leaves: list, memo: Memo) -> Call | None:
        """The memo's Call for these leaves, leaf by leaf: the same object, a dynamic
        scalar of the same key, an equal scalar, or an array of the same kind (described)."""
        paths, tree, infos, key = memo.parts
        if memo.alive[0]:  # first all at once: the ids (the common replay loop)
            ids, held = list(map(id, leaves)), memo.ids
            for i, scalar in memo.dynamic.items():
                if ids[i] != held[i]:  # a dynamic scalar: keyed by its type
                    if self._leaf_key(leaves[i], paths[i], None, None) != scalar:
                        return None
                    ids[i] = held[i]
            if ids == held:
                return Call(leaves, paths, tree, infos, key)
        moved = False
        for i, (x, r) in enumerate(zip(leaves, memo.refs)):
            if _deref(r) is x:
                continue
            part = memo.dynamic.get(i)
            if part is not None:  # a dynamic scalar: keyed by its type
                if self._leaf_key(x, paths[i], None, None) != part:
                    return None
                continue
            old = infos[i]
            if old is None and same_value(x, r):
                continue  # an equal scalar: the same key
            if old is None or not memo.disjoint or not arguments.has_fixed_metadata(x):
                return None
            info = arguments.describe(x)
            if info is None or array_key(info, None) != array_key(old, None):
                return None
            if not moved:
                infos, moved = list(infos), True
            infos[i] = info
        if moved:
            if not arguments.disjoint(infos):
                return None  # now sharing memory: another signature
            refs, ids, alive = _held(leaves)
            self.memo = memo._replace(refs=refs, parts=(paths, tree, infos, key), ids=ids,
                                      alive=alive)
        return Call(leaves, paths, tree, infos, key)

    # -- the full analysis --------------------------------------------------------
    def _prepare(self, args: tuple, kwargs: dict) -> Call:
        """Flatten the arguments, describe the arrays, and build the signature key."""
        orders: tuple = ()
        if not kwargs and len(args) == self.simple_arity and all(map(pytree.is_leaf, args)):
            leaves, paths, tree = list(args), self.param_names, self.flat_tree
        else:
            leaves, paths, tree, orders = self._bind(args, kwargs)
        call = self.from_leaves(leaves, paths, tree, orders)
        infos, key = call.infos, call.key
        if kwargs:
            return call
        parts = (paths, tree, infos, key)
        if self.fixed_defaults and all(map(_fixed_leaf, args)):
            # the arguments themselves, and the defaults bound beside them, are the leaves:
            # the very same objects give the very same leaves
            # weakly: a compiled function must not keep its caller's arrays alive
            simple = len(leaves) == len(args) and all(leaf is a for leaf, a in zip(leaves, args))
            refs, ids, alive = _held(args)
            self.memo = Memo(refs, None if simple else tuple(map(weak, leaves)), parts,
                             simple and arguments.disjoint(infos),
                             self._dynamic_keys(paths, key) if simple else {}, None, ids,
                             alive)
        elif len(args) == self.positional_arity and \
                all(map(arguments.has_fixed_metadata, leaves)):
            root: tuple = (args, {})
            refs, ids, alive = _held(leaves)
            self.memo = Memo(refs, None, parts, arguments.disjoint(infos),
                             self._dynamic_keys(paths, key),
                             TreeMemo(len(args), pytree.flatten_leaves(root)[1],
                                      tuple((acc, pytree.key_order(acc(root)))
                                            for acc in pytree.dicts_in(tree))), ids, alive)
        return call

    def _dynamic_keys(self, paths: list, key: tuple) -> dict[int, tuple]:
        """leaf -> its part of the key, for the dynamic scalars (keyed by type)."""
        return {i: k for i, (p, k) in enumerate(zip(paths, key[1:])) if p in self.scalars}

    def from_leaves(self, leaves: list, paths: list, tree: Any, orders: tuple = ()) -> Call:
        """The Call of already flattened arguments (no memo). `orders`: the key order of
        the dicts among them (pytree.flatten_ordered), part of the signature."""
        infos = [arguments.describe(x) for x in leaves]
        groups = arguments.alias_groups(infos)
        key = tuple([tree] + [self._leaf_key(leaf, path, info, group)
                              for leaf, path, info, group in zip(leaves, paths, infos, groups)]
                    + ([("dict order", orders)] if orders else []))
        try:
            hash(key)
        except TypeError:
            bad = next(i for i, (leaf, info) in enumerate(zip(leaves, infos))
                       if info is None and not hashable(leaf))
            raise TraceError(f"argument {paths[bad]} of type {type(leaves[bad]).__name__} "
                             "cannot live in a graph", where=user_location(5),
                             fix="pass arrays, scalars, or containers (tuples, lists, dicts, "
                                 "namedtuples, dataclasses) of these") from None
        return Call(leaves, paths, tree, infos, key)

    def _leaf_key(self, leaf: Any, path: str, info: Any, group: Any) -> tuple:
        if info is not None:
            return array_key(info, group)
        if path in self.scalars:
            if not isinstance(leaf, (bool, int, float, np.bool_, np.integer, np.floating)):
                raise SignatureError(f"argument {path} is declared a dynamic scalar but is a "
                                     f"{type(leaf).__name__}", where=user_location(6),
                                     fix="pass a number, or take it out of dynamic=")
            if isinstance(leaf, int) and not isinstance(leaf, bool):
                # Numba types a Python int by its value: one graph per integer type
                if -2 ** 63 <= leaf < 2 ** 63:
                    return ("dynamic scalar", type(leaf), "int64")
                if 0 <= leaf < 2 ** 64:
                    return ("dynamic scalar", type(leaf), "uint64")
                raise SignatureError(f"argument {path} = {leaf} does not fit in 64 bits",
                                     where=user_location(6),
                                     fix="pass an integer in [-2**63, 2**64)")
            return ("dynamic scalar", type(leaf))
        if type(leaf).__module__ != "builtins" and not hashable(leaf):
            # an object compared by its fields (a SimpleNamespace, an argparse.Namespace):
            # by identity, as other objects are (a set or a bytearray is refused below)
            return (type(leaf), "object", Same(leaf))
        return static_key(leaf)

    def _bind(self, args: tuple, kwargs: dict) -> tuple[list, list, Any, tuple]:
        try:
            bound = self.pysig.bind(*args, **kwargs)
        except TypeError as exc:
            got = f"{len(args)} positional argument(s)" + (
                f" and the keyword(s) {', '.join(kwargs)}" if kwargs else "")
            raise SignatureError(f"{self.qualname}() got arguments that do not match its "
                                 f"parameters {self.pysig}: {exc} (got {got})",
                                 where=user_location(5),
                                 fix=f"call it as {self.qualname}{self.pysig}") from None
        bound.apply_defaults()
        positional = self.positional_names(len(bound.args))

        def name(accessor: Any) -> str:
            head, rest = accessor[1].entry, pytree.accessor(accessor[2:])
            return rest.codify(positional[head] if accessor[0].entry == 0 else str(head))

        # named keyword arguments come in the parameters' order, so f(x, p=1, q=2) and
        # f(x, q=2, p=1) are one signature; **kwargs too where the function only reads it
        # by name. Where it iterates it (or passes it on), and for dicts passed, the order
        # the caller gave is another signature
        leaves, paths, tree, orders = pytree.flatten_ordered(
            (tuple(bound.args), dict(bound.kwargs)), name)
        if not self.keyword_order:
            orders = tuple(o for o in orders if o[0] != (1,))
        return leaves, paths, tree, orders

    def positional_names(self, n: int) -> list[str]:
        """Names of the first n positional arguments; `*args` ones are `args[k]`."""
        names, var = [], "args"
        for p in self.pysig.parameters.values():
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                names.append(p.name)
            elif p.kind == p.VAR_POSITIONAL:
                var = p.name
        return names[:n] + [f"{var}[{k}]" for k in range(n - len(names))]


_NO_WEAKREF: set[type] = set()


def weak(x: Any, callback: Callable[[Any], Any] | None = None) -> Any:
    """A weak reference to x (an array), or (x,) for what has none (scalars, None)."""
    t = type(x)
    if t not in _NO_WEAKREF:
        try:
            return weakref.ref(x, callback)
        except TypeError:
            _NO_WEAKREF.add(t)
    return (x,)


def same_value(x: Any, held: Any) -> bool:
    """Is `x` a scalar equal, as the signature keys scalars, to the one `held` (weak's
    (value,) for what has no weak reference)?"""
    return type(held) is tuple and arguments.has_fixed_metadata(x) and \
        static_key(x) == static_key(held[0])


def hashable(x: Any) -> bool:
    try:
        hash(x)
        return True
    except TypeError:
        return False


def device_of(call: Call, qualname: str, where: str) -> int | None:
    """The GPU the call's device arrays live on (None: none says); they must agree."""
    on: dict[int, list[str]] = {}
    for info, path in zip(call.infos, call.paths):
        if info is not None and info.placement == "device" and info.device >= 0:
            on.setdefault(info.device, []).append(path)
    if len(on) > 1:
        said = "; ".join(f"{', '.join(paths)} on GPU {d}" for d, paths in sorted(on.items()))
        raise SignatureError(f"{qualname}() got device arrays on different GPUs ({said}); "
                             "a compiled graph runs on one GPU", where=where,
                             fix="pass arrays of one GPU (copy the others there), or run one "
                                 "process per GPU (docs/multi-gpu.md)")
    return next(iter(on), None)
