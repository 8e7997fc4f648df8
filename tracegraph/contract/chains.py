"""The names a function's own code loads, read from its bytecode: each global and closure
variable, and each attribute chain loaded from one of them or from a parameter
(`CFG.scale`, `self.cfg.temperature`), in the code of the function and of the functions,
lambdas and comprehensions nested in it. Pure: only `dis`, so it runs (and is tested) on
every Python version the project supports (3.11, 3.12, 3.13)."""
from __future__ import annotations

import dis
import types
from dataclasses import dataclass

GLOBAL, CLOSURE, PARAMETER = "global", "closure", "parameter"

# a local variable or parameter pushed on the stack (3.13 pushes two at once)
_LOAD_LOCAL = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_BORROW"})
_LOAD_TWO_LOCALS = frozenset({"LOAD_FAST_LOAD_FAST", "LOAD_FAST_BORROW_LOAD_FAST_BORROW",
                              "STORE_FAST_LOAD_FAST"})
_LOAD_ATTRIBUTE = frozenset({"LOAD_ATTR", "LOAD_METHOD"})
_STORE_LOCAL = frozenset({"STORE_FAST", "DELETE_FAST", "STORE_DEREF", "DELETE_DEREF",
                          "STORE_FAST_STORE_FAST"})
# instructions that leave the chain's object where it was (their slots in the code)
_TRANSPARENT = frozenset({"CACHE", "NOP", "EXTENDED_ARG"})


@dataclass(frozen=True)
class Chain:
    """A root (a global or closure variable, or a parameter, by name) and the attributes
    loaded from it in a row: ("global", "CFG", ("scale",))."""
    root: str
    name: str
    attributes: tuple[str, ...] = ()

    def describe(self) -> str:
        return ".".join((self.name, *self.attributes))


@dataclass(frozen=True)
class Names:
    """What a function's code loads (`loaded`), and the chains it assigns or deletes
    (`stored`: `self.t = ...`, `self.t += 1`, `global G; G = ...`: state it keeps itself)."""
    loaded: tuple[Chain, ...]
    stored: frozenset[Chain]


def names_of(code: types.CodeType, parameters: tuple[str, ...], *,
             bare_parameters: bool = False) -> Names:
    """The chains `code` and the code nested in it load, in order of first appearance; a
    chain is kept whole (`self.cfg.temperature`, not also `self.cfg`); a parameter read
    whole only with `bare_parameters` (the call's signature has it)."""
    loaded: dict[Chain, None] = {}
    stored: set[Chain] = set()
    _scan(code, frozenset(parameters), frozenset(parameters), frozenset(code.co_freevars),
          loaded, stored)
    # a parameter the code assigns (`cfg = cfg.model`) is a local: its chains are not the
    # argument's
    rebound = {c.name for c in stored if c.root == PARAMETER and not c.attributes}
    return Names(tuple(c for c in loaded if (bare_parameters or c.root != PARAMETER or
                                             c.attributes) and
                       not (c.root == PARAMETER and c.name in rebound)), frozenset(stored))


