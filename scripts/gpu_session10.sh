#!/usr/bin/env bash
# The ninth session's second lease: the class-attribute fix's tests on the GPU (kernels a
# class holds bind there), W5 default against the C batch alternated (gpu_w5_ab.sh).
set -o pipefail
source "$(dirname "$0")/_gpu_env.sh"
TRACEGRAPH_TEST_BACKENDS=cuda timeout 120 python3 -m pytest -q -n 8 -p no:cacheprovider -rfE \
  tests/semantics/python_state > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?" >> "$OUT/pytest.log"
bash "$(dirname "$0")/gpu_w5_ab.sh"
