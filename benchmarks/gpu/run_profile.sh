#!/usr/bin/env bash
# H200: build, PDL probe, per-thunk device-time profile of the BERT shapes.
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
(nvcc -O2 -arch=sm_90 benchmarks/gpu/pdl_probe.cu -o /tmp/pdl && /tmp/pdl) 2>&1 | tail -5 &
python3 setup.py build_ext --inplace -q > /tmp/build.log 2>&1 || tail -20 /tmp/build.log
wait
python3 benchmarks/gpu/profile_cuda.py 2>&1 | tail -8
