#!/usr/bin/env bash
# The tenth session's last lease: the whole cuda-backend suite on the final code, the first
# replay against the later ones and against an uploaded capture's (issue 15, item 4), and
# W5's phases against capture once more. Logs under $OUT.
set -o pipefail
source "$(dirname "$0")/_gpu_env.sh"
nvidia-smi -L > "$OUT/probes.log"
start=$(date +%s)
TRACEGRAPH_TEST_BACKENDS=cuda timeout ${TEST_TIMEOUT:-130} python3 -m pytest -q \
  -n ${WORKERS:-12} -p no:cacheprovider -rfE -m "not gpu_memory" tests > "$OUT/pytest.log" 2>&1
echo "pytest rc=$? in $(( $(date +%s) - start )) s" >> "$OUT/pytest.log"
timeout 120 python3 scripts/probe_first_replay.py "$OUT/first_replay.json" >> "$OUT/probes.log" 2>&1
echo "first replay rc=$?" >> "$OUT/probes.log"
ROUNDS=11 timeout 120 python3 scripts/probe_w5_parts.py "$OUT/w5_parts.json" >> "$OUT/probes.log" 2>&1
echo "w5 rc=$?" >> "$OUT/probes.log"
