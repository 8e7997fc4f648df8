"""The Python state a compiled function's graphs are chosen by: the checked names (chains
from its own bytecode, chains.py) and the user's `key()`, as a key (`Contract.state`) and
as checks (`Contract.fast_checks`, checks.py) that the Python path and the C direct
replay read the same way."""
from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import pytree
from ..errors import TraceError
from ..signature import arguments
from ..signature.call import Same, static_key
from ..traced import Array
from .chains import CLOSURE, GLOBAL, Chain, names_of
from .checks import (
    ABSENT,
    ARGUMENT,
    CALL,
    CELL,
    EQUAL,
    GLOBALS,
    LAYOUT,
    MISSING,
    OBJECT,
    holds,
    walk,
)

_GONE = ("absent",)  # the key of a chain that finds nothing
# the key of a chain from a parameter that stays inside its argument's structure: what
# it reads is the signature's (in_structure)
_IN_SIGNATURE = ("in the signature",)
_VALUES = (int, float, complex, bool, str, bytes, type(None), np.generic)
_UNREAD = object()  # key()'s value, not read yet


def value_key(value: Any) -> Any:
    """How a checked name's value enters the key: numbers, strings, None and tuples of them
    by value (typed, as a signature keys a scalar); an array by its memory and layout; a
    bound method by its instance and function; anything else by identity."""
    if value is MISSING:
        return _GONE
    if isinstance(value, _VALUES):
        return static_key(value)
    if type(value) is tuple:
        return ("tuple", tuple(value_key(v) for v in value))
    if isinstance(value, types.MethodType):
        return ("method", Same(value.__self__), Same(value.__func__))
    if isinstance(value, types.BuiltinMethodType) and \
            not isinstance(value.__self__, types.ModuleType):
        return ("method", Same(value.__self__), value.__name__)
    info = None if isinstance(value, (type, Array)) else _described(value)
    if info is not None:
        return ("array", info.placement, info.ptr, info.shape, info.strides, str(info.dtype))
    return Same(value)


