#!/usr/bin/env bash
# The real-GPU check, run on the device machine through the `device` tool:
#   carry: [".wheels"]; command: bash scripts/gpu_check.sh
# 1. the full test suite on the GPU (CPU and CUDA parametrizations, the 2**31+ test);
# 2. compute-sanitizer memcheck and racecheck over both kernels;
# 3. the side-by-side benchmark (python -m dmlnumba.bench --target gpu).
# numba-cuda 0.30.4 cannot compile kernels with NumPy 2.5 (np.row_stack was
# removed), so a NumPy 2.4 wheel travels in .wheels/ and goes first on the path.
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
if ls .wheels/numpy-*.whl >/dev/null 2>&1; then
    pip install -q --no-deps --target /tmp/np .wheels/numpy-*.whl
fi
export PYTHONPATH=/tmp/np:$PWD/src:$PWD/tests PYTHONUNBUFFERED=1
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-dev}"
date -u +"date: %Y-%m-%d %H:%M UTC" | tee "$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$OUT/summary.txt"
python3 -c "import numpy, numba, numba_cuda; print('numpy', numpy.__version__, 'numba', numba.__version__, 'numba-cuda', numba_cuda.__version__)" | tee -a "$OUT/summary.txt"

echo "== pytest (GPU)" | tee -a "$OUT/summary.txt"
python3 -m pytest tests -q -p no:cacheprovider -x ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/pytest.log" | tail -15
grep -E "passed|failed" "$OUT/pytest.log" | tail -1 | tee -a "$OUT/summary.txt"

for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool" | tee -a "$OUT/summary.txt"
    compute-sanitizer --tool $tool --print-limit 20 python3 scripts/sanitizer_cases.py \
        > "$OUT/sanitizer-$tool.log" 2>&1
    echo "rc=$?" >> "$OUT/sanitizer-$tool.log"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Error|rc=|cases ok" "$OUT/sanitizer-$tool.log" | tail -4 | tee -a "$OUT/summary.txt"
done

if [ -z "${SKIP_BENCH:-}" ]; then
    echo "== benchmark" | tee -a "$OUT/summary.txt"
    python3 -m dmlnumba.bench --target gpu --json "$OUT/bench-gpu.json" 2>&1 | tee -a "$OUT/summary.txt"
fi
