"""What a function's bytecode says about the attributes it may find missing or reads
all at once (for trace/bytecode.py's code_names): names given to hasattr and getattr,
attributes loaded where an AttributeError may be swallowed, names asked of an object's
dict, a class pattern's attributes, and the objects read whole (`astuple(cfg)`,
`vars(self)`)."""
from __future__ import annotations

import dis
import types

_TESTS = ("hasattr", "getattr")
_OPERAND = ("LOAD_FAST", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_ATTR",
            "LOAD_CLOSURE", "LOAD_FAST_CHECK", "LOAD_FAST_LOAD_FAST", "PUSH_NULL", "CACHE")
_CATCHING = ("AttributeError", "Exception", "BaseException")


def tested_attributes(code: types.CodeType) -> set[str]:
    """Attributes the code may find absent: a string given to hasattr or getattr
    (`hasattr(self, "bias")`, `getattr(opt, "extra", None)`; every string of the code's
    tuples where the name is not a constant, "*": `for a in ("bias", "gain"): getattr(m,
    a, None)`), and an attribute loaded inside a `try` whose handler catches
    AttributeError (or everything) or a `with` that may suppress it (`try: self.bias`,
    `contextlib.suppress(AttributeError)`). Their absence is checked (trace/guards.py); a
    string only compared as a value is not one."""
    if not {*_TESTS, *_CATCHING} & set(code.co_names) and not code.co_exceptiontable:
        return set()
    ops = list(dis.get_instructions(code))
    out: set[str] = set()
    first = code.co_varnames[0] if code.co_argcount else None
    for i, ins in enumerate(ops):
        if ins.opname not in ("LOAD_GLOBAL", "LOAD_NAME") or ins.argval not in _TESTS:
            continue
        j = i + 1  # the object: loads and attributes, then the name
        while j < len(ops) and ops[j].opname in _OPERAND:
            j += 1
        if j < len(ops) and ops[j].opname == "LOAD_CONST" and isinstance(ops[j].argval, str):
            # asked of the code's first parameter (`hasattr(self, "opts")`): "self:"
            loads = [o for o in ops[i + 1:j] if o.opname not in ("PUSH_NULL", "CACHE")]
            mine = len(loads) == 1 and loads[0].opname.startswith("LOAD_FAST") and \
                loads[0].argval == first
            out.add(("self:" if mine else "") + ops[j].argval)
        else:
            out.add("*")
    out.update(_loaded_where_caught(code, ops))
    return {a for a in out if (a.removeprefix("self:").isidentifier() and
                               not a.removeprefix("self:").startswith("__")) or a == "*"}


_WHOLE = ("astuple", "asdict", "fields", "vars")
_LOADS = ("LOAD_FAST", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_ATTR",
          "LOAD_FAST_CHECK")


def read_whole(code: types.CodeType, top: bool = True) -> set[str]:
    """The names of objects the code reads whole, every attribute at once
    (`dataclasses.astuple(cfg)`, `asdict`, `fields`, `vars(self.cfg)`,
    `cfg.__dict__.values()`): the last name of the expression each is given."""
    if not {*_WHOLE, "__dict__"} & set(code.co_names):
        return set()
    ops = list(dis.get_instructions(code))
    first = code.co_varnames[0] if code.co_argcount else None
    out = set()
    for i, ins in enumerate(ops):
        given = None
        if ins.argval == "__dict__" and ins.opname == "LOAD_ATTR" and i > 0 and \
                ops[i - 1].opname in _LOADS:
            given = ops[i - 1]
        elif ins.argval in _WHOLE and ins.opname in (*_LOADS, "LOAD_METHOD"):
            j = i + 1  # the argument: loads and attributes, up to the call
            while j < len(ops) and ops[j].opname in _OPERAND:
                j += 1
            if j > i + 1 and ops[j - 1].opname in _LOADS:
                given = ops[j - 1]
        if given is None or not isinstance(given.argval, str):
            continue
        # its first parameter (`vars(self)`): "@" (only the objects it ran on); astuple
        # and asdict read nested dataclasses too: "*"
        mine = top and given.argval == first and \
            (given.opname.startswith("LOAD_FAST") or given.opname == "LOAD_DEREF") and \
            given is ops[i - 1 if ins.argval == "__dict__" else i + 1]
        deep = "*" if ins.argval in ("astuple", "asdict") else ""
        out.add(("@" if mine else given.argval) + deep)
    return out


