#!/usr/bin/env bash
# The real-GPU check, run on the device machine through the `device` tool:
#   carry: [".wheels"]; command: bash scripts/gpu_check.sh
# 1. the full test suite on the GPU (CPU and CUDA parametrizations, dask on CuPy chunks,
#    the 2**31+ test);
# 2. compute-sanitizer memcheck and racecheck over both kernels (scripts/sanitizer_cases.py);
# 3. the side-by-side benchmarks (python -m dmlnumba.bench --target gpu, then dask-gpu).
# numba-cuda 0.30.4 cannot compile kernels with NumPy 2.5 (np.row_stack was removed), so a
# NumPy 2.4 wheel travels in .wheels/ and goes first on the path; so do dask and
# distributed, which the GPU image lacks.  Exits non-zero if any step failed.
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
if ls .wheels/numpy-*.whl >/dev/null 2>&1; then
    pip install -q --no-index --find-links .wheels --target /tmp/np "numpy==2.4.*" \
        "dask[array]" distributed || exit 1
fi
export PYTHONPATH=/tmp/np:$PWD/src:$PWD/tests PYTHONUNBUFFERED=1
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-dev}"
failed=0
date -u +"date: %Y-%m-%d %H:%M UTC" | tee "$OUT/summary.txt"
# COMMIT: the commit the caller copied over (the device copy's own git metadata may be older
# than its working tree).
echo "commit: ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null) (HEAD of the device copy)}" | tee -a "$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$OUT/summary.txt"
python3 -c "import numpy, numba, numba_cuda, dask; print('numpy', numpy.__version__, 'numba', numba.__version__, 'numba-cuda', numba_cuda.__version__, 'dask', dask.__version__)" | tee -a "$OUT/summary.txt"

if [ -z "${SKIP_TESTS:-}" ]; then
    echo "== pytest (GPU)" | tee -a "$OUT/summary.txt"
    python3 -m pytest tests -q -p no:cacheprovider -x ${PYTEST_ARGS:-} > "$OUT/pytest.log" 2>&1 || failed=1
    tail -15 "$OUT/pytest.log"
    grep -E "passed|failed" "$OUT/pytest.log" | tail -1 | tee -a "$OUT/summary.txt"

    for tool in memcheck racecheck synccheck; do
        echo "== compute-sanitizer --tool $tool" | tee -a "$OUT/summary.txt"
        compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 \
            python3 scripts/sanitizer_cases.py > "$OUT/sanitizer-$tool.log" 2>&1 || failed=1
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Error|cases ok" "$OUT/sanitizer-$tool.log" | tail -4 | tee -a "$OUT/summary.txt"
    done
fi

if [ -z "${SKIP_BENCH:-}" ]; then
    echo "== benchmark" | tee -a "$OUT/summary.txt"
    python3 -m dmlnumba.bench --target gpu --json "$OUT/bench-gpu.json" 2>&1 | tee -a "$OUT/summary.txt" || failed=1
    python3 -m dmlnumba.bench --target dask-gpu --json "$OUT/bench-dask-gpu.json" 2>&1 | tee -a "$OUT/summary.txt" || failed=1
fi
echo "failed=$failed" | tee -a "$OUT/summary.txt"
exit $failed
