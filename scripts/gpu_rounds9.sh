#!/usr/bin/env bash
# The ninth session's hostile rounds (29 to 33) and the class-attribute tests on the GPU's
# cuda backend: a short check for a nearly spent budget.
set -o pipefail
source "$(dirname "$0")/_gpu_env.sh"
TRACEGRAPH_TEST_BACKENDS=cuda timeout ${TEST_TIMEOUT:-90} python3 -m pytest -q -n 8 \
  -p no:cacheprovider -rfE tests/semantics/python_state > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?" >> "$OUT/pytest.log"
