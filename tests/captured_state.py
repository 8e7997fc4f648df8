"""A module holding a device array kernels name as `captured_state.ARRAY`."""
import numpy as np
from numba import cuda

ARRAY = cuda.to_device(np.zeros(16))
