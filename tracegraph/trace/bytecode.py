"""What a traced function's code names and changes, read from its bytecode: the names it
loads and the keys it holds (which paths trace/paths.py may follow), and the attributes,
globals and containers it assigns, changes or walks, and so which paths are state it keeps
itself (`kept`, `changed`: no check) or walks (`walked`), for trace/guards.py."""
from __future__ import annotations

import dis
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .paths import HostRef, function_of
from .tested import (
    asked_of_dicts,
    match_keywords,
    name_tuples,
    read_whole,
    tested_attributes,
)
from .values import GONE


def code_names(codes: Iterable[types.CodeType]) -> frozenset[str]:
    """Every name the code (and the code nested in it) loads, globals and attributes, and
    the strings it holds (dict keys: `CFG["w"]`)."""
    names: set[str] = set()
    codes = list(codes)
    for code in nested(codes):
        names.update(code.co_names)
        # a string the code holds may be a key it looks up (`CFG["w"]`): kept as "[w]", so
        # a method name (`opt.step()`) does not name the key STATE["step"]
        names.update(f"[{c}]" for c in code.co_consts if isinstance(c, str))
        if {"items", "values"} & set(code.co_names):  # it may read every entry of a dict
            names.add("[*]")
        names.update(f"?{a}" for a in tested_attributes(code))
        # (a nested function's first parameter is not the object this code runs on)
        names.update(f"{{{r}}}" for r in read_whole(code, any(code is c for c in codes)))
        if "MATCH_CLASS" in dis.opmap and code.co_code.count(dis.opmap["MATCH_CLASS"]):
            names.update(match_keywords(code))
        if {"vars", "__dict__"} & set(code.co_names):  # `vars(m).get("bias")`, `in vars(m)`
            names.update(f"?{c}" for c in asked_of_dicts(code))
    if "?*" in names:  # (a comprehension's getattr, its outer code's tuple of names)
        names.update(f"?{s}" for code in nested(codes) for c in name_tuples(code)
                     for s in c if s.isidentifier() and not s.startswith("__"))
    return frozenset(names)


def codes_of(fn: Callable) -> list[types.CodeType]:
    """The code a compiled callable runs (none for a builtin)."""
    code = getattr(function_of(fn), "__code__", None)
    return [code] if code is not None else []


def nested(codes: Iterable[types.CodeType]) -> Iterator[types.CodeType]:
    """The code and the code nested in it (comprehensions, inner functions)."""
    stack = list(codes)
    while stack:
        code = stack.pop()
        if code is not None:
            yield code
            stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]


def stored_names(codes: Iterable[types.CodeType], module: str = "") -> frozenset[str]:
    """The attributes and globals the code (and the code nested in it) assigns or deletes
    (`self.calls += 1`, `global STEP; STEP += 1`; globals as "global NAME", or
    "global MODULE:NAME" for code of another module than the traced function's)."""
    return frozenset(_stored(codes, module))


def on_itself(entry: str) -> bool:
    """Is this stored_names entry an attribute, or a container held by one (`self.lr`,
    `self.kv.append`): what a called method changes on the object it runs on?"""
    return " " not in entry or (entry.startswith("mutated ") and ">" in entry)


