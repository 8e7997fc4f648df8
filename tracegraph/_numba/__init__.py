"""The only place that touches Numba internals (one module per concern).

- launch interception: while a tracer is active on this thread, `kernel[grid, block](...)`
  and `kernel.forall(n)(...)` are handed to it instead of launching;
- kernel facts: name, Python function, debug/device flags;
- read/write inference from a kernel's untyped Numba IR;
- argument typing and the flattened parameter layout Numba passes to the driver
  (each array is meminfo, parent, nitems, itemsize, data, shape..., strides...);
- turning any kernel into a simulator kernel, and the compiled overload for the driver.
"""
from __future__ import annotations

from .access import (
    OPAQUE,
    KernelAccess,
    infer_kernel_access,
    infer_param_access,
)
from .captured import GlobalRef, holds_arrays, same_binding, unknown_globals
from .compiled_in import compiled_in_values, host_arrays, same_constant, shown_constant
from .devicearrays import (
    allocation_refs,
    device_address,
    device_array_at,
    device_array_with_room,
    device_bytes,
    device_ordinal,
    device_view,
    is_device_array_type,
    is_out_of_memory,
    is_simulated_device_array,
    is_simulated_device_array_type,
    memory_info,
    simulated_device_array_host,
    to_device,
    traced_array_class,
    view_at,
)
from .hooks import current_tracer, in_host_callback, install_hooks, set_tracer
from .kernels import (
    SIMULATOR,
    compiling,
    is_device_function,
    is_kernel,
    kernel_extensions,
    kernel_is_debug,
    kernel_name,
    kernel_py_func,
    uses_grid_sync,
)
from .layout import (
    array_type,
    baked_device_arrays,
    compiled_kernel,
    cooperative_grid_limit,
    dtype_problem,
    flatten_params,
    layout_of,
    ptx_for,
    record_simulator_signatures,
    scalar_type,
    select_overload,
    simulator_scalar,
    tuple_type,
    unflatten_params,
)
from .limits import CC_90, LaunchLimits, launch_limits
from .simshared import fix_eager_shared_arrays
from .simulate import (
    GridSyncError,
    run_simulated,
    simulator_array,
    simulator_kernel,
    simulator_lock,
)

if SIMULATOR:
    record_simulator_signatures()
install_hooks()  # inert until a tracer is active on a thread

__all__ = [
    "CC_90",
    "OPAQUE",
    "SIMULATOR",
    "GlobalRef",
    "GridSyncError",
    "KernelAccess",
    "LaunchLimits",
    "allocation_refs",
    "array_type",
    "baked_device_arrays",
    "compiled_in_values",
    "compiled_kernel",
    "compiling",
    "cooperative_grid_limit",
    "current_tracer",
    "device_address",
    "device_array_at",
    "device_array_with_room",
    "device_bytes",
    "device_ordinal",
    "device_view",
    "dtype_problem",
    "fix_eager_shared_arrays",
    "flatten_params",
    "holds_arrays",
    "host_arrays",
    "in_host_callback",
    "infer_kernel_access",
    "infer_param_access",
    "install_hooks",
    "is_device_array_type",
    "is_device_function",
    "is_kernel",
    "is_out_of_memory",
    "is_simulated_device_array",
    "is_simulated_device_array_type",
    "kernel_extensions",
    "kernel_is_debug",
    "kernel_name",
    "kernel_py_func",
    "launch_limits",
    "layout_of",
    "memory_info",
    "ptx_for",
    "run_simulated",
    "same_binding",
    "same_constant",
    "scalar_type",
    "select_overload",
    "set_tracer",
    "shown_constant",
    "simulated_device_array_host",
    "simulator_array",
    "simulator_kernel",
    "simulator_lock",
    "simulator_scalar",
    "to_device",
    "traced_array_class",
    "tuple_type",
    "unflatten_params",
    "unknown_globals",
    "uses_grid_sync",
    "view_at",
]
