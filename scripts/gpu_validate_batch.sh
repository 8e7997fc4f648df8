#!/usr/bin/env bash
# What the sixth session (no GPU lent) left to run: the cuda-backend suite with kernel nodes
# made in one C call (TRACEGRAPH_BATCH_NODES=1), and W5 with and without it in one lease.
# If both pass and the batch is faster, make it the default (config.batch_nodes).
# Logs in $OUT: batch-pytest.log, w5-default.log, w5-batch.log.
set -o pipefail
source "$(dirname "$0")/_gpu_env.sh"
TRACEGRAPH_BATCH_NODES=1 TRACEGRAPH_TEST_BACKENDS=cuda timeout ${TEST_TIMEOUT:-300} \
  python3 -m pytest -q -n ${WORKERS:-12} -p no:cacheprovider -rfE -m "not gpu_memory" tests \
  > "$OUT/batch-pytest.log" 2>&1
echo "pytest rc=$?" >> "$OUT/batch-pytest.log"
timeout 120 python3 benchmarks/run.py --out /tmp/w5a --only W5 > "$OUT/w5-default.log" 2>&1
TRACEGRAPH_BATCH_NODES=1 timeout 120 python3 benchmarks/run.py --out /tmp/w5b --only W5 \
  > "$OUT/w5-batch.log" 2>&1
cp /tmp/w5a/results.json "$OUT/w5-default.json"; cp /tmp/w5b/results.json "$OUT/w5-batch.json"
