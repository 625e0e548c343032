#!/usr/bin/env bash
# Builds ftplan with CUDA and runs the full calibration on a GPU machine, writing the profile; then
# the executor's validation matrix (scripts/validation-matrix.sh) with the CUDA device, so the
# first GPU machine validates the executor's GPU path too (docs/validation.md).
# Calibration in under 5 minutes on a typical GPU server (build ~1 min with -j on 16 cores for the
# present GPU's architecture only; calibration ~3 min: GPU ~1.5, storage ~1.2, CPU ~0.3); the matrix
# a few minutes more (FTPLAN_VALIDATE=0 skips it).
#
#   calibrate/run-on-gpu.sh [PROFILE.yaml] [more `ftplan calibrate` options, e.g. --storage-dir /nvme0,/nvme1]
#
# Needs: the packages of scripts/setup.sh (it installs them where it can), the CUDA toolkit with nvcc
# (found via $CUDACXX, /usr/local/cuda/bin/nvcc or PATH), cuBLAS, and an NVIDIA driver at least as new as
# the toolkit. NCCL (for collectives, with >1 GPU) is used when nccl.h and libnccl are found.
# Environment: FTPLAN_CUDA_ARCHS (default "native": only the GPUs present), FTPLAN_STORAGE_DIR (default
# /var/tmp; must be on the drive to measure, not tmpfs), FTPLAN_TIME_LIMIT_S (default 285),
# FTPLAN_VALIDATE_TIME_LIMIT_S (the matrix's, default 600).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
out=${1:-calibration-$(hostname -s)-$(date -u +%Y%m%dT%H%M%SZ).yaml}
[[ $# -gt 0 ]] && shift

if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv
else
  echo "run-on-gpu: nvidia-smi not found; ftplan will say whether it finds a CUDA device" >&2
fi

scripts/setup.sh || echo "run-on-gpu: could not install packages; building with what is there" >&2

nvcc=${CUDACXX:-}
[[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
[[ -z $nvcc ]] && nvcc=$(command -v nvcc || true)
if [[ -z $nvcc ]]; then
  echo "run-on-gpu: no nvcc found (set CUDACXX); the CUDA part cannot be built" >&2
  exit 1
fi
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
cmake -S . -B build-gpu "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DFTPLAN_BUILD_TESTS=OFF \
  -DFTPLAN_BUILD_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="${FTPLAN_CUDA_ARCHS:-native}" >/dev/null
cmake --build build-gpu --parallel "$(nproc)" --target ftplan
echo "run-on-gpu: built in $(( $(date +%s) - start )) s" >&2

limit=${FTPLAN_TIME_LIMIT_S:-285}
left=$(( limit - ($(date +%s) - start) ))
(( left < 60 )) && left=60
# The calibration removes its scratch files itself, also on SIGTERM from timeout.
timeout --signal=TERM "$left" build-gpu/cli/ftplan calibrate --out "$out" \
  --storage-dir "${FTPLAN_STORAGE_DIR:-/var/tmp}" "$@" | tee "${out%.yaml}.txt"
echo "run-on-gpu: profile in $out, table in ${out%.yaml}.txt, $(( $(date +%s) - start )) s in all" >&2

if [[ ${FTPLAN_VALIDATE:-1} != 0 ]]; then
  # The matrix on the CUDA device: the scenario as written, then scaled to more parameters per
  # token; storage directories under the one measured (NVMe tier files, removed on exit).
  dir=${FTPLAN_STORAGE_DIR:-/var/tmp}/ftplan-validation-$$
  mkdir -p "$dir/nvme0" "$dir/nvme1"
  trap 'rm -rf "$dir"' EXIT
  FTPLAN_DEVICE=cuda timeout --signal=TERM "${FTPLAN_VALIDATE_TIME_LIMIT_S:-600}" \
    scripts/validation-matrix.sh build-gpu "$dir/nvme0" "$dir/nvme1" | tee "${out%.yaml}-validation.md" || true
  FTPLAN_DEVICE=cuda timeout --signal=TERM "${FTPLAN_VALIDATE_TIME_LIMIT_S:-600}" \
    scripts/validation-matrix.sh build-gpu "$dir/nvme0" "$dir/nvme1" layers=4,hidden=1024,seq=32 \
    | tee -a "${out%.yaml}-validation.md" || true
  echo "run-on-gpu: validation matrix (CUDA device) in ${out%.yaml}-validation.md, JSON in build-gpu/validation/" >&2
fi
