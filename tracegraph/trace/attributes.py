"""An object's attributes as the name search (trace/paths.py) walks them: its own, its
slots, those the code names that it computes, what its classes hold under names the code
uses, the attributes it lacks that the code tests, and its methods that ran."""
from __future__ import annotations

import inspect
import itertools
import types
from collections.abc import Iterator
from typing import Any

from .values import _FUNCTIONS, ABSENT, BREADTH, is_mock, is_object


def attributes(value: Any, names: frozenset[str],
                ran: frozenset) -> Iterator[tuple[tuple, Any]]:
    """An object's attributes: its own, its slots, those the code names that it computes,
    and its methods that ran."""
    try:
        attrs = getattr(value, "__dict__", None)
    except Exception:  # (a __getattr__ raising KeyError)
        attrs = None
    own = attrs.keys() if isinstance(attrs, dict) else ()
    mock = is_mock(value)  # only what it was given: reading any other name makes a child
    if isinstance(attrs, dict):
        for k, v in itertools.islice(attrs.items(), BREADTH):
            if not (mock and (k.startswith("_") or k == "method_calls")):
                yield (".", k), v
    if mock:
        return
    for k in inspect.getattr_static(type(value), "__slots__", ()):  # (no metaclass code)
        if isinstance(k, str) and hasattr(value, k):
            yield (".", k), getattr(value, k)
    yield from _in_classes(value, names, own)
    yield from absent(value, names, own)
    # attributes the code names that the object computes (properties, __getattr__): a
    # replay evaluates them again, as the call would
    for k in sorted(names - set(own)):
        if not k.startswith(("__", "[", "?")):
            try:
                child = getattr(value, k)
                if _made_on_demand(value, k, child):
                    continue
            except Exception:
                continue
            if isinstance(child, types.MethodType) and \
                    not isinstance(child.__func__, types.FunctionType):
                # a kernel the class holds, bound to the instance (CUDADispatcher's
                # __get__): what `type(self).k` finds
                yield ((".", k), ("()", "__func__")), child.__func__
            elif not isinstance(child, _FUNCTIONS):  # a kernel the class holds, too
                yield (".", k), child
    yield from methods(value, ran)


def _made_on_demand(value: Any, name: str, child: Any) -> bool:
    """An object a `__getattr__` makes anew on every read (a null object's): not state a
    check can find again."""
    if not is_object(child) or inspect.getattr_static(value, name, _NONE) is not _NONE:
        return False
    return getattr(value, name) is not child


_NONE = object()


def _in_classes(value: Any, names: frozenset[str],
                own: Any) -> Iterator[tuple[tuple, Any]]:
    """What the classes of `value` hold under a name the code uses (an attribute, or a
    string: `vars(type(self))["k"]`) where `self.k` does not say it: hidden by the
    instance's own attribute or a subclass's (`type(self).k`, `super().k`,
    `type(self).__mro__[1].k`), named by a string only, or served by a metaclass."""
    wanted = sorted({k[1:-1] if k.startswith("[") else k for k in names} - {""})
    wanted = [k for k in wanted if k.isidentifier() and not k.startswith("__")]
    if not wanted:
        return
    try:
        cls = value.__class__  # (what the path walks: a property)
        mro = cls.__mro__[:-1] if isinstance(cls, type) else ()
    except Exception:
        return
    for k in wanted:
        holders = [i for i, c in enumerate(mro) if k in vars(c)]
        direct = k in names and k not in own  # `self.k` finds the first holder's
        for i in holders[1 if direct else 0:]:
            raw = vars(mro[i])[k]
            if isinstance(raw, (*_FUNCTIONS, staticmethod, classmethod, property)):
                continue  # (methods: _methods)
            try:
                child = getattr(mro[i], k)
            except Exception:
                continue
            yield (("()", "__class__"), ("()", "__mro__"), ("[]", i), (".", k)), child
        if not holders and k not in own and k in names and \
                hasattr(type(cls), "__getattr__"):
            try:  # a metaclass's __getattr__ (a registry behind `type(self).k`)
                child = getattr(cls, k)
            except Exception:
                continue
            if not isinstance(child, _FUNCTIONS):
                yield (("()", "__class__"), (".", k)), child


def absent(value: Any, names: frozenset[str], own: Any) -> Iterator[tuple[tuple, Any]]:
    """The attributes of an object, class or module that the code may find absent
    (bytecode's "?name": `hasattr(self, "bias")`, `getattr(opt, "extra", None)`, a load
    under `except AttributeError`) and that it lacks: setting one later runs other code
    eagerly."""
    for key in sorted(names):
        name = key[1:].removeprefix("self:")
        if key.startswith("?") and key != "?*" and name not in own:
            try:
                if hasattr(value, name):
                    continue
            except Exception:
                continue
            yield (".", name), ABSENT


def _ran_in_classes(cls: type, ran: frozenset) -> list[tuple[int, str]]:
    """(place in cls.__mro__, name) of the functions its classes hold that ran, by the
    names the classes hold them under (`forward = _plus`, a patched method)."""
    out = []
    for i, c in enumerate(cls.__mro__):
        if c is object:  # (a class made by exec with no __name__ says "builtins" too)
            continue
        for name, v in list(vars(c).items()):
            f = v.__func__ if isinstance(v, (staticmethod, classmethod)) else v
            if isinstance(f, types.FunctionType) and f.__code__ in ran:
                out.append((i, name))
    return out


def methods(value: Any, ran: frozenset) -> Iterator[tuple[tuple, Any]]:
    """The methods of `value` (an object or a class) that ran while the function traced, as
    the functions they run (`layer.forward.__func__`, `K.run.__func__`): a subclass swapped
    in, a method rebound on the class or set on the instance runs other code eagerly. One a
    subclass overrides that ran too (`super().forward(x)`) by its class's place in the MRO;
    one run by syntax (`m(x)`: `__call__`) though the code never names it."""
    is_class = isinstance(value, type)
    try:
        cls = value if is_class else value.__class__  # (what the path walks: a property)
        mro = cls.__mro__
    except Exception:
        return
    for i, name in _ran_in_classes(cls, ran):
        try:  # (not a property: evaluating it may have effects)
            owner = next(c for c in mro if name in vars(c))
            static = vars(mro[i])[name] if owner is not mro[i] else \
                inspect.getattr_static(value, name, None)
            if not isinstance(static, (types.FunctionType, staticmethod, classmethod)):
                continue
            path: tuple = ((("()", "__class__"),) if not is_class else ()) + (
                ("()", "__mro__"), ("[]", i), ("()", name)) if owner is not mro[i] else (
                ("()" if name.startswith("__") else ".", name),)
            fn = getattr(mro[i] if owner is not mro[i] else value, name)
            again = getattr(mro[i] if owner is not mro[i] else value, name)
        except Exception:
            continue
        if isinstance(fn, types.MethodType):  # (made anew on every read: its function)
            path, fn = (*path, ("()", "__func__")), fn.__func__
            again = getattr(again, "__func__", None)
        if again is not fn:  # a new function on every read (a __getattribute__ wrapping
            continue  # methods): not one a check can find again
        if isinstance(fn, types.FunctionType) and fn.__code__ in ran:
            yield path, fn


