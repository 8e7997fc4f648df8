"""A package whose sub-module holds device functions a kernel reaches by a dotted path
(tests/hidden_access.py)."""
from . import sub  # noqa: F401