def _stored(codes: Iterable[types.CodeType], module: str) -> set[str]:
    stored: set[str] = set()
    for code in nested(codes):
        ops = [i for i in dis.get_instructions(code) if i.opname not in _NOISE]
        for k, i in enumerate(ops):
            if i.opname in ("STORE_ATTR", "DELETE_ATTR"):
                stored.add(i.argval)
            elif i.opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
                stored.add(f"global {module}:{i.argval}" if module else f"global {i.argval}")
            # a container it changes (`log.append(...)`, `self.cache[k] = v`): "mutated NAME"
            # for the name it was loaded by (the load just before the method, or before
            # the key)
            # (before a key only when the key is one instruction: `D[k] = v`, not D[len(L)])
            at = k - 1 if i.argval in _MUTATORS and k else \
                k - 2 if i.opname in ("STORE_SUBSCR", "DELETE_SUBSCR") and k > 1 and \
                ops[k - 1].opname.startswith("LOAD_") else -1
            # (not a local: no path ends in one, and a local copy, `ls = list(self.ls)`,
            # changed is not the container)
            name = _loaded(ops, at) if at >= 0 and \
                not ops[at].opname.startswith("LOAD_FAST") else None
            if name:
                # with the name of what holds it, where it is loaded from something
                # (`self.kv`, `STATS["layers"]`): "mutated self>kv", else "mutated LOG"
                parent = at - 2 if ops[at].opname in ("BINARY_SUBSCR", "BINARY_OP") else \
                    at - 1 if ops[at].opname in ("LOAD_ATTR", "LOAD_METHOD") else -1
                holder = _loaded(ops, parent) if parent >= 0 else None
                stored.add(f"mutated {holder}>{name}" if holder else f"mutated {name}")
            # a container it walks or looks in (`for g in LAYERS`, `"wd" in OPT`,
            # `D["bufs"].values()`, `len(T)`): "iterated NAME"
            # (what feeds the walk: the load just before, or every load since a walker
            # function or a slice, `zip(A, B)`, `sorted(A, reverse=True)`, `A[1:]`; more
            # names than walked is only more checks)
            feeds: range = range(0)
            if k and (i.opname in ("GET_ITER", "CONTAINS_OP", "UNPACK_SEQUENCE", "UNPACK_EX")
                      or (i.opname.startswith("LOAD_") and i.argval in _WALKS)):
                feeds = range(k - 1, k)
                if ops[k - 1].opname == "BINARY_SUBSCR" and k > 1 and \
                        ops[k - 2].opname == "BUILD_SLICE":
                    feeds = range(max(0, k - 7), k - 1)
            if i.opname.startswith("CALL"):
                walker = next((j for j in range(k - 1, max(-1, k - 9), -1)
                               if ops[j].argval in _WALKERS and ops[j].opname in _NAMES), None)
                if walker is not None:  # len(T), list(self.layers), zip(A, B)
                    feeds = range(walker + 1, k)
            for j in feeds:
                if _loaded(ops, j):
                    stored.add(f"iterated {_loaded(ops, j)}")
    return stored


def _loaded(ops: list, k: int) -> str | None:
    """The name ops[k] loads a container by: an attribute or variable, or "[key]" for an
    item with a constant key; None for anything else."""
    i = ops[k]
    if i.opname.startswith("LOAD_") and i.opname != "LOAD_CONST" and isinstance(i.argval, str):
        return i.argval
    if i.opname in ("BINARY_SUBSCR", "BINARY_OP") and k and ops[k - 1].opname == "LOAD_CONST" \
            and isinstance(ops[k - 1].argval, str):
        return f"[{ops[k - 1].argval}]"
    return None


_WALKS = frozenset({"items", "values", "keys", "index", "count"})
_WALKERS = frozenset({"len", "list", "tuple", "set", "sorted", "enumerate", "zip", "sum",
                      "min", "max", "any", "all", "dict", "reversed", "iter", "map"})


_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update",
                       "setdefault", "popitem", "__setitem__", "__delitem__"})
_NAMES = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF"})
_NOISE = frozenset({"CACHE", "PRECALL", "PUSH_NULL", "RESUME", "NOP", "EXTENDED_ARG"})


_COPIES = frozenset({"to_device", "copy_to_device"})
_VALUE_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_FAST", "LOAD_ATTR",
                          "LOAD_CLASSDEREF", "LOAD_FAST_CHECK"})


def used_beyond_copies(codes: Iterable[types.CodeType]) -> frozenset[str]:
    """The names the code loads other than as the array a host-to-device copy takes
    (`cuda.to_device(T)`, `d.copy_to_device(self.T)`) or for its layout only (`T.shape`,
    `len(T)`): a host array read in Python (`T.max()`, `T[0]`) bakes what the trace read."""
    used: set[str] = set()
    for code in nested(codes):
        ops = [i for i in dis.get_instructions(code) if i.opname not in _NOISE]
        for k, i in enumerate(ops):
            if i.opname in _VALUE_LOADS and isinstance(i.argval, str) and \
                    not _copied(ops, k) and not _layout_only(ops, k):
                used.add(i.argval)
    return frozenset(used)


_LAYOUT = frozenset({"shape", "dtype", "size", "ndim", "nbytes", "itemsize", "strides",
                     "flags"})