class Contract:
    """The checks of one compiled function: its code's chains, and `key`."""

    def __init__(self, fn: Callable, key: Callable[[], Any] | None, qualname: str):
        self.qualname = qualname
        self.key = key
        self.kept: tuple[Chain, ...] = ()  # chains it reads and sets itself: not checked
        checked: list[tuple[Chain, Any]] = []
        kept: list[tuple[Chain, Any]] = []
        for function, fixed in _code_functions(fn):
            code = function.__code__
            count = code.co_argcount + code.co_kwonlyargcount + \
                bool(code.co_flags & inspect.CO_VARARGS) + \
                bool(code.co_flags & inspect.CO_VARKEYWORDS)
            names = names_of(code, code.co_varnames[:count])
            for chain in names.loaded:
                start = _start(chain, function, fixed)
                if start is not None and chain not in (c for c, _ in (*checked, *kept)):
                    (kept if _set_itself(chain, names.stored) else checked).append(
                        (chain, start))
        self.chains = tuple(c for c, _ in checked)
        self._starts = tuple(s for _, s in checked)
        self.kept = tuple(c for c, _ in kept)
        self._kept_starts = tuple(s for _, s in kept)
        try:
            self._by_name: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            self._by_name = None
        parameters = list(self._by_name.parameters.values()) if self._by_name else []
        self._positional = tuple(p.name for p in parameters if p.kind in (
            p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        # parameters a plain positional call may leave at their defaults (keyword-only too)
        self._defaults = {p.name: p.default for p in parameters if p.default is not p.empty}
        # (signature key, checks, state) of the last call whose checks could be made
        self._memo: tuple | None = None

    @property
    def empty(self) -> bool:
        return not self._starts and self.key is None

    # -- the key a call's graph is chosen by ------------------------------------------
    def state(self, args: tuple, kwargs: dict, signature: tuple | None = None) -> tuple:
        """Each check's value as a key, then key()'s value: () when nothing is checked.
        `signature`: the call's signature key. The state of the last call is kept with its
        checks (fast_checks): a call of the very same signature key (the signature memo's:
        the same leaves) for which they all hold has that state, found by walking the
        chains and comparing identities instead of building every value's key."""
        if self.empty:
            return ()
        memo = self._memo
        if memo is not None and signature is not None and memo[0] is signature and \
                not kwargs and holds(memo[1], args):
            return memo[2]
        named = self._arguments(args, kwargs) if any(
            s[0] == ARGUMENT for s in self._starts) else {}
        out = []
        for c, s in zip(self.chains, self._starts):
            part = in_structure(c, named.get(s[2], MISSING)) if s[0] == ARGUMENT else None
            out.append(value_key(self._find(c, s, named)[0]) if part is None else
                       _IN_SIGNATURE if not part else ("method of", Same(part[2])))
        declared = _UNREAD
        if self.key is not None:
            declared = self.declared()
            out.append(("key", declared))
        state = tuple(out)
        checks = self.fast_checks(args, declared) if signature is not None and not kwargs \
            else None
        self._memo = (signature, checks, state) if checks is not None else None
        return state

    def checks_of(self, args: tuple, signature: tuple) -> tuple | None:
        """The checks the state of this call (its signature key) was read with, before any
        trace it caused (a trace may change what they find: a helper's side effect): what
        a direct replay of these arguments checks. None: none could be made."""
        if self.empty:
            return self.fast_checks(args)
        memo = self._memo
        return memo[1] if memo is not None and memo[0] is signature else None

    def declared(self) -> Any:
        """key()'s value, which must be hashable (it is part of the signature)."""
        assert self.key is not None
        value = self.key()
        try:
            hash(value)
        except TypeError:
            from ..location import user_location
            raise TraceError(f"the key= of {self.qualname} returned an unhashable "
                             f"{type(value).__name__}: {_shown(value)}",
                             where=user_location(2),
                             fix="return a tuple of numbers, strings or other hashable values "
                                 "(e.g. lambda: (cfg.lr, model.version))") from None
        return value

    def changes(self, then: tuple, now: tuple) -> list[str]:
        """What differs between two states, in words (`CFG.scale holds another value than
        when f was traced: it was 2.0 and is 3.0 now`)."""
        names = [c.describe() for c in self.chains] + ["key()"]
        return [f"{name} holds {_kind_of(b)} than when {self.qualname} was traced: it was "
                f"{_key_shown(a)} and is {_key_shown(b)} now"
                for name, a, b in zip(names, then, now) if a != b]

    # -- the direct replay's checks ---------------------------------------------------
    def fast_checks(self, args: tuple, declared: Any = _UNREAD) -> tuple | None:
        """The checks as tuples (module docstring), expecting what they find now for a
        call of these positional arguments; None where one cannot be made that way (an
        array whose memory may move under the same object and layout: a PyTorch tensor's
        `.data =`). A chain that stays inside its argument's structure is the signature's:
        not checked. `declared`: key()'s value this call, where it has been read."""
        out: list[tuple] = []
        if len(args) > len(self._positional):
            return None
        named = self._arguments(args, {})
        for chain, start in zip(self.chains, self._starts):
            root, a, b = start
            if root == ARGUMENT and b not in named:
                return None
            part = in_structure(chain, named[b]) if root == ARGUMENT else None
            if part == ():
                continue
            if part is not None:  # a container's method: its class's function
                out.append((OBJECT, part[0], None, (part[1],), getattr(part[0], part[1])))
                continue
            now, depth = self._find(chain, start, named)
            if root == ARGUMENT and b in self._positional[:len(args)]:
                b = self._positional.index(b)
            elif root == ARGUMENT:  # a parameter left at its default: that very object
                root, a, b = OBJECT, named[b], None
            steps = chain.attributes[:depth]
            if now is MISSING:
                out.append((root + 10 * ABSENT, a, b, steps, None))
            elif isinstance(now, np.ndarray):  # (its memory cannot move while held)
                out.append((root + 10 * LAYOUT, a, b, steps,
                            (now, now.shape, now.strides, now.dtype)))
            elif not arguments.has_fixed_metadata(now) and _described(now) is not None:
                return None
            else:
                out.append((root, a, b, steps, now))
        if self.key is not None:
            out.append((CALL + 10 * EQUAL, self.key, None, (),
                        self.declared() if declared is _UNREAD else declared))
        return tuple(out)

    # -- after a trace ----------------------------------------------------------------
    def kept_stand_ins(self, args: tuple, kwargs: dict) -> list[str]:
        """Names the code reads that hold an array the trace made: a stand-in for graph
        memory, which the next trace or an eager call cannot use."""
        named = self._arguments(args, kwargs)
        return [c.describe() for c, s in zip((*self.chains, *self.kept),
                                             (*self._starts, *self._kept_starts))
                if s is not None and isinstance(self._find(c, s, named)[0], Array)]

    def say_after_trace(self, args: tuple, kwargs: dict, first: bool) -> None:
        """After a trace: state the function reads and sets itself (not checked: its Python
        runs only when it traces), at the first trace; a name holding an array the trace
        made (weights created lazily: `self.w = cuda.to_device(...)`): only a stand-in is
        kept there."""
        from ..location import warn
        if self.kept and first:
            names = ", ".join(c.describe() for c in self.kept[:3])
            warn(f"the traced function {self.qualname} sets {names}, which it also reads: "
                 "its Python runs only when it traces, so replays neither change it nor see "
                 "its new value (the graph keeps what the trace read). Keep such state "
                 "outside the function and pass it in (an argument, dynamic= for a number), "
                 "or declare it with key=")
        kept = self.kept_stand_ins(args, kwargs)
        if kept:
            warn(f"tracegraph: {self.qualname} keeps an array it made while tracing in "
                 f"{', '.join(kept[:3])}: what is kept there is a stand-in for the graph's "
                 "own memory, not a device array, so the next trace or an eager call fails "
                 "on it. Make such arrays before the first call (in __init__, or by calling "
                 "the function once without tracegraph), or return them")

    # -- helpers ----------------------------------------------------------------------
    def _arguments(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        if not kwargs and len(args) <= len(self._positional):
            named = dict(self._defaults)
            named.update(zip(self._positional, args))
            return named
        if self._by_name is None:
            return {}
        try:
            bound = self._by_name.bind(*args, **kwargs)
        except TypeError:
            return {}
        bound.apply_defaults()
        return dict(bound.arguments)

    def _find(self, chain: Chain, start: tuple, named: dict[str, Any]) -> tuple[Any, int]:
        """What the chain finds now, and how many of its attributes were read: it stops at
        the first array (whose memory and layout decide its `.shape`, `.dtype`, ...)."""
        root, a, b = start
        if root == ARGUMENT:
            value = named.get(b, MISSING)
        else:
            value = walk((root, a, b, (), None), ())
        for depth, name in enumerate(chain.attributes):
            if value is MISSING or isinstance(value, Array) or _described(value) is not None:
                return value, depth
            try:
                value = getattr(value, name)
            except Exception:
                return MISSING, depth
        return value, len(chain.attributes)



def in_structure(chain: Chain, argument: Any) -> tuple | None:
    """Where a chain from a parameter stays inside the structure the signature flattens its
    argument into (through container fields, a namedtuple's or a dataclass's init fields,
    to a container or a leaf, or on into an array leaf's attributes: its layout), the
    signature keys what it reads: (). A method of a container met on the way (`d.items`)
    reads the container through its class's function: (class, name, that function),
    the function checked. Elsewhere (an attribute of an object leaf, a container's class
    attribute that is no function) None: what the chain finds is checked as any other
    name's."""
    value = argument
    for depth, name in enumerate(chain.attributes):
        if value is MISSING or _described(value) is not None:
            break
        fields = pytree.attribute_fields(value)
        if fields is not None and name in fields:
            value = getattr(value, name, MISSING)
            continue
        if pytree.is_leaf(value):
            return None
        found = inspect.getattr_static(type(value), name, None)
        if depth == len(chain.attributes) - 1 and (
                inspect.isroutine(found) or isinstance(found, (classmethod, staticmethod))):
            return (type(value), name, found)
        return None
    return None if value is MISSING else ()


def state_of(key: tuple) -> tuple:
    """The checked state a cache key holds (first in the key, api.py), or ()."""
    first = key[0] if key else None
    return first[1] if type(first) is tuple and first[:1] == ("state",) else ()


def without_state(key: tuple) -> tuple:
    """A cache key as the signature alone makes it."""
    return key[1:] if state_of(key) else key


def _set_itself(chain: Chain, stored: frozenset[Chain]) -> bool:
    """Does the function assign this chain, or one it starts with (`self.t`, `self.cfg`
    for `self.cfg.x`)?"""
    return any(s.root == chain.root and s.name == chain.name and
               chain.attributes[:len(s.attributes)] == s.attributes for s in stored)


def _start(chain: Chain, function: types.FunctionType, fixed: dict[str, Any]) -> Any:
    """Where a chain starts, as (root, a, b); None where it is not state (a parameter
    bound to nothing: *args)."""
    if chain.root == GLOBAL:
        return (GLOBALS, function.__globals__, chain.name)
    if chain.root == CLOSURE:
        cells = dict(zip(function.__code__.co_freevars, function.__closure__ or ()))
        return (CELL, cells[chain.name], None) if chain.name in cells else None
    if chain.name in fixed:
        return (OBJECT, fixed[chain.name], None)
    return (ARGUMENT, None, chain.name)


def _code_functions(fn: Callable) -> list[tuple[types.FunctionType, dict[str, Any]]]:
    """The Python functions whose code is the compiled function's own, with the objects
    their first parameters are bound to (a bound method's instance, a callable object, a
    partial's arguments): the function that runs, and the ones it wraps (`__wrapped__`,
    set by functools.wraps)."""
    fixed: dict[str, Any] = {}
    while True:
        if isinstance(fn, functools.partial):
            inner = _code_functions(fn.func)
            # its arguments follow the parameters the function it wraps has bound (a bound
            # method's instance, an inner partial's arguments)
            names = [n for n in inner[0][0].__code__.co_varnames if n not in inner[0][1]] \
                if inner else []
            fixed.update(zip(names, fn.args))
            fixed.update(fn.keywords)
            fn = fn.func
        elif isinstance(fn, types.MethodType):
            code = getattr(fn.__func__, "__code__", None)
            if code is not None and code.co_argcount:
                fixed[code.co_varnames[0]] = fn.__self__
            fn = fn.__func__
        elif isinstance(fn, (staticmethod, classmethod)):
            fn = fn.__func__
        elif isinstance(fn, types.FunctionType):
            break
        elif isinstance(vars(type(fn)).get("__call__"), types.FunctionType):
            fn = types.MethodType(vars(type(fn))["__call__"], fn)
        else:
            return []
    out = [(fn, fixed)]
    wrapped = getattr(fn, "__wrapped__", None)
    while isinstance(wrapped, types.FunctionType) and len(out) < 8:
        out.append((wrapped, {}))
        wrapped = getattr(wrapped, "__wrapped__", None)
    return out


def _described(value: Any) -> Any:
    try:
        return arguments.describe(value)
    except Exception:
        return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind_of(key: Any) -> str:
    """What a checked name holds now, by the kind of its key."""
    if type(key) is Same:
        return "another kernel, function or object"
    if isinstance(key, tuple) and key[:1] == ("array",):
        return "another array or layout"
    if isinstance(key, tuple) and key[:1] == ("method",):
        return "another method"
    if key == _GONE:
        return "nothing"
    return "another value"


def _key_shown(key: Any) -> str:
    if key is _GONE or key == _GONE:
        return "not set"
    if isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], type):
        return str(key[1])  # a value (static_key: its type and value or repr)
    if isinstance(key, tuple) and key[:1] == ("key",):
        return _shown(key[1])
    if isinstance(key, tuple) and key[:1] == ("array",):
        return f"an array at {key[2]:#x} of shape {key[3]}"
    return repr(key)
