#!/usr/bin/env bash
# The whole behaviour suite on both backends (sim and cuda) on a GPU machine, spread over
# CPU cores with pytest-xdist (the device image has it), then the GPU profile of the random
# programs. Logs in $OUT: env.log, pytest.log, fuzz.log. About 5 minutes on the H200.
set -o pipefail
source "$(dirname "$0")/_gpu_env.sh"
{
  nvidia-smi -L
  python3 -c "import numba, numba.cuda, numpy, cuda.core; print('numba', numba.__version__, 'numpy', numpy.__version__, 'cuda.core', cuda.core.__version__, 'gpu', numba.cuda.is_available())"
  timeout 90 python3 examples/quickstart.py
  echo "quickstart rc=$?"
} > "$OUT/env.log" 2>&1
# a fault poisons the process it happened in: -n spreads the suite over processes, so one
# fault fails only its own worker's later tests (look for the worker's first failure)
timeout ${TEST_TIMEOUT:-420} python3 -m pytest -q -n ${WORKERS:-12} -p no:cacheprovider -rfE \
  -m "not gpu_memory" ${PYTEST_ARGS:-tests benchmarks} > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?" >> "$OUT/pytest.log"
# tests of the GPU's free memory run alone
timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu_memory tests >> "$OUT/pytest.log" 2>&1
echo "gpu_memory rc=$?" >> "$OUT/pytest.log"
TRACEGRAPH_FUZZ=gpu TRACEGRAPH_FUZZ_GPU_EXAMPLES=${FUZZ_EXAMPLES:-300} TRACEGRAPH_TEST_BACKENDS=cuda \
  timeout ${FUZZ_TIMEOUT:-200} python3 -m pytest -q \
  -p no:cacheprovider -rfE -m slow tests/fuzz/test_random_programs.py > "$OUT/fuzz.log" 2>&1
echo "fuzz rc=$?" >> "$OUT/fuzz.log"
