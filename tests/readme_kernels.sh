#!/usr/bin/env bash
# The README's command-line example under each CPU kernel setting and thread count, to measure how far another CPU's
# float kernels move its printed numbers (tests/test_readme.py states the tolerance this measured). About 4 minutes.
# Usage: bash tests/readme_kernels.sh   (in the project's environment)
set -euo pipefail
for cap in default avx2 avx512; do
  if [ "$cap" = avx512 ] && ! grep -q avx512f /proc/cpuinfo; then
    echo "== ATEN_CPU_CAPABILITY=avx512: skipped, this CPU has no AVX-512 (torch would stop on an illegal instruction)"
    continue
  fi
  for th in 1 2; do
    d=$(mktemp -d)
    echo "== ATEN_CPU_CAPABILITY=$cap OMP_NUM_THREADS=$th"
    (
      cd "$d"
      export ATEN_CPU_CAPABILITY=$cap OMP_NUM_THREADS=$th
      hybrid-attention train --task brackets --attention softmax --block-size 8 --steps 100 --no-ffn --out runs/softmax --no-progress
      hybrid-attention train --task brackets --attention hj --block-size 8 --steps 100 --no-ffn --out runs/hj --no-progress
      hybrid-attention train --task brackets --attention hj --block-size 8 --steps 100 --no-ffn --out runs/qemcmc --eval-exact \
        --sampler qemcmc --no-progress
    ) 2>/dev/null
    rm -rf "$d"
  done
done
