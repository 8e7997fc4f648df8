#!/usr/bin/env bash
# One lease, under the 600 s a command may run: what the sixth to eighth sessions (no GPU
# lent) left to run, most telling first. Logs and results under $OUT.
#   1. W1, W2, W4, W7 (quick): the direct path now armed for W1/W2/W4 and for captured
#      arrays; W1's shape-specialized contender (issue 15, item 3)
#   2. the cuda backend's tests (the C Entry, its checks, deferred kernel nodes)
#   3. W5 with and without the C node batch (TRACEGRAPH_BATCH_NODES=1)
#   4. the random programs on the GPU
set -o pipefail
source "$(dirname "$0")/_gpu_env.sh"
{
  nvidia-smi -L
  python3 -c "import numba, numpy, cuda.core; print('numba', numba.__version__, 'numpy', numpy.__version__, 'cuda.core', cuda.core.__version__)"
  timeout 60 python3 examples/quickstart.py; echo "quickstart rc=$?"
} > "$OUT/env.log" 2>&1
timeout ${BENCH_TIMEOUT:-170} python3 benchmarks/run.py --quick --out "$OUT/bench" \
  --only W1,W2,W4,W7 > "$OUT/bench.log" 2>&1
echo "bench rc=$?" >> "$OUT/bench.log"
TRACEGRAPH_TEST_BACKENDS=cuda timeout ${TEST_TIMEOUT:-200} python3 -m pytest -q \
  -n ${WORKERS:-12} -p no:cacheprovider -rfE -m "not gpu_memory" tests > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?" >> "$OUT/pytest.log"
timeout 60 python3 benchmarks/run.py --out /tmp/w5a --only W5 > "$OUT/w5-default.log" 2>&1
TRACEGRAPH_BATCH_NODES=1 timeout 60 python3 benchmarks/run.py --out /tmp/w5b --only W5 \
  > "$OUT/w5-batch.log" 2>&1
cp /tmp/w5a/results.json "$OUT/w5-default.json" 2>/dev/null
cp /tmp/w5b/results.json "$OUT/w5-batch.json" 2>/dev/null
TRACEGRAPH_FUZZ=gpu TRACEGRAPH_FUZZ_GPU_EXAMPLES=${FUZZ_EXAMPLES:-60} TRACEGRAPH_TEST_BACKENDS=cuda \
  timeout ${FUZZ_TIMEOUT:-45} python3 -m pytest -q -p no:cacheprovider -rfE -m slow \
  tests/fuzz/test_random_programs.py > "$OUT/fuzz.log" 2>&1
echo "fuzz rc=$?" >> "$OUT/fuzz.log"