def _scan(code: types.CodeType, parameters: frozenset[str], captured: frozenset[str],
          free: frozenset[str], loaded: dict[Chain, None], stored: set[Chain]) -> None:
    """`parameters`: the traced function's parameters as this code's own locals (none in
    nested code); `captured`: its parameters as cells this code reads (a parameter a nested
    function uses is one in the function too); `free`: its closure variables visible here."""
    chain: Chain | None = None
    copied: Chain | None = None  # a chain whose object was copied for its last attribute
    updated: Chain | None = None  # the chain `self.t += x` loaded (COPY 1 first), to store
    instructions = list(dis.get_instructions(code))
    inlined = _inlined_comprehension_stores(instructions)
    for index, ins in enumerate(instructions):
        op = ins.opname
        if index in inlined:  # (an inlined comprehension's own variable, 3.12+)
            if chain is not None:
                loaded.setdefault(chain, None)
            chain = None
            continue
        if op in _TRANSPARENT:
            continue
        if op == "COPY" and ins.arg == 1:  # (`self.t += 1`: the object kept to store into)
            copied = chain
            continue
        if chain is not None and op in _LOAD_ATTRIBUTE:
            grown = Chain(chain.root, chain.name, (*chain.attributes, str(ins.argval)))
            if copied is chain:
                updated = grown
            chain, copied = grown, None
            continue
        if op in ("STORE_ATTR", "DELETE_ATTR"):
            name = str(ins.argval)
            if chain is not None:  # (the object stored to is the chain just loaded)
                stored.add(Chain(chain.root, chain.name, (*chain.attributes, name)))
            elif updated is not None and updated.attributes[-1:] == (name,):
                stored.add(updated)  # (only an augmented assignment's: `o.t = cfg.t` is not)
            updated = None
        elif op in ("STORE_GLOBAL", "DELETE_GLOBAL"):
            stored.add(Chain(GLOBAL, str(ins.argval)))
        elif op in _STORE_LOCAL or op == "STORE_FAST_LOAD_FAST":
            names = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
            for name in names[:1] if op == "STORE_FAST_LOAD_FAST" else names:
                if name in parameters or name in captured:
                    stored.add(Chain(PARAMETER, str(name)))
        if chain is not None:
            loaded.setdefault(chain, None)
        chain = _root(ins, parameters, captured, free)
    if chain is not None:
        loaded.setdefault(chain, None)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):  # nested: its own locals shadow our names
            own = set(const.co_cellvars) | set(const.co_varnames)
            _scan(const, frozenset(), captured - own, free - own, loaded, stored)


def _inlined_comprehension_stores(instructions: list[dis.Instruction]) -> set[int]:
    """The indices of the stores an inlined comprehension (Python 3.12+, PEP 709) makes to
    its own variable: between the LOAD_FAST_AND_CLEAR that saves the name's value and the
    END_FOR of its loop, then the two that put the saved value back (after the loop, and
    before the RERAISE of its exception path). They do not rebind the function's name."""
    out: set[int] = set()
    if not any(ins.opname == "LOAD_FAST_AND_CLEAR" for ins in instructions):
        return out  # (no inlined comprehension: before 3.12, and most functions)
    loops = 0  # FOR_ITERs without their END_FOR so far, in code order
    open_at: dict[str, list[int]] = {}  # name -> the loop depth each saving opened at
    restores: dict[str, int] = {}  # name -> restores after the loop still to come
    for index, ins in enumerate(instructions):
        op, name = ins.opname, ins.argval
        if op == "LOAD_FAST_AND_CLEAR":
            open_at.setdefault(str(name), []).append(loops)
        elif op == "FOR_ITER":
            loops += 1
        elif op == "END_FOR":
            loops -= 1
            for saved, depths in open_at.items():
                while depths and depths[-1] == loops:
                    depths.pop()
                    restores[saved] = restores.get(saved, 0) + 1
        elif op in ("STORE_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST",
                    "STORE_DEREF"):
            names = name if isinstance(name, tuple) else (name,)
            if op == "STORE_FAST_LOAD_FAST":
                names = names[:1]
            owned = []
            for stored in map(str, names):
                if open_at.get(stored):
                    owned.append(stored)  # the loop's variable
                elif stored in open_at and _next_op(instructions, index) == "RERAISE":
                    owned.append(stored)  # the exception path's restore
                elif restores.get(stored):
                    restores[stored] -= 1
                    owned.append(stored)  # the restore after the loop
            if len(owned) == len(names):
                out.add(index)
    return out


def _next_op(instructions: list[dis.Instruction], index: int) -> str:
    return next((instructions[k].opname for k in range(index + 1, len(instructions))
                 if instructions[k].opname not in _TRANSPARENT), "")


def _root(ins: dis.Instruction, parameters: frozenset[str], captured: frozenset[str],
          free: frozenset[str]) -> Chain | None:
    op, name = ins.opname, ins.argval
    if op == "LOAD_GLOBAL":
        return Chain(GLOBAL, str(name))
    if op == "LOAD_DEREF" and name in free:
        return Chain(CLOSURE, str(name))
    if op == "LOAD_DEREF" and name in captured:
        return Chain(PARAMETER, str(name))
    if op in _LOAD_LOCAL and name in parameters:
        return Chain(PARAMETER, str(name))
    if op in _LOAD_TWO_LOCALS and isinstance(name, tuple) and name[-1] in parameters:
        return Chain(PARAMETER, str(name[-1]))  # (the second is the one on top)
    return None
