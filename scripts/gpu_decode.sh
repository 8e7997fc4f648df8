#!/bin/bash
# The decode step on a GPU, from the repository root with $OUT set: W8, where a step's time
# goes (host time per call; GPU time per node, each node launched alone between CUDA
# events, or through Nsight Compute with NCU=1) before and after, the decode ops' tests.
#   STAGES=w8,profile              (default; also: w8quick, w3, w5, fusion, tests, gpt2)
#   BEFORE=DIR                     a tree of the base commit (tracegraph/, examples/), for
#                                  the profile's "before" rows; none: after only. Made with
#     mkdir -p DIR && git archive 7dbfdd4 tracegraph setup.py examples | tar -x -C DIR
#   W8_SECONDS, W8_CONFIGS, W8_TORCH_COMPILE, BATCHES: shorter runs (see w8_decode.py)
# Two runs of at most 10 minutes hold it all: STAGES=tests,profile,gpt2,fusion BEFORE=...
# then STAGES=w8,w3 (W8 with torch.compile took no measured time yet: allow 5 minutes).
# At most 8 files come back: the logs here, everything else in $OUT/all.tgz.
set -u
source scripts/_gpu_env.sh
STAGES=${STAGES:-w8,profile}
BEFORE=${BEFORE:-}
NCU=${NCU:-0}
WORK=$OUT/work; mkdir -p "$WORK"
has() { [[ ",$STAGES," == *",$1,"* ]]; }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > "$OUT/gpu.txt"

bench() {  # mode workloads name seconds
  timeout "$4" python benchmarks/run.py $1 --only "$2" --out "$WORK/$3" > "$OUT/$3.txt" 2>&1
  echo "rc=$?" >> "$OUT/$3.txt"
  cp "$WORK/$3/results.md" "$OUT/$3-results.md" 2>/dev/null
  cp "$WORK/$3/results.json" "$OUT/$3-results.json" 2>/dev/null
}
if has w8; then bench "" W8 w8 "${W8_SECONDS:-280}"; fi
if has w8quick; then bench --quick W8 w8quick 200; fi
if has w3; then bench --quick W3 w3 120; fi
if has w5; then bench --quick W5 w5 120; fi
if has fusion; then
  timeout 60 python scripts/measure_fusion.py > "$OUT/fusion.txt" 2>&1
  echo "rc=$?" >> "$OUT/fusion.txt"
fi

profile() {  # tag example-path pythonpath config batches seconds
  local tag=$1 ex=$2 pp=$3 cfg=$4 batches=$5 limit=$6
  echo "== $tag $cfg" >> "$OUT/profile.txt"
  PYTHONPATH=/tmp/site:$pp timeout "$limit" python scripts/profile_decode.py host \
    --example "$ex" --config "$cfg" --batches "$batches" --out "$WORK" --tag "$tag-$cfg" \
    --calls 100 --events >> "$OUT/profile.txt" 2>&1 \
    || echo "host $tag $cfg failed rc=$?" >> "$OUT/profile.txt"
  [ "$NCU" = 1 ] || return 0
  PYTHONPATH=/tmp/site:$pp timeout 120 ncu --graph-profiling node --profile-from-start off \
    --metrics gpu__time_duration.sum --print-kernel-base function --csv \
    --log-file "$WORK/ncu-$tag-$cfg.csv" python scripts/profile_decode.py one-step \
    --example "$ex" --config "$cfg" --batches 1 > "$WORK/ncu-$tag-$cfg.log" 2>&1
  echo "== GPU time per node in the graph (Nsight Compute): $tag $cfg batch 1 (rc=$?)" \
    >> "$OUT/profile.txt"
  tail -1 "$WORK/ncu-$tag-$cfg.log" >> "$OUT/profile.txt"
  python scripts/profile_decode.py table "$WORK/ncu-$tag-$cfg.csv" >> "$OUT/profile.txt" 2>&1
}
if has profile; then
  if [ -n "$BEFORE" ]; then
    (cd "$BEFORE" && python3 setup.py -q build_ext --inplace > /tmp/build_before.log 2>&1)
    profile before "$BEFORE/examples/decode_step.py" "$PWD/$BEFORE" small "${BATCHES:-1,8,37,64}" 50
  fi
  profile after examples/decode_step.py "$PWD" small "${BATCHES:-1,8,37,64}" 45
  if has gpt2; then profile after examples/decode_step.py "$PWD" gpt2 1,8,37,64 70; fi
fi

if has tests; then
  TRACEGRAPH_TEST_BACKENDS=cuda timeout 150 python -m pytest -q -p no:cacheprovider \
    tests/semantics/test_ops_decode.py \
    "tests/test_examples.py::test_example_runs_and_checks_itself[decode_step]" \
    > "$OUT/tests.txt" 2>&1
  echo "tests rc=$?" >> "$OUT/tests.txt"
fi

tar -czf "$OUT/all.tgz" -C "$OUT" work && rm -rf "$WORK"
