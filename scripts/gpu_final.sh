#!/usr/bin/env bash
# One bounded GPU pass for a session with little device time left (about 7 minutes of
# work): environment, the GPU tests of the newest features and of the cuda backend, the
# device-loop examples, and the W3 (cuBLAS) / W7 (replay host cost) benchmarks. Logs in $OUT.
set -o pipefail
source "$(dirname "$0")/_gpu_env.sh"
{
  nvidia-smi -L
  python3 -c "import numba, numba.cuda, numpy, cuda.core; print('numba', numba.__version__, 'numpy', numpy.__version__, 'cuda.core', cuda.core.__version__, 'gpu', numba.cuda.is_available())"
  python3 -c "import nvmath; from nvmath.bindings import cublas; print('nvmath', nvmath.__version__)"
  python3 examples/quickstart.py
} > "$OUT/env.log" 2>&1
timeout ${TEST_TIMEOUT:-230} python3 -m pytest -q -p no:cacheprovider -rfE \
  tests/semantics/test_cooperative.py tests/semantics/test_foreign.py tests/semantics/test_control_flow.py \
  tests/backends/test_backend_cuda.py tests/semantics/test_dynamic.py tests/semantics/test_ops.py \
  tests/semantics/test_captured_device_arrays.py \
  tests/semantics/test_kernel_arguments.py \
  tests/semantics/test_host_inputs_and_write_back.py \
  tests/semantics/test_views_and_aliasing.py \
  tests/semantics/test_traced_arrays.py \
  tests/semantics/test_call_signatures.py \
  tests/semantics/test_zero_size_arrays.py \
  tests/semantics/test_refusals.py \
  ${EXTRA_TESTS} > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?" >> "$OUT/pytest.log"
{
  timeout 60 python3 examples/solve_until_converged.py
  timeout 45 python3 examples/rl_rollout.py
} > "$OUT/examples.log" 2>&1
timeout ${BENCH_TIMEOUT:-110} python3 benchmarks/run.py --out "$OUT/bench" --only W3 > "$OUT/bench.log" 2>&1
timeout 60 python3 benchmarks/run.py --out "$OUT/bench7" --only W7 --quick >> "$OUT/bench.log" 2>&1
tail -c 20000 "$OUT/bench.log" > "$OUT/bench_tail.log"
