# Sourced by the GPU scripts: $OUT, the carried wheels (.whl/, see docs/gpu.md) on PYTHONPATH.
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
# the optional C launch extension (setup.py), built in place: the tree is not pip-installed here
python3 setup.py -q build_ext --inplace > /tmp/build_ext.log 2>&1
python3 -c "import tracegraph.backends.cuda._graphlaunch" 2>/dev/null \
  || echo "C launch extension not built: replays launch through cuda.core (/tmp/build_ext.log)"
