#!/bin/bash
# Kernel times (Nsight Compute, three launches) of nonzero at 2**24, 1-d and (4096, 64, 64), 1% and 50%,
# for config variants, each in a process of its own.  On a GPU machine: bash scripts/sweep_nonzero_2_24.sh
# (a register cap needs its own NUMBA_CACHE_DIR: the disk cache does not key on it).
export PYTHONPATH=/tmp/np:src
for v in "" "DMLNUMBA_CUDA_THREADS=512" "DMLNUMBA_CUDA_THREADS=128" "DMLNUMBA_CUDA_NONZERO_TILES=256" "DMLNUMBA_CUDA_NONZERO_MAX_REGISTERS=48 NUMBA_CACHE_DIR=/tmp/nc48" "DMLNUMBA_CUDA_NONZERO_MAX_REGISTERS=48 DMLNUMBA_CUDA_NONZERO_TILES=660 NUMBA_CACHE_DIR=/tmp/nc48" "DMLNUMBA_CUDA_NONZERO_TILES=384"; do
  for case in "DENSITY=0.01" "DENSITY=0.5" "DENSITY=0.01 SHAPE=4096,64,64" "DENSITY=0.5 SHAPE=4096,64,64"; do
    t=$(env $v $case K=24 timeout 120 ncu -k regex:nonzero --launch-skip 2 --launch-count 3 --metrics gpu__time_duration.sum --csv python3 scripts/profile_nonzero.py 2>/dev/null | grep gpu__time_duration | awk -F'","' '{gsub(/"/,"",$NF); printf "%s ", $NF}')
    echo "[${v:-default}] [$case] $t"
  done
done
