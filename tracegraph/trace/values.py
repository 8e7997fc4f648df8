"""What the name search (trace/paths.py) tells apart among the values it finds: Python
values a guard compares, objects it checks by type, mocks, and its markers for nothing
found."""
from __future__ import annotations

import datetime
import decimal
import enum
import fractions
import sys
import types
from typing import Any

import numpy as np

from ..pytree import container_shape
from ..signature import arguments
from ..traced import Array

GONE = object()
ABSENT = object()  # what an attribute the code names by a string, missing there, finds


def is_object(value: Any) -> bool:
    """An object a guard checks by type: not a value, array, container, class, module or
    mock (those are guarded or walked otherwise; each mock has a class of its own)."""
    return not (is_value(value) or isinstance(value, (type, types.ModuleType, np.ndarray,
                                                       Array)) or is_mock(value) or
                container_shape(value) is not None or arguments.describe(value) is not None)


def is_mock(value: Any) -> bool:
    mock = sys.modules.get("unittest.mock")
    return mock is not None and isinstance(value, mock.NonCallableMock)


SELECTORS = (int, float, complex, str, bool, np.integer, np.floating, np.complexfloating,
             np.bool_, type(None), enum.Enum, bytes, slice, range, fractions.Fraction,
             decimal.Decimal, datetime.timedelta, datetime.date, datetime.time)


def is_value(value: Any) -> bool:
    """A Python value a guard compares: a number, string, None or enum member, or a tuple
    of them (a tuple passed whole to a kernel, a launch grid)."""
    return isinstance(value, SELECTORS) or (
        type(value) is tuple and len(value) <= 16 and all(isinstance(v, SELECTORS)
                                                           for v in value))


BREADTH = 256  # entries looked at per container or object
# callables that are made anew on every attribute read (a bound method): never a kernel
_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
              types.BuiltinMethodType, types.MethodWrapperType)
