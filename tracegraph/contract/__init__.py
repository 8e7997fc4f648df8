"""The Python-state contract, in one place.

The function's Python runs when it traces. A graph is chosen by the call's signature
(argument structure; per array its shape, dtype, strides, placement and aliasing; per
Python scalar argument its value) and by the function's checked state:

- the global and closure names its own code (and the functions nested in it) loads, and
  the attribute chains that code loads from them and from its parameters (`CFG.scale`,
  `self.cfg.temperature`), read from its bytecode once (chains.py) and compared on every
  call: numbers, strings, None and tuples of them by value; arrays by memory and layout;
  other objects, functions and kernels by identity (state.py);
- `key()`, a callable the user declares (`tg.compile(key=lambda: (cfg.lr, model.v))`).

A new state traces a new graph; a state seen before reuses its graph. What Numba
compiles into a kernel is fixed at the kernel's first launch, as eagerly
(compiled_in.py). Everything else the function reads of Python state is baked into the
graph; `verify=` traces again and compares (verify.py).
"""
from __future__ import annotations

from .checks import holds
from .compiled_in import CompiledIn
from .state import Contract, state_of, without_state
from .verify import check_same, verify_every

__all__ = ["CompiledIn", "Contract", "check_same", "holds", "state_of", "verify_every",
           "without_state"]
