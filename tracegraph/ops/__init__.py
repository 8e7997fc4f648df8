"""Array operations as Numba kernels with declared accesses (see docs/ops.md)."""
