#!/usr/bin/env bash
# One GPU pass of about 9 minutes: environment, the cuda-backend tests of the suites that
# touch the driver, the W3 (cuBLAS / cuBLASLt) and W7 (replay host cost) benchmarks, the
# dynamic-shape numbers (scripts/measure_dynamic.py), the decode example's benchmark and
# where a replay's host time goes (scripts/profile_replay.py).
# Logs and JSON in $OUT.
set -o pipefail
source "$(dirname "$0")/_gpu_env.sh"
{
  nvidia-smi -L
  python3 -c "import numba, numba.cuda, numpy, cuda.core; print('numba', numba.__version__, 'numpy', numpy.__version__, 'cuda.core', cuda.core.__version__, 'gpu', numba.cuda.is_available())"
  python3 -c "import nvmath; from nvmath.bindings import cublas, cublasLt; print('nvmath', nvmath.__version__)"
  timeout 60 python3 examples/quickstart.py
} > "$OUT/env.log" 2>&1
TRACEGRAPH_TEST_BACKENDS=cuda timeout ${TEST_TIMEOUT:-240} python3 -m pytest -q -p no:cacheprovider -rfE \
  ${TESTS:-tests/backends/test_backend_cuda.py tests/semantics/test_foreign.py tests/semantics/test_captured_device_arrays.py tests/semantics/test_kernel_arguments.py tests/semantics/test_host_inputs_and_write_back.py tests/semantics/test_views_and_aliasing.py tests/semantics/test_traced_arrays.py tests/semantics/test_call_signatures.py tests/semantics/test_zero_size_arrays.py tests/semantics/test_refusals.py tests/semantics/test_collectives.py tests/semantics/test_dynamic.py tests/semantics/test_cooperative.py tests/semantics/test_control_flow.py tests/backends/test_moved_inputs.py} \
  > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?" >> "$OUT/pytest.log"
# at most 8 files come back from the device: the benchmarks' own outputs stay in /tmp
timeout ${BENCH_TIMEOUT:-120} python3 benchmarks/run.py --out /tmp/bench3 --only W3 > "$OUT/bench.log" 2>&1
timeout 60 python3 benchmarks/run.py --out /tmp/bench7 --only W7 --quick >> "$OUT/bench.log" 2>&1
cp /tmp/bench3/results.json "$OUT/bench3.json"; cp /tmp/bench7/results.json "$OUT/bench7.json"
timeout ${DYN_TIMEOUT:-70} python3 scripts/measure_dynamic.py "$OUT/dynamic.json" >> "$OUT/bench.log" 2>&1
echo "dynamic rc=$?" >> "$OUT/bench.log"
timeout ${DECODE_TIMEOUT:-70} python3 examples/decode_step.py > "$OUT/decode.log" 2>&1
echo "decode rc=$?" >> "$OUT/decode.log"
timeout ${PROFILE_TIMEOUT:-90} python3 scripts/profile_replay.py "$OUT/profile.json" >> "$OUT/bench.log" 2>&1
echo "profile rc=$?" >> "$OUT/bench.log"
