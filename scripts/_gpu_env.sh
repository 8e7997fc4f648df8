# Sourced by the GPU scripts: $OUT, the carried wheels (.whl/, see docs/gpu.md) on PYTHONPATH.
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