def _layout_only(ops: list, k: int) -> bool:
    """Is ops[k] a load whose value only gives its layout (`H.shape`, `H.dtype`, `len(H)`),
    which does not follow its contents?"""
    after = ops[k + 1] if k + 1 < len(ops) else None
    if after is not None and after.opname == "LOAD_ATTR" and after.argval in _LAYOUT:
        return True
    before = ops[k - 1] if k else None
    return before is not None and before.opname in ("LOAD_GLOBAL", "LOAD_NAME") and \
        before.argval == "len" and after is not None and after.opname.startswith("CALL")


def _copied(ops: list, k: int) -> bool:
    """Is ops[k] the load of a copy's array: after the copy method (and the loads of what
    holds the array, `self.cfg`), before the call or the next argument?"""
    j = k - 1
    while j >= 0 and ops[k].opname == "LOAD_ATTR" and ops[j].opname in _VALUE_LOADS and \
            ops[j].argval not in _COPIES:  # what holds it: self.cfg.T
        j -= 1
    method = j >= 0 and ops[j].opname in ("LOAD_METHOD", "LOAD_ATTR") and \
        ops[j].argval in _COPIES
    after = ops[k + 1].opname if k + 1 < len(ops) else ""
    return method and (after.startswith(("CALL", "KW_NAMES", "PRECALL")) or
                       after in _VALUE_LOADS or after == "LOAD_CONST")


def walked(ref: HostRef, stored: frozenset[str]) -> bool:
    """Does the function walk or look in this path's container (stored_names)? An item of
    a sequence it walks, too: it may walk that through a local name (`for row in LL: for
    s in row`)."""
    if f"iterated {_last_name(ref)}" in stored:
        return True
    return bool(ref.steps) and ref.steps[-1][0] == "[]" and \
        isinstance(ref.steps[-1][1], int) and walked(HostRef(ref.root, ref.steps[:-1]), stored)


def changed(ref: HostRef, stored: frozenset[str], holder: Any = None,
            owned: dict[str, set[int]] | None = None) -> bool:
    """Does the function change this path's container itself (stored_names: by its name
    and the name of what holds it), or a container holding it (`TIMES.setdefault(k,
    []).append(dt)`: TIMES["fwd"])? Its length then follows the traces, not the caller.
    `holder`, `owned`: a called function changing it on the object it ran on (_by)."""
    for n in range(len(ref.steps), -1, -1):
        if _changed_here(HostRef(ref.root, ref.steps[:n]), stored,
                         holder if n == len(ref.steps) else GONE, owned):
            return True
    return False


def _changed_here(ref: HostRef, stored: frozenset[str], holder: Any,
                  owned: dict[str, set[int]] | None) -> bool:
    if not ref.steps:
        return f"mutated {ref.root[1]}" in stored
    if len(ref.steps) == 1:
        name = ref.root[2] if ref.root[0] == "leaf" else ref.root[1]
    else:
        how, key = ref.steps[-2]
        name = key if how == "." else f"[{key}]"
    return _by(f"mutated {name}>{_last_name(ref)}", stored, holder, owned)


def _by(entry: str, stored: frozenset[str], holder: Any,
        owned: dict[str, set[int]] | None) -> bool:
    """Did the traced function store this, or a function it called, on the object it ran
    on (`holder`, the object holding what was stored: a Warmup's own `self.lr`, not the
    Trainer's)?"""
    return entry in stored or (owned is not None and holder is not GONE
                               and id(holder) in owned.get(entry, ()))


def _last_name(ref: HostRef) -> str:
    how, last = ref.steps[-1] if ref.steps else (".", ref.root[1])
    return last if how == "." else f"[{last}]"


def kept(ref: HostRef, stored: frozenset[str], holder: Any = None,
         owned: dict[str, set[int]] | None = None) -> bool:
    """Is this path's value state the function keeps (it assigns it: a counter), not a
    value that picks what it launches? A global it assigns, an attribute it assigns on
    the object it works on (`self.calls += 1`, an argument's), or one a function it calls
    assigns on the object that function ran on (`STATS.hit()` bumping `STATS.calls`)."""
    if not ref.steps:
        module = f"{ref.root[2].name}:" if len(ref.root) > 2 else ""
        return f"global {module}{ref.root[1]}" in stored
    how, key = ref.steps[-1]
    if how != ".":
        return False
    if owned is not None and holder is not GONE and id(holder) in owned.get(key, ()):
        return True
    return ref.root[0] in ("self", "object", "leaf") and len(ref.steps) == 1 and \
        key in stored
