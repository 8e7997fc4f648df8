"""Which names the search (trace/paths.py) counts as the code's: those the traced function
and the functions it ran use (trace/bytecode.py), what they change, the attributes they
may find missing and on which objects, the objects their methods read whole, and the
strings the state holds that the code may use as keys or attribute names."""
from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Mapping
from typing import Any

from .bytecode import code_names, codes_of, on_itself, stored_names, walked
from .callees import Scope
from .paths import HostRef, function_of, named


def objects_read_whole(found: list[tuple[HostRef, Any]], names: frozenset[str],
                wholes: dict[int, str]) -> frozenset[str]:
    """The objects a method of theirs read whole (`vars(self)`: `wholes`, their ids), by
    the names the paths finding them give them ("{opt}")."""
    out = set()
    for r, v in found:
        deep = wholes.get(id(v))
        if deep is not None and named(r, names):
            last = [k for _, k in r.steps if isinstance(k, str)]
            holder = last[-1] if last else (r.root[2] if r.root[0] == "leaf" else r.root[1])
            out.add(f"{{{holder}{deep}}}")
    return frozenset(out)


def held_names(found: list[tuple[HostRef, Any]], names: frozenset[str],
               stored: frozenset[str]) -> frozenset[str]:
    """Strings the code names (`KEY = "lr"`) that are keys of a dict it reaches, as keys
    the code holds ("[lr]"): it may look them up (`HP[KEY]`)."""
    strings = {v for r, v in found if isinstance(v, str) and f"[{v}]" not in names
               and named(r, names)}
    if "?*" in names:  # (a getattr over names a tuple, set, enum or a dict it walks holds)
        walks = "[*]" in names or "keys" in names  # (`.items()`, `.keys()`: not `len(D)`)
        strings |= {s for r, v in found if named(r, names) and
                    (not isinstance(v, Mapping) or (walks and walked(r, stored)))
                    for s in _strings_in(v) if f"[{s}]" not in names}
    dicts = [v for _, v in found if isinstance(v, Mapping)] if strings else []
    keys = frozenset(f"[{k}]" for k in strings if any(_has(d, k) for d in dicts))
    if "?*" in names:  # the code gets or tests attributes by a name it does not hold
        # (`getattr(m, ATTR, None)`): these strings may be that name; tested for absence
        # where one name holds it (not each of a list's: `for n in self.order`)
        attrs = {k for k in strings if k.isidentifier() and not k.startswith("__")}
        alone = {k for r, k in found if isinstance(k, str) and k in attrs and
                 not any(how == "[]" for how, _ in r.steps)}
        keys |= frozenset(attrs) | frozenset(f"?{k}" for k in alone)
    return keys - names


def _strings_in(value: Any) -> list[str]:
    """The strings a tuple, set or dict's keys hold, or an enum's (or its member's) string
    values."""
    if isinstance(value, enum.Enum):
        return [value.value] if isinstance(value.value, str) else []
    if isinstance(value, enum.EnumMeta):  # (`for m in Name: getattr(cfg, m.value)`)
        return [m.value for m in value if isinstance(m.value, str)]  # type: ignore[var-annotated]
    if isinstance(value, (tuple, set, frozenset, Mapping)):
        try:
            return [s for s in itertools.islice(value, 256) if isinstance(s, str)]
        except Exception:
            return []
    return []


def _has(d: Mapping, key: str) -> bool:
    try:
        return key in d
    except Exception:  # a dict subclass whose lookup raises
        return False


def names_used(fn: Callable, callees: list[tuple[Any, dict, tuple]]
           ) -> tuple[frozenset[str], frozenset[str], tuple[Scope, ...], dict[str, set[int]],
                      dict[str, set[int] | None], dict[int, str]]:
    """The names the function and the functions it ran use; what it changes; the other
    modules whose globals those read; what the functions it ran change on the objects
    they ran on (an attribute or container -> those objects' ids); and the attributes the
    code may find absent, on any object (None) or on the objects the methods asking for
    them of their own (`hasattr(self, "opts")`) ran on (ids); and the objects a method of
    theirs reads whole (`vars(self)`: id -> "" or "*" with what they hold)."""
    own = getattr(function_of(fn), "__globals__", None)
    names, stored = set(code_names(codes_of(fn))), set(stored_names(codes_of(fn)))
    bound = getattr(function_of(fn), "__self__", None)  # (a bound method's own object)
    tested: dict[str, set[int] | None] = {
        n[6:]: {id(bound)} if bound is not None else None
        for n in names if n.startswith("?self:")}
    tested.update({n[1:]: None for n in names if n.startswith("?") and
                   not n.startswith("?self:")})
    # objects read whole by a method of theirs (`vars(self)`), by id: "" or "*" (deep)
    wholes: dict[int, str] = {}
    for n in [n for n in names if n.startswith("{@")]:
        names.discard(n)
        if bound is not None:
            wholes[id(bound)] = n[2:-1]
        elif codes_of(fn) and codes_of(fn)[0].co_argcount:  # (a function's first argument)
            names.add(f"{{{codes_of(fn)[0].co_varnames[0]}{n[2:-1]}}}")
    scopes: dict[int, Scope] = {}
    owned: dict[str, set[int]] = {}
    for code, scope, selves in callees:
        used = code_names([code])
        names |= {n for n in used if not n.startswith("{@")}
        for n in used:
            if n.startswith("{@"):
                wholes.update((id(s), n[2:-1]) for s in selves)
            if n.startswith("?self:") and tested.get(n[6:], set()) is not None:
                tested.setdefault(n[6:], set()).update(  # type: ignore[union-attr]
                    id(s) for s in selves)
            elif n.startswith("?"):
                tested[n[1:]] = None
        module = ""
        if scope is not own:
            known = scopes.get(id(scope))
            scopes[id(scope)] = Scope(scope, used | (known.names if known else frozenset()))
            module = scopes[id(scope)].name
        for entry in stored_names([code], module):
            if on_itself(entry):  # (kept only on the objects it ran on)
                owned.setdefault(entry, set()).update(id(s) for s in selves)
            else:
                stored.add(entry)
    return frozenset(names), frozenset(stored), tuple(scopes.values()), owned, tested, wholes
