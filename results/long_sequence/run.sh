#!/usr/bin/env bash
# Long-sequence training (issue 5, part 3): T = 64 attention windows, beyond exact enumeration, trained with the
# mean-field sampler (hj and h modes) next to softmax, seeds 0 and 1, 150 steps at batch 32 (the ablation's other settings:
# 1 layer, 1 head, n_embd 64, lr 3e-3; sized to finish in a session on a shared 2-core machine). Regenerate from the
# repository root:
#     nice -n 5 bash results/long_sequence/run.sh && python results/long_sequence/summarize.py
# Runs go to results/long_sequence/runs/<task>_<mode>_T64_s<seed>/ (existing runs are resumed or skipped).
set -euo pipefail
OUT=results/long_sequence/runs
DATA=${HYBRID_ATTENTION_DATA:-../shared/data/tinyshakespeare.txt}
T=${T:-64}
STEPS=${STEPS:-150}
BATCH=${BATCH:-32}
SEEDS=${SEEDS:-"0 1"}
TASKS=${TASKS:-"brackets shakespeare"}
mkdir -p "$OUT"
for seed in $SEEDS; do
  for task in $TASKS; do
    for mode in softmax hj h; do
      dir="$OUT/${task}_${mode}_T${T}_s${seed}"
      if [ -f "$dir/metrics.json" ] && grep -q '"finished": true' "$dir/metrics.json"; then continue; fi
      extra=()
      [ "$mode" != softmax ] && extra+=(--sampler meanfield)
      [ "$task" = shakespeare ] && extra+=(--data "$DATA")
      [ -f "$dir/checkpoint.pt" ] && extra+=(--resume)
      hybrid-attention train --task "$task" --attention "$mode" --block-size "$T" --steps "$STEPS" --seed "$seed" \
        --batch-size "$BATCH" --eval-interval 50 --threads 1 --no-progress --out "$dir" "${extra[@]}"
    done
  done
done