def _may_catch(name: str) -> bool:
    """May an `except` naming this catch an AttributeError? Yes for AttributeError,
    Exception and BaseException, and for a name that is not a builtin exception (a global
    tuple of them: `except ERRORS`)."""
    import builtins
    known = getattr(builtins, name, None)
    return name in _CATCHING or not (isinstance(known, type) and
                                     issubclass(known, BaseException))


def match_keywords(code: types.CodeType) -> set[str]:
    """The attributes a class pattern reads (`case Cfg(scale=s)`: MATCH_CLASS's tuple)."""
    ops = list(dis.get_instructions(code))
    return {s for i, ins in enumerate(ops) if ins.opname == "MATCH_CLASS" and i > 0 and
            ops[i - 1].opname == "LOAD_CONST" and isinstance(ops[i - 1].argval, tuple)
            for s in ops[i - 1].argval if isinstance(s, str)}


def name_tuples(code: types.CodeType) -> list[tuple]:
    """The code's tuples of strings, but those a keyword call names its keywords by."""
    keywords = {id(code.co_consts[ins.arg]) for ins in dis.get_instructions(code)
                if ins.opname == "KW_NAMES" and ins.arg is not None}  # (3.11, 3.12)
    return [c for c in code.co_consts if isinstance(c, tuple) and id(c) not in keywords
            and all(isinstance(x, str) for x in c)]


def asked_of_dicts(code: types.CodeType) -> set[str]:
    """Strings the code asks an object's dict for: `vars(m).get("bias")`,
    `m.__dict__.get("bias")`, `"bias" in vars(m)`."""
    ops = list(dis.get_instructions(code))
    out = set()
    for i, ins in enumerate(ops):
        if ins.opname != "LOAD_CONST" or not isinstance(ins.argval, str):
            continue
        before = [o.argval for o in ops[max(0, i - 6):i]]
        after = ops[i + 1:i + 8]
        if (("vars" in before or "__dict__" in before) and "get" in before) or (
                any(o.argval in ("vars", "__dict__") for o in after) and
                any(o.opname == "CONTAINS_OP" for o in after)):
            out.add(ins.argval)
    return {a for a in out if a.isidentifier() and not a.startswith("__")}


def _loaded_where_caught(code: types.CodeType, ops: list) -> set[str]:
    """The attributes loaded in the `try` blocks (and `with` blocks) of `code` whose
    handler may swallow an AttributeError (Python 3.11+: its exception table)."""
    entries = getattr(dis.Bytecode(code), "exception_entries", ())  # (3.11+)
    at = {ins.offset: k for k, ins in enumerate(ops)}
    out: set[str] = set()
    for e in entries:
        k = at.get(e.target)
        if k is None or ops[k].opname != "PUSH_EXC_INFO":
            continue  # (a handler's own cleanup)
        # a bare except; `with suppress(...)` (not any `with`: a lock's swallows nothing);
        # except AttributeError, Exception or a tuple naming one
        head = ops[k + 1:k + 8]
        matched = []
        for ins in head:
            if ins.opname == "CHECK_EXC_MATCH":
                break
            matched.append(ins)
        catches = bool(head) and (
            head[0].opname == "POP_TOP" or
            (head[0].opname == "WITH_EXCEPT_START" and "suppress" in code.co_names) or
            any(ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and _may_catch(ins.argval)
                for ins in matched))
        if catches:
            out.update(ins.argval for ins in ops if e.start <= ins.offset < e.end and
                       ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and
                       isinstance(ins.argval, str))
    return out
