#!/usr/bin/env bash
# One lease, under the 600 s a command may run: validate what the eighth session fixed after
# its GPU run (kernel-node parameter storage, the site-packages rule), the C node batch's
# suite, why equal scalars made anew took the full path on the GPU, W1's specialized contender.
set -o pipefail
source "$(dirname "$0")/_gpu_env.sh"
{
  nvidia-smi -L
  python3 -c "import numba, numpy, cuda.core; print('numba', numba.__version__, 'numpy', numpy.__version__, 'cuda.core', cuda.core.__version__)"
  timeout 60 python3 examples/quickstart.py; echo "quickstart rc=$?"
  timeout 60 python3 scripts/diag_equal_scalars.py; echo "diag rc=$?"
} > "$OUT/env.log" 2>&1
start=$(date +%s)
TRACEGRAPH_TEST_BACKENDS=cuda timeout ${TEST_TIMEOUT:-200} python3 -m pytest -q \
  -n ${WORKERS:-12} -p no:cacheprovider -rfE -m "not gpu_memory" tests > "$OUT/pytest.log" 2>&1
echo "pytest rc=$? in $(( $(date +%s) - start )) s" >> "$OUT/pytest.log"
start=$(date +%s)
TRACEGRAPH_BATCH_NODES=1 TRACEGRAPH_TEST_BACKENDS=cuda timeout ${TEST_TIMEOUT:-200} python3 -m pytest -q \
  -n ${WORKERS:-12} -p no:cacheprovider -rfE -m "not gpu_memory" tests > "$OUT/batch-pytest.log" 2>&1
echo "pytest rc=$? in $(( $(date +%s) - start )) s" >> "$OUT/batch-pytest.log"
timeout 60 python3 benchmarks/run.py --out /tmp/w5a --only W5 > "$OUT/w5-default.log" 2>&1
TRACEGRAPH_BATCH_NODES=1 timeout 60 python3 benchmarks/run.py --out /tmp/w5b --only W5 \
  > "$OUT/w5-batch.log" 2>&1
cp /tmp/w5a/results.md "$OUT/w5-default.md" 2>/dev/null
cp /tmp/w5b/results.md "$OUT/w5-batch.md" 2>/dev/null
timeout ${BENCH_TIMEOUT:-120} python3 benchmarks/run.py --quick --out /tmp/w1 --only W1 > "$OUT/w1.log" 2>&1
cp /tmp/w1/results.md "$OUT/w1.md" 2>/dev/null
