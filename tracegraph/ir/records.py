"""A cheaper constructor for the IR's frozen, slotted dataclasses that a compile makes once
per launch (Op at trace, PlanNode at lowering).

dataclass(frozen=True) writes each field through object.__setattr__, which costs about
twice what setting the slot through its member descriptor does: PlanNode took 1.6 us to
make against 0.8 us (Python 3.12), a millisecond of a 1,000-launch compile at each of
trace and lowering. The instances stay frozen: only __init__ changes.
"""
from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def fast_init(cls: type[T]) -> type[T]:
    """Give a frozen, slotted dataclass an __init__ with the same parameters and defaults
    that sets each slot through its member descriptor. Only plain fields (a default or
    none) are supported; anything else is refused here, at import."""
    params = dataclasses.fields(cls)  # type: ignore[arg-type]
    frozen = cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    if not frozen or "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        raise TypeError(f"fast_init: {cls.__name__} is not a frozen, slotted dataclass "
                        "without __post_init__")
    # (its module's name: a trace's callee recorder takes code of a module outside
    # tracegraph for the user's, and would follow every op made)
    names: list[str] = []
    namespace: dict[str, Any] = {"__name__": cls.__module__}
    for i, f in enumerate(params):
        if not f.init or f.kw_only or f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"fast_init: field {f.name} of {cls.__name__} is not plain")
        namespace[f"_set{i}"] = cls.__dict__[f.name].__set__
        if f.default is dataclasses.MISSING:
            names.append(f.name)
        else:
            namespace[f"_default{i}"] = f.default
            names.append(f"{f.name}=_default{i}")
    body = "".join(f"    _set{i}(self, {f.name})\n" for i, f in enumerate(params))
    exec(f"def __init__(self, {', '.join(names)}):\n{body or '    pass'}\n", namespace)
    init: Any = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
