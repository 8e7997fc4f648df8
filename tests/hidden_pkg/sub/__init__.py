from . import mod  # noqa: F401
